// TableSegment: the one immutable segment of permuted sorted tables that every neardup Hamming
// search runs on — PermutedIndex's segments in memory and the store's segment files, memory-mapped.
//
// Internal header. A segment is one contiguous, 8-byte-aligned byte image (see docs/index.md,
// "Segment image"): a header naming the design and the sizes (with its own XXH3-64 checksum), the
// rows sorted by fingerprint (ids[n], lo[n], hi[n] for 128 bits), then per table its sorted 64-bit
// projections keys[n] (absent for the identity table), rows[n] uint32 (128-bit, non-identity) and a
// prefix directory dir[2^D + 1] uint32. Build() makes the image in memory; View() reads one from a
// file mapping after checking the header and every size. Offsets read from the image (directory
// entries, row numbers) are bounds-checked where they are used, so a damaged image whose whole-file
// checksum was not verified gives wrong answers, never an out-of-bounds read.
//
// Thread safety: immutable; any number of threads may search one segment.
#ifndef NEARDUP_INDEX_TABLE_SEGMENT_H_
#define NEARDUP_INDEX_TABLE_SEGMENT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/index_planner.h"
#include "neardup/status.h"

namespace neardup::index {

// Key runs longer than this are searched by descending further bits, never scanned linearly.
inline constexpr size_t kLinearRunLimit = 256;

// Stable LSD radix sort on bits [min_bit, 64) of a 64-bit key, 11 bits per pass (2048 buckets
// keep the scatter within cache), skipping passes where every key has the same digit.
template <typename T, typename KeyFn>
void RadixSort(T* values, size_t n, KeyFn key, int min_bit = 0) {
  if (n < 256) {
    std::stable_sort(values, values + n, [&](const T& a, const T& b) {
      return (key(a) >> min_bit) < (key(b) >> min_bit);
    });
    return;
  }
  constexpr int kDigitBits = 11;
  constexpr uint64_t kDigitMask = (1 << kDigitBits) - 1;
  std::vector<T> buffer(n);
  std::vector<size_t> count(size_t{1} << kDigitBits);
  T* src = values;
  T* dst = buffer.data();
  for (int shift = min_bit; shift < 64; shift += kDigitBits) {
    std::fill(count.begin(), count.end(), 0);
    for (size_t i = 0; i < n; ++i) ++count[(key(src[i]) >> shift) & kDigitMask];
    if (count[(key(src[0]) >> shift) & kDigitMask] == n) continue;
    size_t sum = 0;
    for (size_t& c : count) {
      size_t v = c;
      c = sum;
      sum += v;
    }
    for (size_t i = 0; i < n; ++i) dst[count[(key(src[i]) >> shift) & kDigitMask]++] = src[i];
    std::swap(src, dst);
  }
  if (src != values) std::copy(src, src + n, values);
}
template <typename T, typename KeyFn>
void RadixSort(std::vector<T>* values, KeyFn key, int min_bit = 0) {
  RadixSort(values->data(), values->size(), key, min_bit);
}

// One contiguous piece of a table projection: `width` bits taken from `word` (0 = hi, 1 = lo) at
// MSB-first offset `src`, placed at MSB-first offset `dst` of the 64-bit projection.
struct Piece {
  int word;
  int src;
  int width;
  int dst;
};

inline uint64_t TakeBits(uint64_t word, int start, int width) {
  return (word << start) >> (64 - width);
}

// A design table compiled to bit moves.
struct CompiledTable {
  std::vector<Piece> pieces;
  int key_bits = 0;
  bool identity = false;

