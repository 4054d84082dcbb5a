// HammingJoin: the bucket-by-bucket join of fingerprints within k; see neardup/hamming_join.h.
#include "neardup/hamming_join.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <utility>

#include "common/parallel.h"
#include "index/table_segment.h"

namespace neardup {
namespace {

using index::CompiledTable;
using index::kLinearRunLimit;

// (projection on the table, row) of one member of a bucket.
using Entry = std::pair<uint64_t, uint32_t>;

// The radius-0 design cheapest for a self-join of n items: sorting cost per table plus the
// expected comparisons inside runs.
IndexDesign PlanJoinDesign(int bits, int k, double n) {
  PlanRequest request;
  request.bits = bits;
  request.indexed_k = k;
  request.expected_size = std::max(1.0, n);
  auto designs = EnumerateIndexDesigns(request);
  IndexDesign best;
  double best_cost = -1;
  if (!designs.ok()) return best;
  for (const IndexDesign& d : *designs) {
    if (d.probe_radius[k] != 0 || d.tables.size() > 64) continue;
    double cost = 0;
    for (const IndexTableSpec& t : d.tables)
      cost += request.expected_size * 20.0 +
              request.expected_size * request.expected_size / std::ldexp(2.0, t.key_bits) * 1.5;
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best = d;
    }
  }
  return best;
}

}  // namespace

struct HammingJoin::Impl {
  int bits = 64;
  int k = 0;
  IndexDesign design;
  std::shared_ptr<const index::CompiledDesign> compiled;

  const std::vector<CompiledTable>& tables() const { return compiled->tables; }
  uint64_t Project(size_t t, const Fingerprint& fp) const {
    return tables()[t].Project(fp.bits == 128 ? fp.hi : 0, fp.lo);
  }
  uint64_t Key(size_t t, const Fingerprint& fp) const { return tables()[t].KeyOf(Project(t, fp)); }
  bool EarlierTableAgrees(size_t t, const Fingerprint& a, const Fingerprint& b) const {
    for (size_t u = 0; u < t; ++u) {
      if (Key(u, a) == Key(u, b)) return true;
    }
    return false;
  }

  // Calls emit(row_a, row_b, distance) for the pairs of one bucket of table t: `entries` hold the
  // members' projections on t (all with one key) and their rows in `fps`. Reorders `entries`.
  template <typename Emit>
  void JoinBucket(size_t t, std::span<Entry> entries, const Fingerprint* fps, Emit&& emit) const {
    const int key_bits = tables()[t].key_bits;
    auto consider = [&](uint32_t a, uint32_t b) {
      const int d = HammingDistance(fps[a], fps[b]);
      if (d > k || EarlierTableAgrees(t, fps[a], fps[b])) return;
      emit(a, b, d);
    };
    const size_t n = entries.size();
    if (n <= kLinearRunLimit) {
      // The projection holds (up to) 64 of the fingerprint's bits: its distance is a lower bound.
      for (size_t i = 0; i < n; ++i)
        for (size_t j = i + 1; j < n; ++j)
          if (std::popcount(entries[i].first ^ entries[j].first) <= k)
            consider(entries[i].second, entries[j].second);
      return;
    }
    // A skewed bucket: sort it on the whole projection, then descend it for each member instead
    // of comparing all pairs.
    std::sort(entries.begin(), entries.end());
    std::vector<uint64_t> keys(n);
    for (size_t i = 0; i < n; ++i) keys[i] = entries[i].first;
    std::function<void(size_t, size_t, size_t, int, int)> scan = [&](size_t i, size_t lo, size_t hi,
                                                                     int bit, int distance) {
      if (distance > k || lo >= hi) return;
      if (hi - lo <= 32 || bit >= 64) {
        for (size_t j = std::max(lo, i + 1); j < hi; ++j)
          if (std::popcount(keys[i] ^ keys[j]) <= k) consider(entries[i].second, entries[j].second);
        return;
      }
      if (hi <= i + 1) return;
      const int shift = 63 - bit;
      size_t mid = std::partition_point(keys.begin() + lo, keys.begin() + hi,
                                        [shift](uint64_t v) { return ((v >> shift) & 1) == 0; }) -
                   keys.begin();
      int qbit = static_cast<int>((keys[i] >> shift) & 1);
      scan(i, lo, mid, bit + 1, distance + (qbit != 0));
      scan(i, mid, hi, bit + 1, distance + (qbit != 1));
    };
    for (size_t i = 0; i < n; ++i) scan(i, i + 1, n, key_bits, 0);
  }
};

