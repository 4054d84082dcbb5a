// The pair rule; see dedup/pair_rule.h.
#include "dedup/pair_rule.h"

#include <xxhash.h>

#include "dedup/document_hashes.h"
#include "dedup/shingle_hashes.h"

namespace neardup {

const char* PairReasonName(PairReason reason) {
  switch (reason) {
    case PairReason::kExact:
      return "exact_duplicate";
    case PairReason::kWhitespace:
      return "whitespace";
    case PairReason::kNearDuplicate:
      return "near_duplicate";
    case PairReason::kNone:
      break;
  }
  return "none";
}

PairHashes HashesOfText(std::string_view text) {
  return {XXH3_64bits(text.data(), text.size()), text.size(), SqueezedHash(text)};
}

PairReason HashRule(const PairHashes& a, const PairHashes& b) {
  if (a.content_hash == b.content_hash && a.text_bytes == b.text_bytes) return PairReason::kExact;
  if (a.squeezed_hash == b.squeezed_hash) return PairReason::kWhitespace;
  return PairReason::kNone;
}

bool ShingleRule(std::span<const uint32_t> a, std::span<const uint32_t> b, double verify_threshold,
                 double* similarity) {
  if (verify_threshold <= 0) {
    *similarity = -1;
    return true;
  }
  return ReachesJaccard(a, b, verify_threshold, similarity);
}

}  // namespace neardup
