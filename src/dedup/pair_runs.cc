// The k-way merge of sorted candidate-pair runs; see pair_runs.h.
#include "dedup/pair_runs.h"

#include <algorithm>

namespace neardup {

namespace {
constexpr uint64_t kBufferPairs = 1 << 14;  // 128 KiB per spilled run
}  // namespace

PairRunMerger::PairRunMerger(std::vector<PairRun> runs) {
  cursors_.reserve(runs.size());
  for (PairRun& run : runs) {
    if (run.file == nullptr) run.count = run.memory.size();
    if (run.count > 0) cursors_.push_back({run, 0, {}, 0});
  }
}

Result<bool> PairRunMerger::Fill(size_t i) {
  Cursor& cursor = cursors_[i];
  if (cursor.run.file == nullptr) {
    if (cursor.position >= cursor.run.count) return false;
    heap_.emplace(cursor.run.memory[cursor.position], static_cast<uint32_t>(i));
    return true;
  }
  if (cursor.position >= cursor.buffer.size()) {
    const uint64_t left = cursor.run.count - cursor.consumed;
    if (left == 0) return false;
    const uint64_t take = std::min(left, kBufferPairs);
    cursor.buffer.resize(take);
    NEARDUP_RETURN_IF_ERROR(
        cursor.run.file->ReadAt(cursor.run.offset + cursor.consumed * sizeof(uint64_t),
                                cursor.buffer.data(), take * sizeof(uint64_t)));
    cursor.consumed += take;
    cursor.position = 0;
  }
  heap_.emplace(cursor.buffer[cursor.position], static_cast<uint32_t>(i));
  return true;
}

Result<bool> PairRunMerger::Next(uint64_t* pair, uint8_t* sources) {
  if (!started_) {
    started_ = true;
    for (size_t i = 0; i < cursors_.size(); ++i) {
      auto filled = Fill(i);
      if (!filled.ok()) return filled.status();
    }
  }
  if (heap_.empty()) return false;
  const uint64_t value = heap_.top().first;
  *pair = value;
  *sources = 0;
  while (!heap_.empty() && heap_.top().first == value) {
    const uint32_t i = heap_.top().second;
    heap_.pop();
    *sources |= cursors_[i].run.source;
    ++cursors_[i].position;
    auto filled = Fill(i);
    if (!filled.ok()) return filled.status();
  }
  return true;
}

}  // namespace neardup
