// BruteForceIndex: linear XOR + popcount scan, the exact baseline; see brute_force_index.h.
#include "neardup/brute_force_index.h"

#include <algorithm>
#include <bit>
#include <mutex>
#include <string>

#include "common/parallel.h"

namespace neardup {

BruteForceIndex::BruteForceIndex(int bits) : bits_(bits == 128 ? 128 : 64) {}

size_t BruteForceIndex::size() const {
  std::shared_lock lock(mu_);
  return ids_.size();
}

Status BruteForceIndex::Add(uint64_t id, const Fingerprint& fp) {
  if (fp.bits != bits_)
    return Status::InvalidArgument("BruteForceIndex::Add: fingerprint has " +
                                   std::to_string(fp.bits) + " bits, index holds " +
                                   std::to_string(bits_));
  std::unique_lock lock(mu_);
  ids_.push_back(id);
  lo_.push_back(fp.lo);
  hi_.push_back(fp.hi);
  return Status::Ok();
}

Status BruteForceIndex::AddBatch(std::span<const uint64_t> ids, std::span<const Fingerprint> fps) {
  if (ids.size() != fps.size())
    return Status::InvalidArgument(
        "BruteForceIndex::AddBatch: ids and fingerprints differ in size");
  for (size_t i = 0; i < fps.size(); ++i)
    if (fps[i].bits != bits_)
      return Status::InvalidArgument("BruteForceIndex::AddBatch: item " + std::to_string(i) +
                                     " has " + std::to_string(fps[i].bits) + " bits");
  std::unique_lock lock(mu_);
  for (size_t i = 0; i < fps.size(); ++i) {
    ids_.push_back(ids[i]);
    lo_.push_back(fps[i].lo);
    hi_.push_back(fps[i].hi);
  }
  return Status::Ok();
}

size_t BruteForceIndex::Remove(uint64_t id, const Fingerprint& fp) {
  std::unique_lock lock(mu_);
  size_t j = 0;
  for (size_t i = 0; i < ids_.size(); ++i) {
    if (ids_[i] == id && lo_[i] == fp.lo && hi_[i] == fp.hi) continue;
    ids_[j] = ids_[i];
    lo_[j] = lo_[i];
    hi_[j] = hi_[i];
    ++j;
  }
  size_t removed = ids_.size() - j;
  ids_.resize(j);
  lo_.resize(j);
  hi_.resize(j);
  return removed;
}

Result<std::vector<Neighbor>> BruteForceIndex::Search(const Fingerprint& query, int k) const {
  if (query.bits != bits_)
    return Status::InvalidArgument("BruteForceIndex::Search: query has " +
                                   std::to_string(query.bits) + " bits, index holds " +
                                   std::to_string(bits_));
  if (k < 0 || k > bits_)
    return Status::InvalidArgument("BruteForceIndex::Search: k=" + std::to_string(k) +
                                   " out of range");
  std::shared_lock lock(mu_);
  std::vector<Neighbor> out;
  const size_t n = ids_.size();
  for (size_t i = 0; i < n; ++i) {
    int d = std::popcount(lo_[i] ^ query.lo) + std::popcount(hi_[i] ^ query.hi);
    if (d <= k) out.push_back({ids_[i], d});
  }
  lock.unlock();
  queries_.fetch_add(1, std::memory_order_relaxed);
  candidates_.fetch_add(n, std::memory_order_relaxed);
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
  results_.fetch_add(out.size(), std::memory_order_relaxed);
  return out;
}

Result<std::vector<NeighborPair>> BruteForceIndex::SelfJoin(int k) const {
  if (k < 0 || k > bits_)
    return Status::InvalidArgument("BruteForceIndex::SelfJoin: k=" + std::to_string(k) +
                                   " out of range");
  std::shared_lock lock(mu_);
  const size_t n = ids_.size();
  const size_t chunks = std::min<size_t>(n, 256);
  std::vector<std::vector<NeighborPair>> parts(chunks);
  ParallelFor(chunks, 0, [&](size_t cb, size_t ce) {
    for (size_t c = cb; c < ce; ++c) {
      // Interleaved rows balance the triangular work.
      for (size_t i = c; i < n; i += chunks) {
        for (size_t j = i + 1; j < n; ++j) {
          if (ids_[i] == ids_[j]) continue;
          int d = std::popcount(lo_[i] ^ lo_[j]) + std::popcount(hi_[i] ^ hi_[j]);
          if (d <= k)
            parts[c].push_back({std::min(ids_[i], ids_[j]), std::max(ids_[i], ids_[j]), d});
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
  st.queries = queries_.load();
  st.probes = 0;
  st.candidates = candidates_.load();
  st.results = results_.load();
  return st;
}

}  // namespace neardup
