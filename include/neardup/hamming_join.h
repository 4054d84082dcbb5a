// HammingJoin: every pair of fingerprints within Hamming distance k, found bucket by bucket, so a
// single process (PermutedIndex::SelfJoin, dedup's SimHash candidate stage) and a distributed run
// (one shuffle partition of buckets at a time, neardup.dask) find exactly the same pairs.
//
// A join design (neardup/index_planner.h) splits the fingerprint into blocks (BitRange: position
// 0 is the most significant bit) and keys each table on a set of blocks, chosen so that two
// fingerprints within k agree on every key bit of at least one table (pigeonhole, probe radius
// 0). A bucket is (table, key): the fingerprints whose projection on that table has that key.
// Comparing the members of every bucket finds every pair within k; a pair is reported by the
// first table on which its keys agree only, so it comes out once over all buckets, whatever the
// order or the partitioning of the buckets.
//
// Thread safety: a HammingJoin is immutable after Create(); copies share it, and every const
// method may run on any number of threads at once.
#ifndef NEARDUP_HAMMING_JOIN_H_
#define NEARDUP_HAMMING_JOIN_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "neardup/export.h"
#include "neardup/fingerprint.h"
#include "neardup/hamming_index.h"
#include "neardup/index_planner.h"
#include "neardup/status.h"

namespace neardup {

class NEARDUP_EXPORT HammingJoin {
 public:
  // The cheapest join design for about `expected_size` fingerprints of `bits` (64 or 128) at
  // radius k in [0, bits / 4]. The pairs found do not depend on expected_size (only which table
  // reports each, and the cost): every part of a distributed join must use the same value.
  // InvalidArgument naming the bad value.
  static Result<HammingJoin> Create(int bits, int k, double expected_size);

  int bits() const;
  int k() const;
  size_t tables() const;
  const IndexDesign& design() const;

  // The key of `fingerprint` in `table` (< tables()): the fingerprints sharing it form a bucket.
  uint64_t Key(size_t table, const Fingerprint& fingerprint) const;
  // Keys(fps)[i * tables() + t] = Key(t, fps[i]).
  void Keys(std::span<const Fingerprint> fingerprints, std::vector<uint64_t>* keys) const;

  // Appends the pairs of one bucket: `documents` (distinct numbers, any order) and their
  // fingerprints, all with the same Key(table, .). A pair (a < b by document number, its distance)
  // is appended when its distance is at most k and `table` is the first table on which the two
  // keys agree.
  void BucketPairs(size_t table, std::span<const uint64_t> documents,
                   std::span<const Fingerprint> fingerprints,
                   std::vector<NeighborPair>* pairs) const;

  // The whole join of documents 0 .. n-1 (fingerprints[i] is document i's) on up to `threads`
  // threads (<= 0: all cores): every pair within k once, sorted by (a, b).
  std::vector<NeighborPair> SelfJoin(std::span<const Fingerprint> fingerprints, int threads) const;

 private:
  struct NEARDUP_HIDDEN Impl;
  explicit HammingJoin(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace neardup

#endif  // NEARDUP_HAMMING_JOIN_H_
