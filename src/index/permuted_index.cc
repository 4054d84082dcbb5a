// PermutedIndex: segments of permuted sorted tables plus a delta buffer, searched exactly; see
// include/neardup/permuted_index.h for the layout and thread-safety contract.
#include "neardup/permuted_index.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "common/parallel.h"

namespace neardup {
namespace {

constexpr size_t kLinearRunLimit = 256;   // longer key runs are searched by descending bits
constexpr size_t kParallelMin = 1 << 17;  // smaller builds stay on the calling thread

struct Row {
  uint64_t hi;
  uint64_t lo;
  uint64_t id;
  friend bool operator<(const Row& a, const Row& b) {
    if (a.hi != b.hi) return a.hi < b.hi;
    if (a.lo != b.lo) return a.lo < b.lo;
    return a.id < b.id;
  }
  friend bool operator==(const Row&, const Row&) = default;
};

// Stable LSD radix sort on bits [min_bit, 64) of a 64-bit key, 11 bits per pass (2048 buckets
// keep the scatter within cache), skipping passes where every key has the same digit.
template <typename T, typename KeyFn>
void RadixSort(std::vector<T>* values, KeyFn key, int min_bit = 0) {
  const size_t n = values->size();
  if (n < 256) {
    std::stable_sort(values->begin(), values->end(), [&](const T& a, const T& b) {
      return (key(a) >> min_bit) < (key(b) >> min_bit);
    });
    return;
  }
  constexpr int kDigitBits = 11;
  constexpr uint64_t kDigitMask = (1 << kDigitBits) - 1;
  std::vector<T> buffer(n);
  std::vector<size_t> count(size_t{1} << kDigitBits);
  T* src = values->data();
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
  if (src != values->data()) std::copy(src, src + n, values->data());
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

CompiledTable Compile(const IndexTableSpec& spec, int bits) {
  CompiledTable table;
  table.key_bits = spec.key_bits;
  table.identity = IsIdentityProjection(spec, bits);
  int filled = 0;
  for (const BitRange& r : ProjectionRanges(spec, bits)) {
    int start = r.start, width = r.width;
    while (width > 0) {
      // Split at the 64-bit word boundary of a 128-bit fingerprint.
      int word = bits == 64 ? 1 : (start < 64 ? 0 : 1);
      int offset = bits == 64 ? start : start % 64;
      int w = std::min(width, 64 - offset);
      table.pieces.push_back({word, offset, w, filled});
      filled += w;
      start += w;
      width -= w;
    }
  }
  return table;
}

struct SegmentTable {
  int dir_bits = 0;
  std::vector<uint64_t> keys;  // empty when the projection is the identity (use the row arrays)
  std::vector<uint32_t> rows;  // 128-bit fingerprints, non-identity tables only
  std::vector<uint32_t> dir;   // 2^dir_bits + 1 offsets
};

// An immutable batch of rows sorted by fingerprint, with one sorted table per design table.
struct Segment {
  int bits = 64;
  std::vector<uint64_t> ids, lo, hi;  // hi empty for 64 bits
  std::vector<SegmentTable> tables;

  size_t size() const { return ids.size(); }
  const uint64_t* Keys(size_t t, const CompiledTable& ct) const {
    if (ct.identity) return bits == 64 ? lo.data() : hi.data();
    return tables[t].keys.data();
  }
  size_t MemoryBytes() const {
    size_t b = (ids.size() + lo.size() + hi.size()) * 8;
    for (const auto& t : tables) b += t.keys.size() * 8 + t.rows.size() * 4 + t.dir.size() * 4;
    return b;
  }
};

void BuildDirectory(const uint64_t* keys, size_t n, int dir_bits, std::vector<uint32_t>* dir) {
  dir->assign((size_t{1} << dir_bits) + 1, 0);
  // dir[b] = first index whose top dir_bits bits are >= b.
  size_t i = 0;
  for (size_t b = 0; b < (size_t{1} << dir_bits); ++b) {
    uint64_t low = dir_bits == 0 ? 0 : static_cast<uint64_t>(b) << (64 - dir_bits);
    while (i < n && keys[i] < low) ++i;
    (*dir)[b] = static_cast<uint32_t>(i);
  }
  (*dir)[size_t{1} << dir_bits] = static_cast<uint32_t>(n);
}

std::shared_ptr<const Segment> BuildSegment(std::vector<Row> rows, int bits,
                                            const std::vector<CompiledTable>& tables,
                                            const IndexDesign& design, int threads) {
  auto seg = std::make_shared<Segment>();
  seg->bits = bits;
  const size_t n = rows.size();
  if (n < kParallelMin) threads = 1;
  RadixSort(&rows, [](const Row& r) { return r.lo; });
  if (bits == 128) RadixSort(&rows, [](const Row& r) { return r.hi; });
  // Equal fingerprints: order by id so the layout is deterministic.
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && rows[j].hi == rows[i].hi && rows[j].lo == rows[i].lo) ++j;
    if (j - i > 1) std::sort(rows.begin() + i, rows.begin() + j);
    i = j;
  }
  seg->ids.resize(n);
  seg->lo.resize(n);
  if (bits == 128) seg->hi.resize(n);
  for (size_t i = 0; i < n; ++i) {
    seg->ids[i] = rows[i].id;
    seg->lo[i] = rows[i].lo;
    if (bits == 128) seg->hi[i] = rows[i].hi;
  }
  rows = {};
  seg->tables.resize(tables.size());
  ParallelFor(tables.size(), threads, [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      const CompiledTable& ct = tables[t];
      SegmentTable& st = seg->tables[t];
      st.dir_bits = DirectoryBitsFor(static_cast<double>(n), ct.key_bits);
      if (!ct.identity) {
        if (bits == 64) {
          st.keys.resize(n);
          for (size_t i = 0; i < n; ++i) st.keys[i] = ct.Project(0, seg->lo[i]);
          RadixSort(&st.keys, [](uint64_t v) { return v; });
        } else {
          std::vector<std::pair<uint64_t, uint32_t>> pairs(n);
          for (size_t i = 0; i < n; ++i)
            pairs[i] = {ct.Project(seg->hi[i], seg->lo[i]), static_cast<uint32_t>(i)};
          RadixSort(&pairs, [](const std::pair<uint64_t, uint32_t>& p) { return p.first; });
          st.keys.resize(n);
          st.rows.resize(n);
          for (size_t i = 0; i < n; ++i) {
            st.keys[i] = pairs[i].first;
            st.rows[i] = pairs[i].second;
          }
        }
      }
      BuildDirectory(seg->Keys(t, ct), n, st.dir_bits, &st.dir);
    }
  });
  (void)design;
  return seg;
}