  uint64_t Project(uint64_t hi, uint64_t lo) const {
    uint64_t out = 0;
    for (const Piece& p : pieces) {
      uint64_t bits = TakeBits(p.word == 0 ? hi : lo, p.src, p.width);
      out |= bits << (64 - p.dst - p.width);
    }
    return out;
  }
  // Inverse of Project for 64-bit fingerprints (the projection is a permutation of all 64 bits).
  uint64_t Unproject64(uint64_t projected) const {
    uint64_t out = 0;
    for (const Piece& p : pieces) {
      uint64_t bits = TakeBits(projected, p.dst, p.width);
      out |= bits << (64 - p.src - p.width);
    }
    return out;
  }
  uint64_t KeyOf(uint64_t projected) const {
    return key_bits == 64 ? projected : projected >> (64 - key_bits);
  }
};

// A design with its tables compiled; shared by every segment built or viewed with it.
struct CompiledDesign {
  IndexDesign design;
  std::vector<CompiledTable> tables;
};

// Checks the design (widths, ranges inside the fingerprint, radii) and compiles it.
Result<std::shared_ptr<const CompiledDesign>> CompileDesign(const IndexDesign& design);

// The design's tables and radii as bytes (the planner's cost figures are not kept), and back.
std::string EncodeDesign(const IndexDesign& design);
Result<IndexDesign> DecodeDesign(std::string_view bytes);
// True when two designs search the same tables with the same radii.
bool SameTables(const IndexDesign& a, const IndexDesign& b);

// One row to build from.
struct SegmentRow {
  uint64_t hi;
  uint64_t lo;
  uint64_t id;
  friend bool operator<(const SegmentRow& a, const SegmentRow& b) {
    if (a.hi != b.hi) return a.hi < b.hi;
    if (a.lo != b.lo) return a.lo < b.lo;
    return a.id < b.id;
  }
  friend bool operator==(const SegmentRow&, const SegmentRow&) = default;
};

// Search cost counters, summed by the caller.
struct SearchCounters {
  uint64_t probes = 0, candidates = 0, oversized = 0;
};

// One probe of one table: a key, its directory bucket's bounds, how many bits it flips.
struct Probe {
  uint64_t key;
  uint32_t begin, end;
  uint32_t table;
  uint32_t flips;
};

// Per-thread scratch reused across searches.
struct SearchScratch {
  std::vector<Probe> probes;
  std::vector<uint32_t> rows;
  std::vector<uint64_t> fps;
  std::vector<uint64_t> projected;  // per table
};

class TableSegment {
 public:
  // Sorts `rows` by (fingerprint, id) and builds every table of `design` (tables on up to
  // `threads` threads). At most 2^32-1 rows.
  static std::shared_ptr<const TableSegment> Build(std::vector<SegmentRow> rows, int bits,
                                                   std::shared_ptr<const CompiledDesign> design,
                                                   int threads);
  // Reads the image at `bytes` (8-byte aligned, kept alive by `keeper`), built with a design that
  // searches the same tables as `design`. Checks the header checksum, the design and that every
  // array fits exactly; Corruption naming `what` otherwise.
  static Result<std::shared_ptr<const TableSegment>> View(
      std::string_view bytes, std::shared_ptr<const CompiledDesign> design,
      std::shared_ptr<const void> keeper, const std::string& what);
  // Size of the image in bytes.
  size_t image_size() const { return image_size_; }
  const char* image() const { return image_; }

  int bits() const { return bits_; }
  size_t size() const { return n_; }
  uint64_t id(size_t row) const { return ids_[row]; }
  uint64_t lo(size_t row) const { return lo_[row]; }
  uint64_t hi(size_t row) const { return bits_ == 128 ? hi_[row] : 0; }
  const CompiledDesign& design() const { return *design_; }

