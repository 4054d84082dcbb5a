// One band's step of the LSH candidate join (LshCandidatePairs in neardup/minhash_lsh.h), for
// dedup, which keeps the band keys on disk and merges bounded runs of pairs. Internal header.
//
// Thread safety: pure functions over caller-owned buffers.
#ifndef NEARDUP_INDEX_LSH_BAND_PAIRS_H_
#define NEARDUP_INDEX_LSH_BAND_PAIRS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "neardup/minhash_lsh.h"

namespace neardup {

// One band's step of LshCandidatePairs, for callers that keep the band keys elsewhere (dedup
// spills them to disk): the distinct pairs, packed a << 32 | b and sorted, that the bucket rule
// yields over documents 0 .. keys.size() - 1 whose key in this band is keys[d] (documents with
// has_keys[d] false are in no bucket). Adds to `stats` (all fields but candidate_pairs).
// `records` and `scratch` are work buffers, reusable across calls: the records are sorted one
// slice of the key range at a time (up to 8 slices of at least 64 Ki documents), so together
// they hold about 2 bytes per document at 1M documents (16 for a small band), plus the pairs.
void LshBandPairs(std::span<const uint32_t> keys, const std::vector<bool>& has_keys,
                  uint32_t window, std::vector<uint64_t>* pairs, LshJoinStats* stats,
                  std::vector<uint64_t>* records, std::vector<uint64_t>* scratch);

// LshBandPairs in bounded memory: the same pairs, handed to emit_run(std::span<const uint64_t>)
// as sorted runs of at most max_run_pairs (>= 1) pairs each, as soon as `pairs` (the run buffer)
// fills, so a band that yields many pairs (a corpus of related documents) never holds them all.
// A pair occurs in one bucket of a band at most, so the runs are disjoint and their merge is
// LshBandPairs's result. The span points into `pairs`, reused for the next run (copy what is
// kept). When the band yields at most max_run_pairs pairs (one run), `pairs` still holds them
// on return.
void LshBandPairRuns(std::span<const uint32_t> keys, const std::vector<bool>& has_keys,
                     uint32_t window, size_t max_run_pairs,
                     const std::function<void(std::span<const uint64_t>)>& emit_run,
                     LshJoinStats* stats, std::vector<uint64_t>* pairs,
                     std::vector<uint64_t>* records, std::vector<uint64_t>* scratch);

}  // namespace neardup

#endif  // NEARDUP_INDEX_LSH_BAND_PAIRS_H_
