// PermutedIndex: an exact Hamming index of permuted sorted tables (Manku et al. WWW 2007),
// generalised to multi-index hashing (tables probed at a small radius around the query's key).
//
// Layout (memory-mappable, all flat arrays): the index is a list of immutable segments (the one
// segment image of src/index/table_segment.h, which the store also writes to files) plus a
// small unsorted delta buffer. A segment of n rows keeps its rows sorted by fingerprint
// (ids[n] uint64, lo[n] uint64, hi[n] uint64 for 128 bits); that array doubles as the table whose
// projection is the identity. Every other table stores keys[n] (uint64): the permuted projection
// of each fingerprint, key blocks first, sorted; for 128 bits also rows[n] (uint32) into the row
// arrays. Each table has a prefix directory dir[2^D + 1] (uint32 offsets) on the top D key bits.
// Runs of equal keys longer than expected (skewed data) are searched by descending further bits
// of the sorted projection, never by a linear scan of the run.
//
// Row numbers are uint32: at most 2^32-1 fingerprints per index (ResourceExhausted beyond).
//
// Inserts go to the delta buffer; a full buffer becomes a segment and segments of similar size
// are merged (LSM-like, amortised O(tables * log n) per insert). Removals are tombstones,
// purged when they exceed an eighth of the index.
//
// Thread safety: const methods may run concurrently with each other and with one thread calling
// Add/AddBatch/Remove: readers take an immutable snapshot (shared_ptr) and never block on the
// writer's merges. Mutators are serialised by an internal mutex.
#ifndef NEARDUP_PERMUTED_INDEX_H_
#define NEARDUP_PERMUTED_INDEX_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include "neardup/export.h"
#include "neardup/hamming_index.h"
#include "neardup/index_planner.h"

namespace neardup {

struct PermutedIndexOptions {
  int bits = 64;               // 64 or 128
  int indexed_k = 3;           // the tables are exact for every k <= indexed_k (max_search_k())
  double expected_size = 1e6;  // for the planner's cost model; >= 1
  // The planner's budget (unlimited: the cheapest query cost). When no design fits it, the
  // cheapest-to-query design is taken (design() says which).
  MemoryBudget memory_budget{0, 64};
  std::optional<IndexDesign> design;  // overrides the planner when set
  int threads = 0;                    // for AddBatch and SelfJoin; 0 = DefaultThreadCount()
  size_t delta_capacity = 1024;       // unsorted inserts scanned linearly before a segment is built
};

// Internal counters beyond IndexSearchStats.
struct PermutedIndexStats {
  IndexSearchStats search;
  uint64_t oversized_runs = 0;  // key runs searched by descending further bits (skew)
  size_t segments = 0;
  size_t delta_size = 0;
  size_t tombstones = 0;
  size_t memory_bytes = 0;  // bytes held by segments (ids, fingerprints, tables, directories)
};

class NEARDUP_EXPORT PermutedIndex : public HammingIndex {
 public:
  // Plans (or takes) a design and returns an empty index. InvalidArgument for bad options.
  static Result<std::unique_ptr<PermutedIndex>> Create(const PermutedIndexOptions& options);
  ~PermutedIndex() override;

  int bits() const override;
  int max_search_k() const override;  // = indexed_k
  size_t size() const override;

  Status Add(uint64_t id, const Fingerprint& fp) override;
  Status AddBatch(std::span<const uint64_t> ids, std::span<const Fingerprint> fps) override;
  size_t Remove(uint64_t id, const Fingerprint& fp) override;

  Result<std::vector<Neighbor>> Search(const Fingerprint& query, int k) const override;
  // Searches many queries on all cores; answers in query order.
  Result<std::vector<std::vector<Neighbor>>> SearchBatch(std::span<const Fingerprint> queries,
                                                         int k) const;
  Result<std::vector<NeighborPair>> SelfJoin(int k) const override;
  IndexSearchStats stats() const override;

  PermutedIndexStats detailed_stats() const;
  void ResetStats();
  const IndexDesign& design() const;
  // Merges every segment and the delta buffer into one segment and drops tombstones.
  void Compact();

 private:
  struct NEARDUP_HIDDEN Impl;
  explicit PermutedIndex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace neardup

#endif  // NEARDUP_PERMUTED_INDEX_H_
