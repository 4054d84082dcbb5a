// Stage 3 of dedup, verification over arrays: DecidePairs; see neardup/dedup_stages.h.
#include <algorithm>

#include "common/parallel.h"
#include "neardup/dedup_stages.h"

namespace neardup {

void DecidePairs(const PairRule& rule, std::span<const PairDocument> left,
                 std::span<const PairDocument> right, int threads,
                 std::vector<PairDecision>* decisions, PairMeasure measure) {
  const size_t n = std::min(left.size(), right.size());
  decisions->resize(
      n);  // each one is written below (resize: no clearing pass over a reused vector)
  ParallelFor(
      n, threads,
      [&](size_t begin, size_t end) {
        if (measure == PairMeasure::kFast) {
          for (size_t i = begin; i < end; ++i) (*decisions)[i] = rule.DecideFast(left[i], right[i]);
        } else {
          for (size_t i = begin; i < end; ++i) (*decisions)[i] = rule.Decide(left[i], right[i]);
        }
      },
      64);
}

}  // namespace neardup