// Rows of a segment or delta not yet merged, with a fixed capacity so readers of older snapshots
// can keep reading a prefix while the writer appends past it.
struct DeltaBuffer {
  explicit DeltaBuffer(size_t capacity)
      : ids(new uint64_t[capacity]), lo(new uint64_t[capacity]), hi(new uint64_t[capacity]) {}
  std::unique_ptr<uint64_t[]> ids, lo, hi;
};

struct Snapshot {
  std::vector<std::shared_ptr<const Segment>> segments;
  std::shared_ptr<DeltaBuffer> delta;
  size_t delta_size = 0;
  std::shared_ptr<const std::vector<Row>> tombstones;  // sorted; may be null
  size_t size = 0;                                     // live items

  bool IsDead(uint64_t hi, uint64_t lo, uint64_t id) const {
    return tombstones && !tombstones->empty() &&
           std::binary_search(tombstones->begin(), tombstones->end(), Row{hi, lo, id});
  }
};

struct Counters {
  uint64_t probes = 0, candidates = 0, oversized = 0;
};

// Searches one table's sorted projections.
class TableSearcher {
 public:
  TableSearcher(const uint64_t* keys, const SegmentTable& table, const CompiledTable& ct,
                uint64_t projected_query, int k, Counters* counters)
      : keys_(keys), table_(table), ct_(ct), pq_(projected_query), k_(k), counters_(counters) {}

  // Calls emit(index) for every entry whose projection is within k of the query projection and
  // whose key is within `radius` of the query key.
  template <typename Emit>
  void Run(int radius, Emit&& emit) {
    uint64_t qkey = ct_.KeyOf(pq_);
    Probe(qkey, 0, 0, radius, emit);
  }

 private:
  template <typename Emit>
  void Probe(uint64_t key, int first_bit, int flipped, int radius, Emit& emit) {
    Lookup(key, flipped, emit);
    if (flipped == radius) return;
    for (int b = first_bit; b < ct_.key_bits; ++b)
      Probe(key ^ (uint64_t{1} << b), b + 1, flipped + 1, radius, emit);
  }

  template <typename Emit>
  void Lookup(uint64_t key, int key_distance, Emit& emit) {
    ++counters_->probes;
    const int w = ct_.key_bits;
    const int d = table_.dir_bits;
    uint64_t bucket = d == 0 ? 0 : key >> (w - d);
    size_t begin = table_.dir[bucket], end = table_.dir[bucket + 1];
    if (begin == end) return;
    if (w > d) {
      uint64_t low = w == 64 ? key : key << (64 - w);
      uint64_t high = w == 64 ? key : low | (~uint64_t{0} >> w);
      begin = std::lower_bound(keys_ + begin, keys_ + end, low) - keys_;
      end = std::upper_bound(keys_ + begin, keys_ + end, high) - keys_;
    }
    if (end - begin > kLinearRunLimit) ++counters_->oversized;
    Scan(begin, end, w, key_distance, emit);
  }

