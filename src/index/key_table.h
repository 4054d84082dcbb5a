// Key tables: the exact-key half of the index engine (the Hamming half is table_segment.h). A key
// table maps a key (a MinHash LSH band key, a whitespace-free text hash, a permuted-table key) to
// the rows that hold it, in the order they were added. It has the two forms every table of the
// store has:
//   * KeyChains, the mutable in-memory form of the memtable: an open-addressing map from key to
//     its newest row plus, per row, a link to the previous row with the same key (and, when asked
//     for, the oldest row and links to the next one), so a key's rows are walked newest first
//     (or oldest first) without a scan, however many rows share the key;
//   * KeyTable, the immutable image in a segment file: rows sorted by (key, age), a prefix
//     directory on the key's top bits; built once, memory-mapped, read with bounds checks.
//
// Internal header. KeyChains is not thread-safe while being filled (the store holds its state
// lock for writing); const methods may run concurrently. A KeyTable view is immutable.
#ifndef NEARDUP_INDEX_KEY_TABLE_H_
#define NEARDUP_INDEX_KEY_TABLE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "neardup/status.h"

namespace neardup::index {

// ---- the in-memory form
// --------------------------------------------------------------------------

template <typename Key>
class KeyChains {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // track_oldest: also keep each key's oldest row and the links to newer rows (ForEachOldest).
  explicit KeyChains(bool track_oldest = false) : track_oldest_(track_oldest) {}

  // Adds `row` (rows are numbered 0, 1, 2, ... in the order they are added; a row may hold many
  // keys of different tables but one key per table) under `key`.
  void Insert(Key key, uint32_t row) {
    if ((used_ + 1) * 2 > slots_.size()) Grow();
    Slot& slot = Locate(key);
    if (row >= older_.size()) {
      older_.resize(std::max<size_t>(row + 1, older_.size() * 2), kNone);
      if (track_oldest_) newer_.resize(older_.size(), kNone);
    }
    if (slot.newest == kNone) {
      slot.key = key;
      slot.oldest = row;
      ++used_;
      older_[row] = kNone;
    } else {
      older_[row] = slot.newest;
      if (track_oldest_) newer_[slot.newest] = row;
    }
    if (track_oldest_) newer_[row] = kNone;
    slot.newest = row;
  }

  // Calls fn(row) for the rows of `key`, newest first, while fn returns true.
  template <typename Fn>
  void ForEachNewest(Key key, Fn&& fn) const {
    const Slot* slot = Find(key);
    if (slot == nullptr) return;
    for (uint32_t row = slot->newest; row != kNone; row = older_[row]) {
      if (!fn(row)) return;
    }
  }
  // Calls fn(row) for the rows of `key`, oldest first, while fn returns true (track_oldest only).
  template <typename Fn>
  void ForEachOldest(Key key, Fn&& fn) const {
    const Slot* slot = Find(key);
    if (slot == nullptr || !track_oldest_) return;
    for (uint32_t row = slot->oldest; row != kNone; row = newer_[row]) {
      if (!fn(row)) return;
    }
  }

  size_t keys() const { return used_; }
  size_t MemoryBytes() const {
    return slots_.capacity() * sizeof(Slot) + (older_.capacity() + newer_.capacity()) * 4;
  }

 private:
  struct Slot {
    Key key{};
    uint32_t newest = kNone;
    uint32_t oldest = kNone;
  };
  static size_t Mix(Key key) {
    uint64_t x = static_cast<uint64_t>(key);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return static_cast<size_t>(x);
  }
  const Slot* Find(Key key) const {
    if (slots_.empty()) return nullptr;
    const size_t mask = slots_.size() - 1;
    for (size_t i = Mix(key) & mask;; i = (i + 1) & mask) {
      const Slot& slot = slots_[i];
      if (slot.newest == kNone) return nullptr;
      if (slot.key == key) return &slot;
    }
  }
  Slot& Locate(Key key) {
    const size_t mask = slots_.size() - 1;
    for (size_t i = Mix(key) & mask;; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.newest == kNone || slot.key == key) return slot;
    }
  }
  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(64, old.size() * 2), Slot{});
    for (const Slot& slot : old) {
      if (slot.newest != kNone) Locate(slot.key) = slot;
    }
  }

  bool track_oldest_;
  size_t used_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint32_t> older_;  // row -> previous row with the same key
  std::vector<uint32_t> newer_;  // row -> next row with the same key (track_oldest only)
};

