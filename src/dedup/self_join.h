// Exact self-join of fingerprints within Hamming distance k, used by dedup.
//
// Internal header. By the pigeonhole principle two fingerprints within k agree exactly on at least
// one of k+1 disjoint bit blocks, so each block is sorted and only fingerprints sharing a block
// value are compared; a pair is reported from the first block they agree on only. Thread safety:
// a pure function; it runs on up to `threads` threads.
#ifndef NEARDUP_DEDUP_SELF_JOIN_H_
#define NEARDUP_DEDUP_SELF_JOIN_H_

#include <vector>

#include "neardup/fingerprint.h"
#include "neardup/hamming_index.h"
#include "neardup/status.h"

namespace neardup {

// All pairs (a < b, as indices into `fingerprints`) within distance k, sorted by (a, b).
// InvalidArgument if widths differ or k is outside [0, bits/2].
Result<std::vector<NeighborPair>> SelfJoinWithinK(const std::vector<Fingerprint>& fingerprints,
                                                  int k, int threads);

}  // namespace neardup

#endif  // NEARDUP_DEDUP_SELF_JOIN_H_