  // Entries in [begin, end) share their first `bit` projection bits, at distance `distance` from
  // the query's.
  template <typename Emit>
  void Scan(size_t begin, size_t end, int bit, int distance, Emit& emit) {
    if (distance > k_) return;
    if (end - begin <= kLinearRunLimit || bit >= 64) {
      counters_->candidates += end - begin;
      for (size_t i = begin; i < end; ++i)
        if (std::popcount(keys_[i] ^ pq_) <= k_) emit(i);
      return;
    }
    const int shift = 63 - bit;
    size_t mid = std::partition_point(keys_ + begin, keys_ + end,
                                      [shift](uint64_t v) { return ((v >> shift) & 1) == 0; }) -
                 keys_;
    int query_bit = static_cast<int>((pq_ >> shift) & 1);
    Scan(begin, mid, bit + 1, distance + (query_bit != 0), emit);
    Scan(mid, end, bit + 1, distance + (query_bit != 1), emit);
  }

  const uint64_t* keys_;
  const SegmentTable& table_;
  const CompiledTable& ct_;
  uint64_t pq_;
  int k_;
  Counters* counters_;
};

// Per-thread scratch reused across searches.
struct Scratch {
  std::vector<uint32_t> rows;
  std::vector<uint64_t> fps;
};

// Every row of `seg` within k of (hi, lo): calls emit(row, distance) once per row.
template <typename Emit>
void SearchSegment(const Segment& seg, const std::vector<CompiledTable>& tables, int radius,
                   uint64_t hi, uint64_t lo, int k, Counters* counters, Scratch* scratch,
                   Emit&& emit) {
  scratch->rows.clear();
  scratch->fps.clear();
  int identity_table = -1;
  for (size_t t = 0; t < tables.size(); ++t) {
    const CompiledTable& ct = tables[t];
    const uint64_t* keys = seg.Keys(t, ct);
    uint64_t pq = ct.Project(hi, lo);
    TableSearcher searcher(keys, seg.tables[t], ct, pq, k, counters);
    if (seg.bits == 64) {
      if (ct.identity) {
        identity_table = static_cast<int>(t);
        searcher.Run(radius, [&](size_t i) { scratch->rows.push_back(static_cast<uint32_t>(i)); });
      } else {
        searcher.Run(radius, [&](size_t i) { scratch->fps.push_back(ct.Unproject64(keys[i])); });
      }
    } else {
      const SegmentTable& st = seg.tables[t];
      searcher.Run(radius, [&](size_t i) {
        uint32_t row = ct.identity ? static_cast<uint32_t>(i) : st.rows[i];
        if (std::popcount(seg.hi[row] ^ hi) + std::popcount(seg.lo[row] ^ lo) <= k)
          scratch->rows.push_back(row);
      });
    }
  }
  if (seg.bits == 64 && !scratch->fps.empty()) {
    // Fingerprints found through permuted tables: find their rows (all rows holding an equal
    // fingerprint have the same distance, so the identity table found all of them or none).
    std::sort(scratch->fps.begin(), scratch->fps.end());
    scratch->fps.erase(std::unique(scratch->fps.begin(), scratch->fps.end()), scratch->fps.end());
    std::sort(scratch->rows.begin(), scratch->rows.end());
    const size_t found_direct = scratch->rows.size();
    for (uint64_t fp : scratch->fps) {
      size_t begin = 0, end = seg.size();
      if (identity_table >= 0) {
        const SegmentTable& st = seg.tables[identity_table];
        uint64_t bucket = st.dir_bits == 0 ? 0 : fp >> (64 - st.dir_bits);
        begin = st.dir[bucket];
        end = st.dir[bucket + 1];
      }
      auto range = std::equal_range(seg.lo.begin() + begin, seg.lo.begin() + end, fp);
      if (range.first == range.second) continue;
      uint32_t first = static_cast<uint32_t>(range.first - seg.lo.begin());
      if (std::binary_search(scratch->rows.begin(), scratch->rows.begin() + found_direct, first))
        continue;
      for (auto it = range.first; it != range.second; ++it)
        scratch->rows.push_back(static_cast<uint32_t>(it - seg.lo.begin()));
    }
  }
  std::sort(scratch->rows.begin(), scratch->rows.end());
  scratch->rows.erase(std::unique(scratch->rows.begin(), scratch->rows.end()), scratch->rows.end());
  for (uint32_t row : scratch->rows) {
    int d =
        std::popcount(seg.lo[row] ^ lo) + (seg.bits == 128 ? std::popcount(seg.hi[row] ^ hi) : 0);
    emit(row, d);
  }
}

// ---- self-join by sorted runs ---------------------------------------------------------------
// Each table of a radius-0 design is sorted once; every pair within k shares the key of at least
// one table, so comparing items inside runs of equal keys finds all pairs. A pair is reported by
// the first table where the two keys agree, so no global deduplication is needed.

