// SelfJoinWithinK implementation; see self_join.h.
#include "dedup/self_join.h"

#include <algorithm>
#include <mutex>

#include "common/parallel.h"

namespace neardup {

namespace {

// Bits [start, start + width) of fp (bit 0 = least significant), width <= 64.
uint64_t BlockValue(const Fingerprint& fp, int start, int width) {
  uint64_t value = 0;
  for (int filled = 0; filled < width;) {
    int bit = start + filled;
    uint64_t word = bit < 64 ? fp.lo : fp.hi;
    int offset = bit % 64;
    int take = std::min(width - filled, 64 - offset);
    uint64_t mask = take == 64 ? ~uint64_t{0} : ((uint64_t{1} << take) - 1);
    value |= ((word >> offset) & mask) << filled;
    filled += take;
  }
  return value;
}

}  // namespace

Result<std::vector<NeighborPair>> SelfJoinWithinK(const std::vector<Fingerprint>& fingerprints,
                                                  int k, int threads) {
  std::vector<NeighborPair> pairs;
  if (fingerprints.empty()) return pairs;
  const int bits = fingerprints[0].bits;
  for (const Fingerprint& fp : fingerprints) {
    if (fp.bits != bits) return Status::InvalidArgument("fingerprints of different widths");
  }
  if (k < 0 || k > bits / 2) {
    return Status::InvalidArgument("k must be in [0, " + std::to_string(bits / 2) + "]");
  }
  const size_t n = fingerprints.size();
  const int blocks = k + 1;
  if (bits / blocks < 6) {
    // Blocks this narrow put most fingerprints in the same groups: comparing every pair once is
    // cheaper than k+1 nearly-full passes.
    std::mutex brute_mutex;
    ParallelFor(
        n, threads,
        [&](size_t begin, size_t end) {
          std::vector<NeighborPair> local;
          for (size_t i = begin; i < end; ++i) {
            for (size_t j = i + 1; j < n; ++j) {
              int distance = HammingDistance(fingerprints[i], fingerprints[j]);
              if (distance <= k) {
                local.push_back({i, j, distance});
              }
            }
          }
          std::lock_guard<std::mutex> lock(brute_mutex);
          pairs.insert(pairs.end(), local.begin(), local.end());
        },
        64);
    std::sort(pairs.begin(), pairs.end(), [](const NeighborPair& x, const NeighborPair& y) {
      return x.a != y.a ? x.a < y.a : x.b < y.b;
    });
    return pairs;
  }
  std::vector<int> starts(blocks + 1);
  for (int b = 0; b <= blocks; ++b) starts[b] = b * bits / blocks;
  auto block_of = [&](const Fingerprint& fp, int b) {
    return BlockValue(fp, starts[b], std::min(64, starts[b + 1] - starts[b]));
  };
  // Blocks wider than 64 bits (only when k == 0 or 1 with 128 bits) compare the first 64 bits of
  // the block; the full distance check below keeps the join exact.
  std::mutex mutex;
  std::vector<std::vector<NeighborPair>> per_block(blocks);
  for (int b = 0; b < blocks; ++b) {
    std::vector<std::pair<uint64_t, uint32_t>> keyed(n);
    for (size_t i = 0; i < n; ++i)
      keyed[i] = {block_of(fingerprints[i], b), static_cast<uint32_t>(i)};
    std::sort(keyed.begin(), keyed.end());
    // Group boundaries.
    std::vector<size_t> group_starts;
    for (size_t i = 0; i < n; ++i) {
      if (i == 0 || keyed[i].first != keyed[i - 1].first) group_starts.push_back(i);
    }
    group_starts.push_back(n);
    std::vector<NeighborPair>& found = per_block[b];
    ParallelFor(
        group_starts.size() - 1, threads,
        [&](size_t begin, size_t end) {
          std::vector<NeighborPair> local;
          for (size_t g = begin; g < end; ++g) {
            for (size_t i = group_starts[g]; i < group_starts[g + 1]; ++i) {
              const Fingerprint& fi = fingerprints[keyed[i].second];
              for (size_t j = i + 1; j < group_starts[g + 1]; ++j) {
                const Fingerprint& fj = fingerprints[keyed[j].second];
                int distance = HammingDistance(fi, fj);
                if (distance > k) continue;
                // Report from the first block the pair agrees on only.
                bool earlier = false;
                for (int e = 0; e < b && !earlier; ++e)
                  earlier = block_of(fi, e) == block_of(fj, e);
                if (earlier) continue;
                uint32_t a = keyed[i].second, c = keyed[j].second;
                local.push_back({std::min(a, c), std::max(a, c), distance});
              }
            }
          }
          std::lock_guard<std::mutex> lock(mutex);
          found.insert(found.end(), local.begin(), local.end());
        },
        64);
  }
  for (auto& found : per_block) pairs.insert(pairs.end(), found.begin(), found.end());
  std::sort(pairs.begin(), pairs.end(), [](const NeighborPair& x, const NeighborPair& y) {
    return x.a != y.a ? x.a < y.a : x.b < y.b;
  });
  return pairs;
}

}  // namespace neardup