// ---- the immutable image
// -------------------------------------------------------------------------
//
// Image layout (little-endian, 8-byte aligned, see docs/storage_format.md "Key tables"):
//   n u64 | key_bytes u32 (4 or 8) | dir_bits u32
//   keys[n] (key_bytes each, ascending), padded to 8
//   rows[n] u32 (for equal keys in the order given to Build: oldest first), padded to 8
//   dir[2^dir_bits + 1] u32: rows whose key's top dir_bits bits are < p start at dir[p]
// The image carries no checksum of its own: it lives inside a checksummed section.

// A row to build from: its key, its row id (an entry number), and the order it was added in.
template <typename Key>
struct KeyRow {
  Key key;
  uint32_t row;
  uint64_t age;
};

// Appends the image of `rows` (any order; sorted here by (key, age)) to `out`, which must be
// 8-byte aligned in size.
template <typename Key>
void BuildKeyTable(std::vector<KeyRow<Key>> rows, std::string* out);

template <typename Key>
class KeyTable {
 public:
  KeyTable() = default;
  // Reads the image at the start of `bytes` (8-byte aligned); *image_size gets its length. The
  // sizes must fit in `bytes`; Corruption naming `what` otherwise. Directory entries and rows are
  // bounds-checked where they are read (a damaged image gives wrong rows, never a bad read).
  static Result<KeyTable> View(std::string_view bytes, const std::string& what, size_t* image_size);

  size_t size() const { return n_; }
  // The range [first, last) of positions holding `key`; walk it with key_at/row_at.
  std::pair<size_t, size_t> Equal(Key key) const;
  Key key_at(size_t i) const { return keys_[i]; }
  uint32_t row_at(size_t i) const { return rows_[i]; }
  // Equal() of many (table, key) pairs at once, their memory accesses overlapped: every
  // directory entry is prefetched first, then every key run, then the runs are searched (a check's
  // lookups, one per band, would otherwise wait for each cache miss in turn).
  static void EqualMany(std::span<const KeyTable* const> tables, std::span<const Key> keys,
                        std::pair<size_t, size_t>* ranges);
  // Bytes of the directory (what a lookup touches first).
  size_t directory_bytes() const { return dir_size_ * 4; }
  // Copies the directory out of the mapped image into memory of its own (on transparent huge
  // pages where available), so that lookups find it in RAM rather than in the page cache: the
  // store does this for its band tables ("band directories in RAM").
  void KeepDirectoryInMemory();

 private:
  // The directory bucket of `key`: [lo, hi), clamped to the rows (a damaged entry cannot point
  // outside).
  std::pair<size_t, size_t> Bucket(Key key) const;
  std::pair<size_t, size_t> Search(Key key, size_t lo, size_t hi) const {
    const Key* first = std::lower_bound(keys_ + lo, keys_ + hi, key);
    const Key* last = std::upper_bound(first, keys_ + hi, key);
    return {static_cast<size_t>(first - keys_), static_cast<size_t>(last - keys_)};
  }

  size_t n_ = 0;
  int dir_bits_ = 0;
  size_t dir_size_ = 0;
  const Key* keys_ = nullptr;
  const uint32_t* rows_ = nullptr;
  const uint32_t* dir_ = nullptr;
  std::shared_ptr<const uint32_t> owned_dir_;  // KeepDirectoryInMemory's copy
};

// The directory bits for n rows: about 8 rows per directory bucket.
int KeyTableDirectoryBits(size_t n, int key_bits);
// The size in bytes of the image of n rows of keys of key_bytes (4 or 8) bytes.
size_t KeyTableImageSize(size_t n, int key_bytes);

}  // namespace neardup::index

#endif  // NEARDUP_INDEX_KEY_TABLE_H_