  // Calls emit(row, distance) once for every row within k of (hi, lo), in row order. k must be in
  // [0, design().design.indexed_k].
  template <typename Emit>
  void Search(uint64_t hi, uint64_t lo, int k, SearchCounters* counters, SearchScratch* scratch,
              Emit&& emit) const {
    CollectRows(hi, lo, k, counters, scratch);
    for (uint32_t row : scratch->rows) {
      const int d = Distance(row, hi, lo);
      if (d <= k) emit(row, d);  // always true unless the image is damaged
    }
  }
  // Calls emit(row, distance) for every row within k, any k: a linear scan of the rows.
  template <typename Emit>
  void Scan(uint64_t hi, uint64_t lo, int k, SearchCounters* counters, Emit&& emit) const {
    counters->candidates += n_;
    for (size_t row = 0; row < n_; ++row) {
      int d = Distance(row, hi, lo);
      if (d <= k) emit(static_cast<uint32_t>(row), d);
    }
  }
  // First row holding (hi, lo, id), or size() if none.
  size_t Find(uint64_t hi, uint64_t lo, uint64_t id) const;

  ~TableSegment();
  TableSegment(const TableSegment&) = delete;
  TableSegment& operator=(const TableSegment&) = delete;

 private:
  struct Table {
    int dir_bits = 0;
    const uint64_t* keys = nullptr;  // the row array lo (64) / hi (128) for the identity table
    const uint32_t* rows = nullptr;  // 128-bit non-identity tables only
    const uint32_t* dir = nullptr;   // 2^dir_bits + 1 offsets
  };
  class TableSearcher;

  TableSegment() = default;
  int Distance(size_t row, uint64_t hi, uint64_t lo) const {
    int d = __builtin_popcountll(lo_[row] ^ lo);
    if (bits_ == 128) d += __builtin_popcountll(hi_[row] ^ hi);
    return d;
  }
  // Computes the array offsets of an image of n_ rows; returns the image size.
  size_t Layout(size_t header_bytes, const std::vector<int>& dir_bits);
  // Points the arrays into image_ (after Layout).
  void Bind();
  // scratch->rows = every row within k of (hi, lo), sorted, each once (and maybe a few more).
  void CollectRows(uint64_t hi, uint64_t lo, int k, SearchCounters* counters,
                   SearchScratch* scratch) const;
  // CollectRows' steps. scratch->probes = every table's probe keys within `radius` bits of the
  // query's key, and scratch->projected = the query's projection per table.
  void MakeProbes(uint64_t hi, uint64_t lo, int radius, SearchScratch* scratch) const;
  // Prefetches every probe's directory entry.
  void PrefetchDirectories(const std::vector<Probe>& probes) const;
  // Sets every probe's bucket bounds and prefetches the bucket's keys.
  void ReadBucketBounds(std::vector<Probe>* probes) const;
  // Scans every probe's bucket: rows (identity table, 128 bits) to scratch->rows, fingerprints
  // (permuted 64-bit tables) to scratch->fps.
  void ScanProbes(uint64_t hi, uint64_t lo, int k, SearchCounters* counters,
                  SearchScratch* scratch) const;
  // Adds the rows of the fingerprints in scratch->fps (64 bits) to scratch->rows.
  void AddRowsOfFingerprints(SearchScratch* scratch) const;
  // Rows whose fingerprint equals the 64-bit `fp` (first, end); bounds-checked.
  std::pair<size_t, size_t> EqualRows64(uint64_t fp, int identity_table) const;

  std::shared_ptr<const CompiledDesign> design_;
  std::shared_ptr<const void> keeper_;  // owns the image when viewed from a mapping
  std::shared_ptr<void> owned_;         // owns the image when built (AllocateImage)
  const char* image_ = nullptr;
  size_t image_size_ = 0;
  int bits_ = 64;
  size_t n_ = 0;
  const uint64_t* ids_ = nullptr;
  const uint64_t* lo_ = nullptr;
  const uint64_t* hi_ = nullptr;
  std::vector<Table> tables_;
  // Byte offsets of the arrays inside the image (for Layout).
  size_t ids_off_ = 0, lo_off_ = 0, hi_off_ = 0;
  std::vector<size_t> keys_off_, rows_off_, dir_off_;
  std::vector<int> dir_bits_;
};

}  // namespace neardup::index

#endif  // NEARDUP_INDEX_TABLE_SEGMENT_H_