// The radius-0 design cheapest for a self-join of n items: sorting cost per table plus the
// expected comparisons inside runs.
IndexDesign PlanJoinDesign(int bits, int k, double n) {
  PlanRequest request;
  request.bits = bits;
  request.k = k;
  request.n = std::max(1.0, n);
  auto designs = EnumerateIndexDesigns(request);
  IndexDesign best;
  double best_cost = -1;
  if (!designs.ok()) return best;
  for (const IndexDesign& d : *designs) {
    if (d.probe_radius[k] != 0 || d.tables.size() > 64) continue;
    double cost = 0;
    for (const IndexTableSpec& t : d.tables)
      cost += request.n * 20.0 + request.n * request.n / std::ldexp(2.0, t.key_bits) * 1.5;
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best = d;
    }
  }
  return best;
}

struct JoinItems {
  int bits = 64;
  std::vector<uint64_t> ids, lo, hi;  // hi empty for 64 bits
  size_t size() const { return ids.size(); }
  int Distance(size_t a, size_t b) const {
    return std::popcount(lo[a] ^ lo[b]) + (bits == 128 ? std::popcount(hi[a] ^ hi[b]) : 0);
  }
};

struct RowPair {
  uint32_t a, b;  // a < b
  int distance;
};

void JoinTable(const JoinItems& items, const std::vector<CompiledTable>& tables, size_t t, int k,
               std::vector<RowPair>* out) {
  const CompiledTable& ct = tables[t];
  const size_t n = items.size();
  std::vector<std::pair<uint64_t, uint32_t>> entries(n);
  for (size_t i = 0; i < n; ++i)
    entries[i] = {ct.Project(items.bits == 128 ? items.hi[i] : 0, items.lo[i]),
                  static_cast<uint32_t>(i)};
  // Only runs of equal keys matter: sort on the key bits; oversized runs are sorted fully below.
  RadixSort(
      &entries, [](const std::pair<uint64_t, uint32_t>& e) { return e.first; }, 64 - ct.key_bits);
  auto first_table_with_equal_keys = [&](uint32_t a, uint32_t b) {
    for (size_t u = 0; u < t; ++u) {
      const CompiledTable& other = tables[u];
      uint64_t ha = items.bits == 128 ? items.hi[a] : 0, hb = items.bits == 128 ? items.hi[b] : 0;
      if (other.KeyOf(other.Project(ha, items.lo[a])) ==
          other.KeyOf(other.Project(hb, items.lo[b])))
        return true;
    }
    return false;
  };
  auto consider = [&](uint32_t a, uint32_t b) {
    int d = items.Distance(a, b);
    if (d > k) return;
    if (a > b) std::swap(a, b);
    if (first_table_with_equal_keys(a, b)) return;
    out->push_back({a, b, d});
  };
  for (size_t begin = 0; begin < n;) {
    const uint64_t key = ct.KeyOf(entries[begin].first);
    size_t end = begin + 1;
    while (end < n && ct.KeyOf(entries[end].first) == key) ++end;
    if (end - begin <= kLinearRunLimit) {
      for (size_t i = begin; i < end; ++i)
        for (size_t j = i + 1; j < end; ++j)
          if (std::popcount(entries[i].first ^ entries[j].first) <= k)
            consider(entries[i].second, entries[j].second);
    } else {
      // A skewed run: sort it on the whole projection, then descend it for each item instead of
      // comparing all pairs.
      std::sort(entries.begin() + begin, entries.begin() + end);
      std::vector<uint64_t> keys(end - begin);
      for (size_t i = begin; i < end; ++i) keys[i - begin] = entries[i].first;
      std::function<void(size_t, size_t, size_t, int, int)> scan = [&](size_t i, size_t lo,
                                                                       size_t hi, int bit,
                                                                       int distance) {
        if (distance > k || lo >= hi) return;
        if (hi - lo <= 32 || bit >= 64) {
          for (size_t j = std::max(lo, i + 1); j < hi; ++j)
            if (std::popcount(keys[i] ^ keys[j]) <= k)
              consider(entries[begin + i].second, entries[begin + j].second);
          return;
        }
        if (hi <= i + 1) return;
        const int shift = 63 - bit;
        size_t mid = std::partition_point(keys.begin() + lo, keys.begin() + hi,
                                          [shift](uint64_t v) { return ((v >> shift) & 1) == 0; }) -
                     keys.begin();
        int qbit = static_cast<int>((keys[i] >> shift) & 1);
        scan(i, lo, mid, bit + 1, distance + (qbit != 0));
        scan(i, mid, hi, bit + 1, distance + (qbit != 1));
      };
      for (size_t i = 0; i < keys.size(); ++i) scan(i, i + 1, keys.size(), ct.key_bits, 0);
    }
    begin = end;
  }
}

}  // namespace

struct PermutedIndex::Impl {
  PermutedIndexOptions options;
  IndexDesign design;
  std::vector<CompiledTable> tables;

  mutable std::mutex snapshot_mu;
  std::shared_ptr<const Snapshot> snapshot;
  std::mutex writer_mu;

  mutable std::atomic<uint64_t> queries{0}, probes{0}, candidates{0}, results{0}, oversized{0};

