// BruteForceIndex: a HammingIndex that scans every stored fingerprint with XOR + popcount.
//
// The baseline and test oracle for the permuted index: trivially exact, O(n) per query, O(n^2)
// self-join (parallel). Thread safety: const methods may run concurrently with each other; they
// take a shared lock, so one thread may call Add/AddBatch/Remove at the same time.
#ifndef NEARDUP_BRUTE_FORCE_INDEX_H_
#define NEARDUP_BRUTE_FORCE_INDEX_H_

#include <atomic>
#include <shared_mutex>
#include <vector>

#include "neardup/export.h"
#include "neardup/hamming_index.h"

namespace neardup {

class NEARDUP_EXPORT BruteForceIndex : public HammingIndex {
 public:
  // bits must be 64 or 128 (anything else is treated as 64).
  explicit BruteForceIndex(int bits = 64);

  int bits() const override { return bits_; }
  int max_k() const override { return bits_; }
  size_t size() const override;

  Status Add(uint64_t id, const Fingerprint& fp) override;
  Status AddBatch(std::span<const uint64_t> ids, std::span<const Fingerprint> fps) override;
  size_t Remove(uint64_t id, const Fingerprint& fp) override;

  Result<std::vector<Neighbor>> Search(const Fingerprint& query, int k) const override;
  Result<std::vector<NeighborPair>> SelfJoin(int k) const override;
  IndexSearchStats stats() const override;

 private:
  int bits_;
  mutable std::shared_mutex mu_;
  std::vector<uint64_t> ids_;
  std::vector<uint64_t> lo_;
  std::vector<uint64_t> hi_;
  mutable std::atomic<uint64_t> queries_{0}, candidates_{0}, results_{0};
};

}  // namespace neardup

#endif  // NEARDUP_BRUTE_FORCE_INDEX_H_
