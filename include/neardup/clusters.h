// Clusters: connected components of near-duplicate pairs (the groups a dedup run reports).
//
// Two items are in one component when a chain of pairs within k links them. Component ids are
// deterministic: the smallest member id. Pure functions; thread-safe.
#ifndef NEARDUP_CLUSTERS_H_
#define NEARDUP_CLUSTERS_H_

#include <cstdint>
#include <span>
#include <vector>

#include "neardup/export.h"
#include "neardup/hamming_index.h"
#include "neardup/status.h"

namespace neardup {

struct ClusterAssignment {
  uint64_t id = 0;
  uint64_t component = 0;  // smallest id in the component
  friend bool operator==(const ClusterAssignment&, const ClusterAssignment&) = default;
};

// Component of every distinct id among `ids` and the pairs' endpoints, sorted by id. Ids appearing
// in no pair are singleton components (component == id).
NEARDUP_EXPORT std::vector<ClusterAssignment> ConnectedComponents(
    std::span<const uint64_t> ids, std::span<const NeighborPair> pairs);

// Components with at least two members: each inner vector sorted ascending, the list sorted by its
// first (smallest) member.
NEARDUP_EXPORT std::vector<std::vector<uint64_t>> GroupComponents(
    std::span<const ClusterAssignment> assignment, bool include_singletons = false);

// Self-joins `index` at radius k and returns the components of all stored ids.
NEARDUP_EXPORT Result<std::vector<ClusterAssignment>> ClusterIndex(const HammingIndex& index,
                                                                   std::span<const uint64_t> ids,
                                                                   int k);

}  // namespace neardup

#endif  // NEARDUP_CLUSTERS_H_
