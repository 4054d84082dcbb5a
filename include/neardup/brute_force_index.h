// BruteForceIndex: a HammingIndex that scans every stored fingerprint with XOR + popcount.
//
// The baseline and test oracle for the permuted index: trivially exact, O(n) per query, O(n^2)
// self-join (parallel). Thread safety: const methods may run concurrently with each other; they
// take a shared lock, so one thread may call Add/AddBatch/Remove at the same time.
#ifndef NEARDUP_BRUTE_FORCE_INDEX_H_
#define NEARDUP_BRUTE_FORCE_INDEX_H_

#include <memory>
#include <vector>

#include "neardup/export.h"
#include "neardup/hamming_index.h"

namespace neardup {

class NEARDUP_EXPORT BruteForceIndex : public HammingIndex {
 public:
  // An empty index of `bits`-wide fingerprints: InvalidArgument unless bits is 64 or 128.
  static Result<std::unique_ptr<BruteForceIndex>> Create(int bits = 64);
  ~BruteForceIndex() override;
  BruteForceIndex(const BruteForceIndex&) = delete;
  BruteForceIndex& operator=(const BruteForceIndex&) = delete;

  int bits() const override;
  int max_search_k() const override;  // = bits(): every k is answered by the scan
  size_t size() const override;

  Status Add(uint64_t id, const Fingerprint& fp) override;
  Status AddBatch(std::span<const uint64_t> ids, std::span<const Fingerprint> fps) override;
  size_t Remove(uint64_t id, const Fingerprint& fp) override;

  Result<std::vector<Neighbor>> Search(const Fingerprint& query, int k) const override;
  Result<std::vector<NeighborPair>> SelfJoin(int k) const override;
  IndexSearchStats stats() const override;

 private:
  struct NEARDUP_HIDDEN Impl;
  explicit BruteForceIndex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace neardup

#endif  // NEARDUP_BRUTE_FORCE_INDEX_H_
