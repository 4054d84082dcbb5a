// LinearIndex: the store's small fallback HammingIndex (flat arrays, XOR + popcount scan) used for
// the memtable when no faster index is configured.
//
// Internal header. Same thread-safety contract as HammingIndex: const methods may run concurrently
// with each other; the store serialises mutators against readers with its own lock.
#ifndef NEARDUP_STORE_LINEAR_INDEX_H_
#define NEARDUP_STORE_LINEAR_INDEX_H_

#include <algorithm>
#include <vector>

#include "neardup/hamming_index.h"

namespace neardup::store {

class LinearIndex : public HammingIndex {
 public:
  explicit LinearIndex(int bits) : bits_(bits) {}
  int bits() const override { return bits_; }
  int max_k() const override { return bits_; }
  size_t size() const override { return ids_.size(); }

  Status Add(uint64_t id, const Fingerprint& fp) override {
    if (fp.bits != bits_) return Status::InvalidArgument("fingerprint width differs from index");
    ids_.push_back(id);
    lo_.push_back(fp.lo);
    hi_.push_back(fp.hi);
    return Status::Ok();
  }
  Status AddBatch(std::span<const uint64_t> ids, std::span<const Fingerprint> fps) override {
    if (ids.size() != fps.size())
      return Status::InvalidArgument("ids and fingerprints differ in count");
    for (size_t i = 0; i < ids.size(); ++i) NEARDUP_RETURN_IF_ERROR(Add(ids[i], fps[i]));
    return Status::Ok();
  }
  size_t Remove(uint64_t id, const Fingerprint& fp) override {
    size_t removed = 0;
    for (size_t i = 0; i < ids_.size();) {
      if (ids_[i] == id && lo_[i] == fp.lo && hi_[i] == fp.hi) {
        ids_[i] = ids_.back();
        lo_[i] = lo_.back();
        hi_[i] = hi_.back();
        ids_.pop_back();
        lo_.pop_back();
        hi_.pop_back();
        ++removed;
      } else {
        ++i;
      }
    }
    return removed;
  }
  Result<std::vector<Neighbor>> Search(const Fingerprint& query, int k) const override {
    if (k < 0 || k > bits_ || query.bits != bits_) {
      return Status::InvalidArgument("k out of range or fingerprint width differs");
    }
    std::vector<Neighbor> out;
    for (size_t i = 0; i < ids_.size(); ++i) {
      int d = HammingDistance(lo_[i], query.lo) + HammingDistance(hi_[i], query.hi);
      if (d <= k) out.push_back({ids_[i], d});
    }
    std::sort(out.begin(), out.end(), [](const Neighbor& a, const Neighbor& b) {
      return a.distance != b.distance ? a.distance < b.distance : a.id < b.id;
    });
    return out;
  }
  Result<std::vector<NeighborPair>> SelfJoin(int k) const override {
    std::vector<NeighborPair> out;
    for (size_t i = 0; i < ids_.size(); ++i) {
      for (size_t j = i + 1; j < ids_.size(); ++j) {
        int d = HammingDistance(lo_[i], lo_[j]) + HammingDistance(hi_[i], hi_[j]);
        if (d <= k) out.push_back({std::min(ids_[i], ids_[j]), std::max(ids_[i], ids_[j]), d});
      }
    }
    std::sort(out.begin(), out.end(), [](const NeighborPair& a, const NeighborPair& b) {
      return a.a != b.a ? a.a < b.a : a.b < b.b;
    });
    return out;
  }
  IndexSearchStats stats() const override { return {}; }

 private:
  int bits_;
  std::vector<uint64_t> ids_, lo_, hi_;
};

}  // namespace neardup::store

#endif  // NEARDUP_STORE_LINEAR_INDEX_H_
