// The pair rule: the one definition of "these two documents are duplicates", shared by every front
// end (neardup dedup's verification stage, JudgePair / `neardup explain`, and the store behind
// `neardup index` / `neardup serve` / neardup.Store). A pair is a duplicate when
//   1. the texts are byte-identical (content hash and length equal): exact_duplicate, or
//   2. they are identical once whitespace is removed (equal whitespace-free hash): whitespace, or
//   3. a candidate stage proposed the pair and the Jaccard similarity of the narrowed shingle sets
//      (neardup/shingles.h) reaches the verification threshold: near_duplicate.
// Steps 1-2 need only hashes; step 3 needs the sets (the Jaccard arithmetic is here too, free of
// any text processing, so the store links it without the text stages). The rule is applied in these
// two steps so a caller that holds only hashes (dedup's candidate merge) can decide the first part
// before loading any set. Callers never compare hashes or sets themselves.
//
// Internal header. Pure functions; thread-safe.
#ifndef NEARDUP_DEDUP_PAIR_RULE_H_
#define NEARDUP_DEDUP_PAIR_RULE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace neardup {

// Why a pair is a duplicate (or kNone).
enum class PairReason : uint8_t { kNone = 0, kExact = 1, kWhitespace = 2, kNearDuplicate = 3 };
// "exact_duplicate", "whitespace", "near_duplicate" or "none".
const char* PairReasonName(PairReason reason);

// The hashes of one document the rule's first step compares.
struct PairHashes {
  uint64_t content_hash = 0;   // XXH3-64 of the raw text
  uint64_t text_bytes = 0;     // bytes of the raw text
  uint64_t squeezed_hash = 0;  // SqueezedHash (dedup/document_hashes.h) of the raw text
};

// The hashes of a text, as every front end computes them.
PairHashes HashesOfText(std::string_view text);

// Step 1: kExact, kWhitespace, or kNone when the pair needs step 2.
PairReason HashRule(const PairHashes& a, const PairHashes& b);

// |a ∩ b| of two sorted distinct sets.
template <typename T>
size_t SortedIntersectionSize(std::span<const T> a, std::span<const T> b) {
  size_t i = 0, j = 0, common = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] < b[j]) {
      ++i;
    } else if (b[j] < a[i]) {
      ++j;
    } else {
      ++common;
      ++i;
      ++j;
    }
  }
  return common;
}
// |a ∩ b| / |a ∪ b| from the sizes.
inline double JaccardOfCounts(size_t common, size_t na, size_t nb) {
  return static_cast<double>(common) / static_cast<double>(na + nb - common);
}

// Jaccard of two sorted distinct 32-bit sets (1 when both are empty), as ShingleSimilarity::
// Jaccard32.
double Jaccard32(std::span<const uint32_t> a, std::span<const uint32_t> b);

// Whether Jaccard32(a, b) >= threshold (threshold > 0), and then *similarity = Jaccard32(a, b).
// Stops early once the threshold can no longer be reached (sizes too different, or too few
// elements left to share), so a rejected pair costs less than a full intersection; the answer is
// always the same as comparing Jaccard32(a, b) with the threshold.
bool ReachesJaccard(std::span<const uint32_t> a, std::span<const uint32_t> b, double threshold,
                    double* similarity);

// Step 2 for a candidate pair: whether the sorted distinct narrowed shingle sets reach
// `verify_threshold` (> 0), and then *similarity = their Jaccard. Stops early once the threshold
// is out of reach. A threshold <= 0 (verification off) accepts every candidate with *similarity
// set to -1 (not computed).
bool ShingleRule(std::span<const uint32_t> a, std::span<const uint32_t> b, double verify_threshold,
                 double* similarity);

}  // namespace neardup

#endif  // NEARDUP_DEDUP_PAIR_RULE_H_
