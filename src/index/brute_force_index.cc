// BruteForceIndex: linear XOR + popcount scan, the exact baseline; see brute_force_index.h.
#include "neardup/brute_force_index.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "common/parallel.h"

namespace neardup {

struct BruteForceIndex::Impl {
  int bits = 64;
  mutable std::shared_mutex mu;
  std::vector<uint64_t> ids;
  std::vector<uint64_t> lo;
  std::vector<uint64_t> hi;
  mutable std::atomic<uint64_t> queries{0}, candidates{0}, results{0};
};

Result<std::unique_ptr<BruteForceIndex>> BruteForceIndex::Create(int bits) {
  if (bits != 64 && bits != 128)
    return Status::InvalidArgument("BruteForceIndex: bits=" + std::to_string(bits) +
                                   " (must be 64 or 128)");
  auto impl = std::make_unique<Impl>();
  impl->bits = bits;
  return std::unique_ptr<BruteForceIndex>(new BruteForceIndex(std::move(impl)));
}

BruteForceIndex::BruteForceIndex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BruteForceIndex::~BruteForceIndex() = default;

int BruteForceIndex::bits() const { return impl_->bits; }
int BruteForceIndex::max_search_k() const { return impl_->bits; }

size_t BruteForceIndex::size() const {
  std::shared_lock lock(impl_->mu);
  return impl_->ids.size();
}

Status BruteForceIndex::Add(uint64_t id, const Fingerprint& fp) {
  if (fp.bits != impl_->bits)
    return Status::InvalidArgument("BruteForceIndex::Add: fingerprint has " +
                                   std::to_string(fp.bits) + " bits, index holds " +
                                   std::to_string(impl_->bits));
  std::unique_lock lock(impl_->mu);
  impl_->ids.push_back(id);
  impl_->lo.push_back(fp.lo);
  impl_->hi.push_back(fp.hi);
  return Status::Ok();
}

Status BruteForceIndex::AddBatch(std::span<const uint64_t> ids, std::span<const Fingerprint> fps) {
  if (ids.size() != fps.size())
    return Status::InvalidArgument(
        "BruteForceIndex::AddBatch: ids and fingerprints differ in size");
  for (size_t i = 0; i < fps.size(); ++i)
    if (fps[i].bits != impl_->bits)
      return Status::InvalidArgument("BruteForceIndex::AddBatch: item " + std::to_string(i) +
                                     " has " + std::to_string(fps[i].bits) + " bits");
  std::unique_lock lock(impl_->mu);
  for (size_t i = 0; i < fps.size(); ++i) {
    impl_->ids.push_back(ids[i]);
    impl_->lo.push_back(fps[i].lo);
    impl_->hi.push_back(fps[i].hi);
  }
  return Status::Ok();
}

size_t BruteForceIndex::Remove(uint64_t id, const Fingerprint& fp) {
  std::unique_lock lock(impl_->mu);
  size_t j = 0;
  for (size_t i = 0; i < impl_->ids.size(); ++i) {
    if (impl_->ids[i] == id && impl_->lo[i] == fp.lo && impl_->hi[i] == fp.hi) continue;
    impl_->ids[j] = impl_->ids[i];
    impl_->lo[j] = impl_->lo[i];
    impl_->hi[j] = impl_->hi[i];
    ++j;
  }
  size_t removed = impl_->ids.size() - j;
  impl_->ids.resize(j);
  impl_->lo.resize(j);
  impl_->hi.resize(j);
  return removed;
}

Result<std::vector<Neighbor>> BruteForceIndex::Search(const Fingerprint& query, int k) const {
  if (query.bits != impl_->bits)
    return Status::InvalidArgument("BruteForceIndex::Search: query has " +
                                   std::to_string(query.bits) + " bits, index holds " +
                                   std::to_string(impl_->bits));
  if (k < 0 || k > impl_->bits)
    return Status::InvalidArgument("BruteForceIndex::Search: k=" + std::to_string(k) +
                                   " out of range");
  std::shared_lock lock(impl_->mu);
  std::vector<Neighbor> out;
  const std::vector<uint64_t>& ids = impl_->ids;
  const std::vector<uint64_t>& lo = impl_->lo;
  const std::vector<uint64_t>& hi = impl_->hi;
  const size_t n = ids.size();
  for (size_t i = 0; i < n; ++i) {
    int d = std::popcount(lo[i] ^ query.lo) + std::popcount(hi[i] ^ query.hi);
    if (d <= k) out.push_back({ids[i], d});
  }
  lock.unlock();
  impl_->queries.fetch_add(1, std::memory_order_relaxed);
  impl_->candidates.fetch_add(n, std::memory_order_relaxed);
  // One entry per id (nearest), sorted by (distance, id).
  std::sort(out.begin(), out.end(), [](const Neighbor& a, const Neighbor& b) {
    return a.id != b.id ? a.id < b.id : a.distance < b.distance;
  });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const Neighbor& a, const Neighbor& b) { return a.id == b.id; }),
            out.end());
  std::sort(out.begin(), out.end(), [](const Neighbor& a, const Neighbor& b) {
    return a.distance != b.distance ? a.distance < b.distance : a.id < b.id;
  });
  impl_->results.fetch_add(out.size(), std::memory_order_relaxed);
  return out;
}

Result<std::vector<NeighborPair>> BruteForceIndex::SelfJoin(int k) const {
  if (k < 0 || k > impl_->bits)
    return Status::InvalidArgument("BruteForceIndex::SelfJoin: k=" + std::to_string(k) +
                                   " out of range");
  std::shared_lock lock(impl_->mu);
  const std::vector<uint64_t>& ids = impl_->ids;
  const std::vector<uint64_t>& lo = impl_->lo;
  const std::vector<uint64_t>& hi = impl_->hi;
  const size_t n = ids.size();
  const size_t chunks = std::min<size_t>(n, 256);
  std::vector<std::vector<NeighborPair>> parts(chunks);
  ParallelFor(chunks, 0, [&](size_t cb, size_t ce) {
    for (size_t c = cb; c < ce; ++c) {
      // Interleaved rows balance the triangular work.
      for (size_t i = c; i < n; i += chunks) {
        for (size_t j = i + 1; j < n; ++j) {
          if (ids[i] == ids[j]) continue;
          int d = std::popcount(lo[i] ^ lo[j]) + std::popcount(hi[i] ^ hi[j]);
          if (d <= k) parts[c].push_back({std::min(ids[i], ids[j]), std::max(ids[i], ids[j]), d});
        }
      }
    }
  });
  std::vector<NeighborPair> pairs;
  for (auto& p : parts) pairs.insert(pairs.end(), p.begin(), p.end());
  std::sort(pairs.begin(), pairs.end());
  return pairs;
}

IndexSearchStats BruteForceIndex::stats() const {
  IndexSearchStats st;
  st.queries = impl_->queries.load();
  st.probes = 0;
  st.candidates = impl_->candidates.load();
  st.results = impl_->results.load();
  return st;
}

}  // namespace neardup
