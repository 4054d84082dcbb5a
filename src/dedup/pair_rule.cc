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

double Jaccard32(std::span<const uint32_t> a, std::span<const uint32_t> b) {
  if (a.empty() && b.empty()) return 1.0;
  return JaccardOfCounts(SortedIntersectionSize<uint32_t>(a, b), a.size(), b.size());
}

bool ReachesJaccard(std::span<const uint32_t> a, std::span<const uint32_t> b, double threshold,
                    double* similarity) {
  if (a.empty() && b.empty()) {
    *similarity = 1.0;
    return 1.0 >= threshold;
  }
  const size_t na = a.size(), nb = b.size();
  const size_t smaller = std::min(na, nb);
  // JaccardOfCounts(c) grows with c, so the pair reaches the threshold iff the intersection holds
  // at least `need` elements, the smallest c with JaccardOfCounts(c) >= threshold (the same
  // expression, so the same rounding). c <= smaller, and JaccardOfCounts(smaller) = smaller /
  // larger.
  if (JaccardOfCounts(smaller, na, nb) < threshold) return false;
  const double estimate = threshold * static_cast<double>(na + nb) / (1.0 + threshold);
  size_t need = std::min(smaller, static_cast<size_t>(std::max(0.0, estimate)));
  while (need > 0 && JaccardOfCounts(need - 1, na, nb) >= threshold) --need;
  while (JaccardOfCounts(need, na, nb) < threshold)
    ++need;  // ends: JaccardOfCounts(smaller) >= threshold
  size_t i = 0, j = 0, common = 0;
  while (i < na && j < nb) {
    if (a[i] < b[j]) {
      ++i;
      if (common + std::min(na - i, nb - j) < need) return false;
    } else if (b[j] < a[i]) {
      ++j;
      if (common + std::min(na - i, nb - j) < need) return false;
    } else {
      ++common;
      ++i;
      ++j;
    }
  }
  if (common < need) return false;
  *similarity = JaccardOfCounts(common, na, nb);
  return true;
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