HammingJoin::HammingJoin(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Result<HammingJoin> HammingJoin::Create(int bits, int k, double expected_size) {
  if (bits != 64 && bits != 128) {
    return Status::InvalidArgument("HammingJoin: bits must be 64 or 128, got " +
                                   std::to_string(bits));
  }
  if (k < 0 || k > bits / 4) {
    return Status::InvalidArgument("HammingJoin: k must be in [0, " + std::to_string(bits / 4) +
                                   "], got " + std::to_string(k));
  }
  if (!(expected_size >= 0)) {
    return Status::InvalidArgument("HammingJoin: expected_size must not be negative");
  }
  auto impl = std::make_shared<Impl>();
  impl->bits = bits;
  impl->k = k;
  impl->design = PlanJoinDesign(bits, k, expected_size);
  if (impl->design.tables.empty()) return Status::Internal("HammingJoin: no join design");
  auto compiled = index::CompileDesign(impl->design);
  if (!compiled.ok()) return compiled.status().WithContext("HammingJoin");
  impl->compiled = std::move(*compiled);
  return HammingJoin(std::move(impl));
}

int HammingJoin::bits() const { return impl_->bits; }
int HammingJoin::k() const { return impl_->k; }
size_t HammingJoin::tables() const { return impl_->tables().size(); }
const IndexDesign& HammingJoin::design() const { return impl_->design; }

uint64_t HammingJoin::Key(size_t table, const Fingerprint& fingerprint) const {
  return impl_->Key(table, fingerprint);
}

void HammingJoin::Keys(std::span<const Fingerprint> fingerprints,
                       std::vector<uint64_t>* keys) const {
  const size_t t = tables();
  keys->resize(fingerprints.size() * t);
  for (size_t i = 0; i < fingerprints.size(); ++i) {
    for (size_t u = 0; u < t; ++u) (*keys)[i * t + u] = impl_->Key(u, fingerprints[i]);
  }
}

void HammingJoin::BucketPairs(size_t table, std::span<const uint64_t> documents,
                              std::span<const Fingerprint> fingerprints,
                              std::vector<NeighborPair>* pairs) const {
  std::vector<Entry> entries(documents.size());
  for (size_t i = 0; i < documents.size(); ++i) {
    entries[i] = {impl_->Project(table, fingerprints[i]), static_cast<uint32_t>(i)};
  }
  impl_->JoinBucket(table, entries, fingerprints.data(), [&](uint32_t x, uint32_t y, int d) {
    pairs->push_back(
        {std::min(documents[x], documents[y]), std::max(documents[x], documents[y]), d});
  });
}

std::vector<NeighborPair> HammingJoin::SelfJoin(std::span<const Fingerprint> fingerprints,
                                                int threads) const {
  const size_t n = fingerprints.size();
  std::vector<NeighborPair> pairs;
  if (n < 2) return pairs;
  const size_t table_count = tables();
  std::vector<std::vector<NeighborPair>> parts(table_count);
  const int workers = n >= 4096 ? (threads > 0 ? threads : DefaultThreadCount()) : 1;
  ParallelFor(table_count, workers, [&](size_t begin, size_t end) {
    std::vector<Entry> entries(n);
    for (size_t t = begin; t < end; ++t) {
      const CompiledTable& table = impl_->tables()[t];
      for (size_t i = 0; i < n; ++i) {
        entries[i] = {impl_->Project(t, fingerprints[i]), static_cast<uint32_t>(i)};
      }
      // Only runs of equal keys matter: sort on the key bits.
      index::RadixSort(
          &entries, [](const Entry& e) { return e.first; }, 64 - table.key_bits);
      for (size_t from = 0; from < n;) {
        const uint64_t key = table.KeyOf(entries[from].first);
        size_t to = from + 1;
        while (to < n && table.KeyOf(entries[to].first) == key) ++to;
        if (to - from > 1) {
          impl_->JoinBucket(t, std::span<Entry>(entries.data() + from, to - from),
                            fingerprints.data(), [&](uint32_t a, uint32_t b, int d) {
                              parts[t].push_back({std::min(a, b), std::max(a, b), d});
                            });
        }
        from = to;
      }
    }
  });
  size_t count = 0;
  for (const auto& part : parts) count += part.size();
  pairs.reserve(count);
  for (auto& part : parts) pairs.insert(pairs.end(), part.begin(), part.end());
  std::sort(pairs.begin(), pairs.end());
  return pairs;
}

}  // namespace neardup
