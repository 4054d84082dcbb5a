// The store's memtable: the documents written since the last flush (newest version per id,
// tombstones included), with the same tables a segment has, in their mutable form (KeyChains,
// src/index/key_table.h): one per permuted Hamming table of the store's design, one per LSH band
// and one for the whitespace-free hash. It is the store's one in-memory layer: no index inside it
// keeps a buffer, merges or tombstones of its own.
//
// The tables are built lazily: Put only appends the entry (and its id), and the first search
// after some Puts indexes them. A bulk load that never searches (`neardup index add`) thus never
// builds them: a memtable entry costs its payload and about 200 bytes instead of another ~1.6 KB
// of hash-table slots (41 tables of a dedup store), and the time to fill them.
//
// Internal header. Not thread-safe: the store reads it under its shared state lock and calls Put
// under the exclusive one (the lazy indexing is serialised by a mutex of its own, so concurrent
// readers under the shared lock may all search).
#ifndef NEARDUP_STORE_MEMTABLE_H_
#define NEARDUP_STORE_MEMTABLE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/string_hash.h"
#include "index/key_table.h"
#include "index/table_segment.h"
#include "neardup/fingerprint.h"
#include "store/sketch_record.h"
#include "store/wal.h"

namespace neardup::store {

class MemTable {
 public:
  // One version of a document. A version stops being live when its id is written again.
  struct Entry {
    const std::string* id = nullptr;  // the key in the id map (stable)
    Fingerprint fingerprint;
    std::string metadata;
    bool tombstone = false;
    bool live = true;  // the newest version of its id
    bool has_sketch = false;
    SketchRecord sketch;
    uint64_t seq = 0;  // the store's order of addition
  };

  // `design`: the store's permuted tables; `bands`: LSH bands (0 for a kSimHash store);
  // `first_seq`: the sequence number of the first document added.
  MemTable(std::shared_ptr<const index::CompiledDesign> design, int bands, uint64_t first_seq);

  // The newest version of `id` (live or tombstone), or null.
  const Entry* Find(std::string_view id) const;
  // Applies one logged operation (an add gets the next sequence number); takes its strings.
  void Put(WalOp&& op);

  size_t size() const { return ids_.size(); }  // distinct ids
  uint64_t next_seq() const { return next_seq_; }
  int bands() const { return bands_; }

  // Calls fn(entry, distance) for every live, non-tombstone entry within k of `query`, once each.
  // Uses the tables when k <= the design's max_k, else scans.
  template <typename Fn>
  void Search(const Fingerprint& query, int k, Fn&& fn) const {
    if (k > design_->design.indexed_k) {
      for (const Entry& entry : slots_) {
        if (!entry.live || entry.tombstone) continue;
        const int distance = HammingDistance(entry.fingerprint, query);
        if (distance <= k) fn(entry, distance);
      }
      return;
    }
    EnsureIndexed();
    std::vector<uint32_t> found;
    CollectWithin(query, k, &found);
    for (uint32_t slot : found) {
      const Entry& entry = slots_[slot];
      fn(entry, HammingDistance(entry.fingerprint, query));
    }
  }

  // Calls fn(entry) for the live entries whose band `band` key is `key`, newest first, while fn
  // returns true; stops after `max_visits` versions (live or not) have been looked at.
  template <typename Fn>
  void ForEachInBucket(int band, uint32_t key, size_t max_visits, Fn&& fn) const {
    EnsureIndexed();
    size_t visits = 0;
    band_chains_[band].ForEachNewest(key, [&](uint32_t slot) {
      if (++visits > max_visits) return false;
      const Entry& entry = slots_[slot];
      return !entry.live || fn(entry);
    });
  }
  // The same for the whitespace-free hash, oldest first.
  template <typename Fn>
  void ForEachWithSqueezed(uint64_t hash, size_t max_visits, Fn&& fn) const {
    EnsureIndexed();
    size_t visits = 0;
    squeezed_chains_.ForEachOldest(hash, [&](uint32_t slot) {
      if (++visits > max_visits) return false;
      const Entry& entry = slots_[slot];
      return !entry.live || fn(entry);
    });
  }

  // Calls fn(entry) for the newest version of every id (what a flush writes).
  template <typename Fn>
  void ForEachNewest(Fn&& fn) const {
    for (const auto& [id, slot] : ids_) fn(slots_[slot]);
  }

  size_t MemoryBytes() const;

 private:
  // Slots of live entries within k (k <= max_k), each once, ascending.
  void CollectWithin(const Fingerprint& query, int k, std::vector<uint32_t>* found) const;
  // Inserts the entries Put since the last call into the tables (once, whichever reader comes
  // first; the others wait for it).
  void EnsureIndexed() const {
    if (indexed_.load(std::memory_order_acquire) < slots_.size()) IndexNewEntries();
  }
  void IndexNewEntries() const;

  std::shared_ptr<const index::CompiledDesign> design_;
  int bands_;
  uint64_t next_seq_;
  std::deque<Entry> slots_;  // every version, in order of writing
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> ids_;  // -> newest slot
  // The tables (filled by IndexNewEntries, under index_mu_, for the slots before indexed_).
  mutable std::vector<index::KeyChains<uint64_t>> hamming_chains_;  // per table of the design
  mutable std::vector<index::KeyChains<uint32_t>> band_chains_;     // per band
  mutable index::KeyChains<uint64_t> squeezed_chains_{/*track_oldest=*/true};
  mutable std::mutex index_mu_;
  mutable std::atomic<size_t> indexed_{0};
  size_t payload_bytes_ = 0;  // ids, metadata and sketches held
};

}  // namespace neardup::store

#endif  // NEARDUP_STORE_MEMTABLE_H_
