// Clusters: union-find over near-duplicate pairs with smallest-id component labels; see clusters.h.
#include "neardup/clusters.h"

#include <algorithm>
#include <numeric>

namespace neardup {

std::vector<ClusterAssignment> ConnectedComponents(std::span<const uint64_t> ids,
                                                   std::span<const NeighborPair> pairs) {
  std::vector<uint64_t> all(ids.begin(), ids.end());
  all.reserve(ids.size() + 2 * pairs.size());
  for (const NeighborPair& p : pairs) {
    all.push_back(p.a);
    all.push_back(p.b);
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  std::vector<size_t> parent(all.size());
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](size_t x) {
    while (parent[x] != x) {
      parent[x] = parent[parent[x]];
      x = parent[x];
    }
    return x;
  };
  auto index_of = [&](uint64_t id) {
    return static_cast<size_t>(std::lower_bound(all.begin(), all.end(), id) - all.begin());
  };
  for (const NeighborPair& p : pairs) {
    size_t a = find(index_of(p.a)), b = find(index_of(p.b));
    // The root is always the smallest index, hence the smallest id, of its component.
    if (a < b)
      parent[b] = a;
    else if (b < a)
      parent[a] = b;
  }
  std::vector<ClusterAssignment> out(all.size());
  for (size_t i = 0; i < all.size(); ++i) out[i] = {all[i], all[find(i)]};
  return out;
}

std::vector<std::vector<uint64_t>> GroupComponents(std::span<const ClusterAssignment> assignment,
                                                   bool include_singletons) {
  std::vector<ClusterAssignment> sorted(assignment.begin(), assignment.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const ClusterAssignment& a, const ClusterAssignment& b) {
              return a.component != b.component ? a.component < b.component : a.id < b.id;
            });
  std::vector<std::vector<uint64_t>> groups;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    std::vector<uint64_t> group;
    while (j < sorted.size() && sorted[j].component == sorted[i].component)
      group.push_back(sorted[j++].id);
    if (group.size() >= 2 || include_singletons) groups.push_back(std::move(group));
    i = j;
  }
  return groups;
}

Result<std::vector<ClusterAssignment>> ClusterIndex(const HammingIndex& index,
                                                    std::span<const uint64_t> ids, int k) {
  auto pairs = index.SelfJoin(k);
  if (!pairs.ok()) return pairs.status();
  return ConnectedComponents(ids, *pairs);
}

}  // namespace neardup