  std::shared_ptr<const Snapshot> Load() const {
    std::lock_guard<std::mutex> lock(snapshot_mu);
    return snapshot;
  }
  void Publish(std::shared_ptr<const Snapshot> s) {
    std::lock_guard<std::mutex> lock(snapshot_mu);
    snapshot = std::move(s);
  }
  int threads() const { return options.threads > 0 ? options.threads : DefaultThreadCount(); }

  Status Check(const Fingerprint& fp, const char* what) const {
    if (fp.bits != options.bits)
      return Status::InvalidArgument(std::string(what) + ": fingerprint has " +
                                     std::to_string(fp.bits) + " bits, index holds " +
                                     std::to_string(options.bits));
    if (fp.bits == 64 && fp.hi != 0)
      return Status::InvalidArgument(std::string(what) +
                                     ": 64-bit fingerprint with bits set in its high word");
    return Status::Ok();
  }

  // Segments address rows with uint32 offsets.
  static Status CheckCapacity(size_t current, size_t adding) {
    if (current + adding > std::numeric_limits<uint32_t>::max())
      return Status::ResourceExhausted("PermutedIndex: more than 2^32-1 fingerprints in one index");
    return Status::Ok();
  }

  std::shared_ptr<const Segment> Build(std::vector<Row> rows) const {
    const int build_threads = rows.size() >= kParallelMin ? threads() : 1;
    return BuildSegment(std::move(rows), options.bits, tables, design, build_threads);
  }

  static void AppendRows(const Segment& seg, const Snapshot& s, std::vector<Row>* out) {
    for (size_t i = 0; i < seg.size(); ++i) {
      Row r{seg.bits == 128 ? seg.hi[i] : 0, seg.lo[i], seg.ids[i]};
      if (!s.IsDead(r.hi, r.lo, r.id)) out->push_back(r);
    }
  }

  // Merges the newest segments while the older of the last two is at most twice the newer.
  void MergeTail(const Snapshot& s, std::vector<std::shared_ptr<const Segment>>* segments) const {
    while (segments->size() >= 2) {
      const auto& older = (*segments)[segments->size() - 2];
      const auto& newer = segments->back();
      if (older->size() > 2 * newer->size()) break;
      std::vector<Row> rows;
      rows.reserve(older->size() + newer->size());
      AppendRows(*older, s, &rows);
      AppendRows(*newer, s, &rows);
      segments->pop_back();
      segments->pop_back();
      if (!rows.empty()) segments->push_back(Build(std::move(rows)));
    }
  }

  std::shared_ptr<Snapshot> CompactedSnapshot(const Snapshot& s) const {
    std::vector<Row> rows;
    rows.reserve(s.size);
    for (const auto& seg : s.segments) AppendRows(*seg, s, &rows);
    for (size_t i = 0; i < s.delta_size; ++i)
      rows.push_back({s.delta->hi[i], s.delta->lo[i], s.delta->ids[i]});
    auto next = std::make_shared<Snapshot>();
    next->size = rows.size();
    if (!rows.empty()) next->segments.push_back(Build(std::move(rows)));
    next->delta = std::make_shared<DeltaBuffer>(options.delta_capacity);
    return next;
  }

  // Visits every live item of `s` within k of (hi, lo): visit(global_row, id, distance). Global
  // rows number the segments' rows in order, then the delta's.
  template <typename Visit>
  void SearchSnapshot(const Snapshot& s, uint64_t hi, uint64_t lo, int k, Scratch* scratch,
                      Visit&& visit) const {
    Counters counters;
    const int radius = design.probe_radius[k];
    size_t offset = 0;
    uint64_t found = 0;
    for (const auto& seg : s.segments) {
      SearchSegment(*seg, tables, radius, hi, lo, k, &counters, scratch, [&](uint32_t row, int d) {
        uint64_t id = seg->ids[row];
        if (s.IsDead(seg->bits == 128 ? seg->hi[row] : 0, seg->lo[row], id)) return;
        ++found;
        visit(offset + row, id, d);
      });
      offset += seg->size();
    }
    const DeltaBuffer* delta = s.delta.get();
    counters.candidates += s.delta_size;
    for (size_t i = 0; i < s.delta_size; ++i) {
      int d = std::popcount(delta->lo[i] ^ lo) + std::popcount(delta->hi[i] ^ hi);
      if (d <= k) {
        ++found;
        visit(offset + i, delta->ids[i], d);
      }
    }
    queries.fetch_add(1, std::memory_order_relaxed);
    probes.fetch_add(counters.probes, std::memory_order_relaxed);
    candidates.fetch_add(counters.candidates, std::memory_order_relaxed);
    oversized.fetch_add(counters.oversized, std::memory_order_relaxed);
    results.fetch_add(found, std::memory_order_relaxed);
  }

