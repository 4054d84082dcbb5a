// Sorted runs of candidate pairs (packed a << 32 | b), in memory or in a SpillFile, and their
// k-way merge into one sorted stream of distinct pairs that says which runs held each pair.
//
// Internal header. A PairRunMerger is not thread-safe; the runs it reads must outlive it.
#ifndef NEARDUP_DEDUP_PAIR_RUNS_H_
#define NEARDUP_DEDUP_PAIR_RUNS_H_

#include <cstdint>
#include <queue>
#include <span>
#include <vector>

#include "dedup/spill_file.h"
#include "neardup/status.h"

namespace neardup {

// One sorted run of distinct pairs: `count` pairs at `offset` bytes of `file`, or `memory` when
// file is null. `source` is a bit OR-ed into the sources of every pair of the run.
struct PairRun {
  const SpillFile* file = nullptr;
  uint64_t offset = 0;
  uint64_t count = 0;
  std::span<const uint64_t> memory;
  uint8_t source = 0;
};

class PairRunMerger {
 public:
  explicit PairRunMerger(std::vector<PairRun> runs);
  // The next distinct pair in ascending order and the OR of the sources of the runs holding it;
  // false at the end. Errors: a failed read of a spilled run.
  Result<bool> Next(uint64_t* pair, uint8_t* sources);
  // Calls visit(pair, sources), which returns a Status, for each pair Next gives; stops at the
  // first error of a read or of visit.
  template <typename Visit>
  Status ForEach(Visit&& visit) {
    uint64_t pair = 0;
    uint8_t sources = 0;
    for (;;) {
      auto next = Next(&pair, &sources);
      if (!next.ok()) return next.status();
      if (!*next) return Status::Ok();
      NEARDUP_RETURN_IF_ERROR(visit(pair, sources));
    }
  }

 private:
  struct Cursor {
    PairRun run;
    uint64_t consumed = 0;  // pairs of the run taken into `buffer` so far
    std::vector<uint64_t> buffer;
    size_t position = 0;
  };
  // Makes cursor i's current pair available; false when the run is exhausted.
  Result<bool> Fill(size_t i);
  std::vector<Cursor> cursors_;
  using Entry = std::pair<uint64_t, uint32_t>;  // (pair, cursor)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
  bool started_ = false;
};

}  // namespace neardup

#endif  // NEARDUP_DEDUP_PAIR_RUNS_H_
