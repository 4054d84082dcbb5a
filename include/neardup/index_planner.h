// IndexPlanner: chooses the tables of a permuted (multi-index hashing) Hamming index by a cost
// model.
//
// A design splits the f fingerprint bits into blocks; each table keys on a chosen set of blocks
// (moved to the front of a permuted 64-bit projection) and is probed at a small Hamming radius
// around the query's key. The pigeonhole principle makes the design exact for every
// k <= indexed_k.
// Covers Manku et al. (WWW 2007) one- and two-level designs and Norouzi et al.'s multi-index
// hashing (probe radius > 0). All functions are pure and thread-safe.
#ifndef NEARDUP_INDEX_PLANNER_H_
#define NEARDUP_INDEX_PLANNER_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "neardup/export.h"
#include "neardup/status.h"

namespace neardup {

// A contiguous run of fingerprint bits; position 0 is the most significant bit of the fingerprint.
struct BitRange {
  int start = 0;
  int width = 0;
  friend bool operator==(const BitRange&, const BitRange&) = default;
};

// One table: its key is the concatenation of `key_ranges` (most significant first). The rest of the
// fingerprint follows in natural order to fill the 64-bit projection the table sorts.
struct IndexTableSpec {
  std::vector<BitRange> key_ranges;
  int key_bits = 0;
};

struct NEARDUP_EXPORT IndexDesign {
  int bits = 64;            // fingerprint width
  int indexed_k = 3;        // the tables are exact for every k in [0, indexed_k]
  std::string description;  // e.g. "6 blocks (11,11,11,11,10,10), choose 3"
  std::vector<IndexTableSpec> tables;
  // probe_radius[k] = Hamming radius each table's key is probed at for a query of radius k.
  std::vector<int> probe_radius;

  // Cost model figures for the planned number of fingerprints.
  double expected_size = 0;
  double bytes_per_fingerprint = 0;  // ids + fingerprints + tables + prefix directories
  double probes_per_query = 0;       // probe keys at k = indexed_k
  double candidates_per_query = 0;   // expected keys compared (uniform random data; a small
                                     // directory bucket is compared whole)
  double cost_ns = 0;                // modelled single-query time
  int min_key_bits() const;
  int max_key_bits() const;
};

// A memory budget for an index: total bytes, or bytes per fingerprint. When both are set the
// smaller total wins; both 0 = unlimited. The one form of a memory budget in the API (PlanRequest,
// PermutedIndexOptions and StoreOptions all take one).
struct NEARDUP_EXPORT MemoryBudget {
  double bytes = 0;
  double bytes_per_fingerprint = 0;
  // Total bytes for n fingerprints (0 = unlimited).
  double TotalFor(double n) const;
  // "unlimited", "640000000 bytes" or "128 bytes per fingerprint".
  std::string ToString() const;
};

// Parses a budget: "640000000", "640M", "1.5G" (bytes, K/M/G/T powers of 1024 allowed) or "128/fp"
// (bytes per fingerprint); "0" or "unlimited" = no limit. InvalidArgument quoting the text.
NEARDUP_EXPORT Result<MemoryBudget> ParseMemoryBudget(std::string_view text);

struct PlanRequest {
  int bits = 64;               // 64 or 128
  int indexed_k = 3;           // largest query radius the tables must answer exactly
  double expected_size = 1e6;  // expected number of fingerprints
  MemoryBudget memory_budget;  // for the whole index; unlimited by default
};

// Every design the planner considers, sorted by bytes per fingerprint then cost.
// InvalidArgument for bits not in {64,128}, indexed_k outside [0, bits/4] or expected_size < 1.
NEARDUP_EXPORT Result<std::vector<IndexDesign>> EnumerateIndexDesigns(const PlanRequest& request);

// The cheapest design (by cost_ns) fitting the memory budget; ResourceExhausted when none fits.
NEARDUP_EXPORT Result<IndexDesign> PlanIndex(const PlanRequest& request);

// Designs on the memory/cost Pareto frontier, cheapest memory first: the design PlanIndex picks for
// budgets from `bytes_per_fingerprint * expected_size` up to the next entry's.
NEARDUP_EXPORT std::vector<IndexDesign> ParetoFrontier(const std::vector<IndexDesign>& designs);

// Number of leading key bits the prefix directory of a table of n fingerprints indexes.
NEARDUP_EXPORT int DirectoryBitsFor(double n, int key_bits);

// The bit ranges of a table's 64-bit projection, in order: the key ranges, then the remaining bits
// of the fingerprint in natural order, adjacent ranges merged, truncated to 64 bits in total.
NEARDUP_EXPORT std::vector<BitRange> ProjectionRanges(const IndexTableSpec& table, int bits);

// True when the projection is the fingerprint itself (64 bits) or its high word (128 bits), so the
// table can share the index's fingerprint-sorted row arrays instead of storing keys.
NEARDUP_EXPORT bool IsIdentityProjection(const IndexTableSpec& table, int bits);

}  // namespace neardup

#endif  // NEARDUP_INDEX_PLANNER_H_