  std::vector<Neighbor> SearchOne(const Snapshot& s, const Fingerprint& q, int k,
                                  Scratch* scratch) const {
    std::vector<Neighbor> out;
    SearchSnapshot(s, q.hi, q.lo, k, scratch, [&](size_t, uint64_t id, int d) {
      out.push_back({id, d});
    });
    // One entry per id (its nearest stored fingerprint), sorted by (distance, id).
    std::sort(out.begin(), out.end(), [](const Neighbor& a, const Neighbor& b) {
      return a.id != b.id ? a.id < b.id : a.distance < b.distance;
    });
    out.erase(std::unique(out.begin(), out.end(),
                          [](const Neighbor& a, const Neighbor& b) { return a.id == b.id; }),
              out.end());
    std::sort(out.begin(), out.end(), [](const Neighbor& a, const Neighbor& b) {
      return a.distance != b.distance ? a.distance < b.distance : a.id < b.id;
    });
    return out;
  }
};

PermutedIndex::PermutedIndex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PermutedIndex::~PermutedIndex() = default;

Result<std::unique_ptr<PermutedIndex>> PermutedIndex::Create(const PermutedIndexOptions& options) {
  if (options.bits != 64 && options.bits != 128)
    return Status::InvalidArgument("PermutedIndex: bits must be 64 or 128, got " +
                                   std::to_string(options.bits));
  if (options.delta_capacity == 0)
    return Status::InvalidArgument("PermutedIndex: delta_capacity must be positive");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (options.design) {
    const IndexDesign& d = *options.design;
    if (d.bits != options.bits || d.max_k < 0 ||
        static_cast<int>(d.probe_radius.size()) != d.max_k + 1 || d.tables.empty())
      return Status::InvalidArgument("PermutedIndex: design does not match the options");
    impl->design = d;
  } else {
    PlanRequest request;
    request.bits = options.bits;
    request.k = options.max_k;
    request.n = std::max(1.0, options.expected_size);
    request.memory_budget_bytes = options.memory_budget_bytes_per_fingerprint > 0
                                      ? options.memory_budget_bytes_per_fingerprint * request.n
                                      : 0;
    auto plan = PlanIndex(request);
    if (!plan.ok() && request.memory_budget_bytes > 0) {
      request.memory_budget_bytes = 0;  // nothing fits: take the cheapest-to-query design
      plan = PlanIndex(request);
    }
    if (!plan.ok()) return plan.status().WithContext("PermutedIndex");
    impl->design = std::move(plan).value();
  }
  for (const IndexTableSpec& spec : impl->design.tables) {
    if (spec.key_bits < 1 || spec.key_bits > 64)
      return Status::InvalidArgument("PermutedIndex: table key width must be in [1, 64]");
    impl->tables.push_back(Compile(spec, options.bits));
  }
  auto s = std::make_shared<Snapshot>();
  s->delta = std::make_shared<DeltaBuffer>(options.delta_capacity);
  impl->snapshot = std::move(s);
  return std::unique_ptr<PermutedIndex>(new PermutedIndex(std::move(impl)));
}

int PermutedIndex::bits() const { return impl_->options.bits; }
int PermutedIndex::max_k() const { return impl_->design.max_k; }
size_t PermutedIndex::size() const { return impl_->Load()->size; }
const IndexDesign& PermutedIndex::design() const { return impl_->design; }

Status PermutedIndex::Add(uint64_t id, const Fingerprint& fp) {
  NEARDUP_RETURN_IF_ERROR(impl_->Check(fp, "PermutedIndex::Add"));
  std::lock_guard<std::mutex> lock(impl_->writer_mu);
  auto current = impl_->Load();
  NEARDUP_RETURN_IF_ERROR(Impl::CheckCapacity(current->size, 1));
  std::shared_ptr<Snapshot> next;
  if (current->IsDead(fp.hi, fp.lo, id)) {
    // Re-adding a removed pair: purge tombstones so the new copy is not hidden.
    next = impl_->CompactedSnapshot(*current);
  } else {
    next = std::make_shared<Snapshot>(*current);
  }
  if (next->delta_size == impl_->options.delta_capacity) {
    std::vector<Row> rows;
    rows.reserve(next->delta_size);
    for (size_t i = 0; i < next->delta_size; ++i)
      rows.push_back({next->delta->hi[i], next->delta->lo[i], next->delta->ids[i]});
    next->segments.push_back(impl_->Build(std::move(rows)));
    impl_->MergeTail(*next, &next->segments);
    next->delta = std::make_shared<DeltaBuffer>(impl_->options.delta_capacity);
    next->delta_size = 0;
  }
  size_t slot = next->delta_size;
  next->delta->ids[slot] = id;
  next->delta->lo[slot] = fp.lo;
  next->delta->hi[slot] = fp.hi;
  next->delta_size = slot + 1;
  next->size += 1;
  impl_->Publish(std::move(next));
  return Status::Ok();
}

Status PermutedIndex::AddBatch(std::span<const uint64_t> ids, std::span<const Fingerprint> fps) {
  if (ids.size() != fps.size())
    return Status::InvalidArgument("PermutedIndex::AddBatch: " + std::to_string(ids.size()) +
                                   " ids but " + std::to_string(fps.size()) + " fingerprints");
  for (size_t i = 0; i < fps.size(); ++i) {
    Status st = impl_->Check(fps[i], "PermutedIndex::AddBatch");
    if (!st.ok()) return st.WithContext("item " + std::to_string(i));
  }
  if (fps.size() < impl_->options.delta_capacity) {
    for (size_t i = 0; i < fps.size(); ++i) NEARDUP_RETURN_IF_ERROR(Add(ids[i], fps[i]));
    return Status::Ok();
  }
  std::vector<Row> rows(fps.size());
  for (size_t i = 0; i < fps.size(); ++i) rows[i] = {fps[i].hi, fps[i].lo, ids[i]};
  std::lock_guard<std::mutex> lock(impl_->writer_mu);
  auto current = impl_->Load();
  NEARDUP_RETURN_IF_ERROR(Impl::CheckCapacity(current->size, rows.size()));
  std::shared_ptr<Snapshot> next = std::make_shared<Snapshot>(*current);
  if (current->tombstones && !current->tombstones->empty()) {
    for (const Row& r : rows) {
      if (current->IsDead(r.hi, r.lo, r.id)) {
        next = impl_->CompactedSnapshot(*current);
        break;
      }
    }
  }
  size_t added = rows.size();
  next->segments.push_back(impl_->Build(std::move(rows)));
  impl_->MergeTail(*next, &next->segments);
  next->size += added;
  impl_->Publish(std::move(next));
  return Status::Ok();
}

size_t PermutedIndex::Remove(uint64_t id, const Fingerprint& fp) {
  if (fp.bits != impl_->options.bits) return 0;
  std::lock_guard<std::mutex> lock(impl_->writer_mu);
  auto current = impl_->Load();
  auto next = std::make_shared<Snapshot>(*current);
  size_t removed = 0;
  // Delta: copy without the pair.
  size_t in_delta = 0;
  for (size_t i = 0; i < current->delta_size; ++i)
    if (current->delta->ids[i] == id && current->delta->lo[i] == fp.lo &&
        current->delta->hi[i] == fp.hi)
      ++in_delta;
  if (in_delta > 0) {
    auto delta = std::make_shared<DeltaBuffer>(impl_->options.delta_capacity);
    size_t j = 0;
    for (size_t i = 0; i < current->delta_size; ++i) {
      if (current->delta->ids[i] == id && current->delta->lo[i] == fp.lo &&
          current->delta->hi[i] == fp.hi)
        continue;
      delta->ids[j] = current->delta->ids[i];
      delta->lo[j] = current->delta->lo[i];
      delta->hi[j] = current->delta->hi[i];
      ++j;
    }
    next->delta = std::move(delta);
    next->delta_size = j;
    removed += in_delta;
  }
  // Segments: count live copies, then tombstone the pair.
  if (!current->IsDead(fp.hi, fp.lo, id)) {
    size_t in_segments = 0;
    for (const auto& seg : current->segments) {
      // Rows are sorted by (hi, lo, id): binary search the pair.
      size_t lo_i = 0, hi_i = seg->size();
      while (lo_i < hi_i) {
        size_t mid = (lo_i + hi_i) / 2;
        Row r{seg->bits == 128 ? seg->hi[mid] : 0, seg->lo[mid], seg->ids[mid]};
        if (r < Row{fp.hi, fp.lo, id})
          lo_i = mid + 1;
        else
          hi_i = mid;
      }
      while (lo_i < seg->size() && seg->lo[lo_i] == fp.lo &&
             (seg->bits == 64 || seg->hi[lo_i] == fp.hi) && seg->ids[lo_i] == id) {
        ++in_segments;
        ++lo_i;
      }
    }
    if (in_segments > 0) {
      auto tomb = current->tombstones ? std::make_shared<std::vector<Row>>(*current->tombstones)
                                      : std::make_shared<std::vector<Row>>();
      Row r{fp.hi, fp.lo, id};
      tomb->insert(std::upper_bound(tomb->begin(), tomb->end(), r), r);
      next->tombstones = std::move(tomb);
      removed += in_segments;
    }
  }
  if (removed == 0) return 0;
  next->size -= removed;
  if (next->tombstones && next->tombstones->size() > 64 &&
      next->tombstones->size() * 8 > next->size) {
    next = impl_->CompactedSnapshot(*next);
  }
  impl_->Publish(std::move(next));
  return removed;
}

void PermutedIndex::Compact() {
  std::lock_guard<std::mutex> lock(impl_->writer_mu);
  auto current = impl_->Load();
  impl_->Publish(impl_->CompactedSnapshot(*current));
}

Result<std::vector<Neighbor>> PermutedIndex::Search(const Fingerprint& query, int k) const {
  NEARDUP_RETURN_IF_ERROR(impl_->Check(query, "PermutedIndex::Search"));
  if (k < 0 || k > impl_->design.max_k)
    return Status::InvalidArgument("PermutedIndex::Search: k=" + std::to_string(k) +
                                   " outside [0, " + std::to_string(impl_->design.max_k) + "]");
  thread_local Scratch scratch;
  auto s = impl_->Load();
  return impl_->SearchOne(*s, query, k, &scratch);
}

Result<std::vector<std::vector<Neighbor>>> PermutedIndex::SearchBatch(
    std::span<const Fingerprint> queries, int k) const {
  if (k < 0 || k > impl_->design.max_k)
    return Status::InvalidArgument("PermutedIndex::SearchBatch: k=" + std::to_string(k) +
                                   " outside [0, " + std::to_string(impl_->design.max_k) + "]");
  for (size_t i = 0; i < queries.size(); ++i) {
    Status st = impl_->Check(queries[i], "PermutedIndex::SearchBatch");
    if (!st.ok()) return st.WithContext("query " + std::to_string(i));
  }
  auto s = impl_->Load();
  std::vector<std::vector<Neighbor>> out(queries.size());
  ParallelFor(
      queries.size(), impl_->threads(),
      [&](size_t begin, size_t end) {
        Scratch scratch;
        for (size_t i = begin; i < end; ++i) out[i] = impl_->SearchOne(*s, queries[i], k, &scratch);
      },
      256);
  return out;
}

Result<std::vector<NeighborPair>> PermutedIndex::SelfJoin(int k) const {
  if (k < 0 || k > impl_->design.max_k)
    return Status::InvalidArgument("PermutedIndex::SelfJoin: k=" + std::to_string(k) +
                                   " outside [0, " + std::to_string(impl_->design.max_k) + "]");
  auto s = impl_->Load();
  // Gather the live items into flat arrays.
  JoinItems items;
  items.bits = impl_->options.bits;
  items.ids.reserve(s->size);
  items.lo.reserve(s->size);
  if (items.bits == 128) items.hi.reserve(s->size);
  auto push = [&](uint64_t hi, uint64_t lo, uint64_t id) {
    items.ids.push_back(id);
    items.lo.push_back(lo);
    if (items.bits == 128) items.hi.push_back(hi);
  };
  for (const auto& seg : s->segments) {
    for (size_t i = 0; i < seg->size(); ++i) {
      uint64_t hi = seg->bits == 128 ? seg->hi[i] : 0;
      if (!s->IsDead(hi, seg->lo[i], seg->ids[i])) push(hi, seg->lo[i], seg->ids[i]);
    }
  }
  for (size_t i = 0; i < s->delta_size; ++i)
    push(s->delta->hi[i], s->delta->lo[i], s->delta->ids[i]);
  const size_t n = items.size();
  if (n > std::numeric_limits<uint32_t>::max())
    return Status::ResourceExhausted("PermutedIndex::SelfJoin: more than 2^32 items");
  std::vector<NeighborPair> pairs;
  if (n >= 2) {
    IndexDesign join_design = PlanJoinDesign(items.bits, k, static_cast<double>(n));
    if (join_design.tables.empty()) return Status::Internal("PermutedIndex::SelfJoin: no design");
    std::vector<CompiledTable> tables;
    for (const IndexTableSpec& spec : join_design.tables)
      tables.push_back(Compile(spec, items.bits));
    std::vector<std::vector<RowPair>> parts(tables.size());
    ParallelFor(tables.size(), n >= 4096 ? impl_->threads() : 1, [&](size_t begin, size_t end) {
      for (size_t t = begin; t < end; ++t) JoinTable(items, tables, t, k, &parts[t]);
    });
    size_t count = 0;
    for (const auto& p : parts) count += p.size();
    pairs.reserve(count);
    for (const auto& part : parts) {
      for (const RowPair& p : part) {
        uint64_t a = items.ids[p.a], b = items.ids[p.b];
        if (a == b) continue;
        pairs.push_back({std::min(a, b), std::max(a, b), p.distance});
      }
    }
  }
  std::sort(pairs.begin(), pairs.end());
  return pairs;
}

IndexSearchStats PermutedIndex::stats() const {
  IndexSearchStats st;
  st.queries = impl_->queries.load();
  st.probes = impl_->probes.load();
  st.candidates = impl_->candidates.load();
  st.results = impl_->results.load();
  return st;
}

PermutedIndexStats PermutedIndex::detailed_stats() const {
  PermutedIndexStats st;
  st.search = stats();
  st.oversized_runs = impl_->oversized.load();
  auto s = impl_->Load();
  st.segments = s->segments.size();
  st.delta_size = s->delta_size;
  st.tombstones = s->tombstones ? s->tombstones->size() : 0;
  for (const auto& seg : s->segments) st.memory_bytes += seg->MemoryBytes();
  return st;
}

void PermutedIndex::ResetStats() {
  impl_->queries = 0;
  impl_->probes = 0;
  impl_->candidates = 0;
  impl_->results = 0;
  impl_->oversized = 0;
}

}  // namespace neardup
