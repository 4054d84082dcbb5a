// TableSegment: building, viewing and searching the one segment image of permuted sorted tables;
// see table_segment.h and docs/index.md.
#include "index/table_segment.h"

#include <sys/mman.h>
#include <xxhash.h>

#include <bit>
#include <cstring>
#include <limits>

#include "common/byte_io.h"
#include "common/parallel.h"

namespace neardup::index {
namespace {

constexpr char kImageMagic[8] = {'N', 'D', 'I', 'X', 'S', 'E', 'G', '\0'};
constexpr uint32_t kImageVersion = 1;
constexpr size_t kFixedHeader = 32;       // magic, version, bits, n, num_tables, design_bytes
constexpr size_t kParallelMin = 1 << 17;  // smaller builds stay on the calling thread
constexpr uint32_t kMaxTables = 4096;
constexpr uint32_t kMaxDesignBytes = 1 << 20;
constexpr int kMaxDirBits = 26;
// Directory buckets up to this size are scanned whole instead of binary-searched for the key.
constexpr size_t kSmallBucket = 32;

size_t Align8(size_t n) { return (n + 7) & ~size_t{7}; }

// Zeroed memory for a built image. Images of a few MB and more are mapped on 2 MB boundaries and
// marked for transparent huge pages: a query touches ~2 random lines per table, and on 4 KB pages
// each of them is also a TLB miss whose page walk misses the cache (a 10M-row image is ~1 GB).
std::shared_ptr<void> AllocateImage(size_t size) {
  constexpr size_t kHuge = size_t{2} << 20;
  if (size >= 2 * kHuge) {
    const size_t length = (size + kHuge - 1) & ~(kHuge - 1);
    void* raw =
        ::mmap(nullptr, length + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw != MAP_FAILED) {
      // Trim to a 2 MB-aligned range of `length` bytes.
      const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
      const uintptr_t aligned = (start + kHuge - 1) & ~uintptr_t{kHuge - 1};
      if (aligned > start) ::munmap(raw, aligned - start);
      const size_t tail = (start + length + kHuge) - (aligned + length);
      if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + length), tail);
      void* image = reinterpret_cast<void*>(aligned);
      ::madvise(image, length, MADV_HUGEPAGE);  // advisory: ignored where THP is off
      return std::shared_ptr<void>(image, [length](void* p) { ::munmap(p, length); });
    }
  }
  return std::shared_ptr<void>(new uint64_t[(size + 7) / 8](),
                               [](void* p) { delete[] static_cast<uint64_t*>(p); });
}

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

void BuildDirectory(const uint64_t* keys, size_t n, int dir_bits, uint32_t* dir) {
  // dir[b] = first index whose top dir_bits bits are >= b.
  size_t i = 0;
  for (size_t b = 0; b < (size_t{1} << dir_bits); ++b) {
    uint64_t low = dir_bits == 0 ? 0 : static_cast<uint64_t>(b) << (64 - dir_bits);
    while (i < n && keys[i] < low) ++i;
    dir[b] = static_cast<uint32_t>(i);
  }
  dir[size_t{1} << dir_bits] = static_cast<uint32_t>(n);
}

}  // namespace

Result<std::shared_ptr<const CompiledDesign>> CompileDesign(const IndexDesign& design) {
  const int bits = design.bits;
  if (bits != 64 && bits != 128)
    return Status::InvalidArgument("index design: bits must be 64 or 128, got " +
                                   std::to_string(bits));
  if (design.indexed_k < 0 || design.indexed_k > bits ||
      static_cast<int>(design.probe_radius.size()) != design.indexed_k + 1)
    return Status::InvalidArgument("index design: indexed_k and probe radii do not match");
  if (design.tables.empty() || design.tables.size() > kMaxTables)
    return Status::InvalidArgument("index design: needs 1.." + std::to_string(kMaxTables) +
                                   " tables");
  auto compiled = std::make_shared<CompiledDesign>();
  compiled->design = design;
  for (const IndexTableSpec& spec : design.tables) {
    int width = 0;
    for (const BitRange& r : spec.key_ranges) {
      if (r.start < 0 || r.width <= 0 || r.start + r.width > bits)
        return Status::InvalidArgument("index design: key range outside the fingerprint");
      width += r.width;
    }
    if (spec.key_bits < 1 || spec.key_bits > 64 || width != spec.key_bits)
      return Status::InvalidArgument("index design: table key width must be in [1, 64]");
    compiled->tables.push_back(Compile(spec, bits));
  }
  for (int r : design.probe_radius)
    if (r < 0 || r > 64) return Status::InvalidArgument("index design: bad probe radius");
  return std::shared_ptr<const CompiledDesign>(std::move(compiled));
}

std::string EncodeDesign(const IndexDesign& design) {
  std::string out;
  PutU32(&out, static_cast<uint32_t>(design.bits));
  PutU32(&out, static_cast<uint32_t>(design.indexed_k));
  for (int r : design.probe_radius) PutU32(&out, static_cast<uint32_t>(r));
  PutU32(&out, static_cast<uint32_t>(design.tables.size()));
  for (const IndexTableSpec& t : design.tables) {
    PutU32(&out, static_cast<uint32_t>(t.key_bits));
    PutU32(&out, static_cast<uint32_t>(t.key_ranges.size()));
    for (const BitRange& r : t.key_ranges) {
      PutU32(&out, static_cast<uint32_t>(r.start));
      PutU32(&out, static_cast<uint32_t>(r.width));
    }
  }
  PutU32(&out, static_cast<uint32_t>(design.description.size()));
  out += design.description;
  return out;
}

Result<IndexDesign> DecodeDesign(std::string_view bytes) {
  ByteReader reader(bytes);
  IndexDesign d;
  uint32_t bits, indexed_k, tables;
  if (!reader.U32(&bits) || !reader.U32(&indexed_k) || (bits != 64 && bits != 128) ||
      indexed_k > bits)
    return Status::Corruption("index design: bad width or indexed_k");
  d.bits = static_cast<int>(bits);
  d.indexed_k = static_cast<int>(indexed_k);
  for (uint32_t k = 0; k <= indexed_k; ++k) {
    uint32_t r;
    if (!reader.U32(&r) || r > 64) return Status::Corruption("index design: bad probe radius");
    d.probe_radius.push_back(static_cast<int>(r));
  }
  if (!reader.U32(&tables) || tables == 0 || tables > kMaxTables)
    return Status::Corruption("index design: bad table count");
  for (uint32_t t = 0; t < tables; ++t) {
    IndexTableSpec spec;
    uint32_t key_bits, ranges;
    if (!reader.U32(&key_bits) || !reader.U32(&ranges) || key_bits < 1 || key_bits > 64 ||
        ranges > 128)
      return Status::Corruption("index design: bad table " + std::to_string(t));
    spec.key_bits = static_cast<int>(key_bits);
    for (uint32_t i = 0; i < ranges; ++i) {
      uint32_t start, width;
      if (!reader.U32(&start) || !reader.U32(&width) || start >= bits || width > bits - start)
        return Status::Corruption("index design: bad key range in table " + std::to_string(t));
      spec.key_ranges.push_back({static_cast<int>(start), static_cast<int>(width)});
    }
    d.tables.push_back(std::move(spec));
  }
  uint32_t length;
  std::string_view description;
  if (!reader.U32(&length) || !reader.Bytes(length, &description) || !reader.done())
    return Status::Corruption("index design: bad description");
  d.description.assign(description);
  return d;
}

bool SameTables(const IndexDesign& a, const IndexDesign& b) {
  if (a.bits != b.bits || a.indexed_k != b.indexed_k || a.probe_radius != b.probe_radius ||
      a.tables.size() != b.tables.size())
    return false;
  for (size_t t = 0; t < a.tables.size(); ++t) {
    if (a.tables[t].key_bits != b.tables[t].key_bits ||
        a.tables[t].key_ranges != b.tables[t].key_ranges)
      return false;
  }
  return true;
}

TableSegment::~TableSegment() = default;

size_t TableSegment::Layout(size_t header_bytes, const std::vector<int>& dir_bits) {
  const auto& tables = design_->tables;
  size_t pos = header_bytes;
  ids_off_ = pos;
  pos += n_ * 8;
  lo_off_ = pos;
  pos += n_ * 8;
  hi_off_ = pos;
  if (bits_ == 128) pos += n_ * 8;
  keys_off_.assign(tables.size(), 0);
  rows_off_.assign(tables.size(), 0);
  dir_off_.assign(tables.size(), 0);
  for (size_t t = 0; t < tables.size(); ++t) {
    if (!tables[t].identity) {
      keys_off_[t] = pos;
      pos += n_ * 8;
      if (bits_ == 128) {
        rows_off_[t] = pos;
        pos += Align8(n_ * 4);
      }
    }
    dir_off_[t] = pos;
    pos += Align8(((size_t{1} << dir_bits[t]) + 1) * 4);
  }
  dir_bits_ = dir_bits;
  return pos;
}

void TableSegment::Bind() {
  const auto& tables = design_->tables;
  ids_ = reinterpret_cast<const uint64_t*>(image_ + ids_off_);
  lo_ = reinterpret_cast<const uint64_t*>(image_ + lo_off_);
  hi_ = bits_ == 128 ? reinterpret_cast<const uint64_t*>(image_ + hi_off_) : nullptr;
  tables_.assign(tables.size(), Table{});
  for (size_t t = 0; t < tables.size(); ++t) {
    Table& table = tables_[t];
    table.dir_bits = dir_bits_[t];
    if (tables[t].identity) {
      table.keys = bits_ == 64 ? lo_ : hi_;
    } else {
      table.keys = reinterpret_cast<const uint64_t*>(image_ + keys_off_[t]);
      if (bits_ == 128) table.rows = reinterpret_cast<const uint32_t*>(image_ + rows_off_[t]);
    }
    table.dir = reinterpret_cast<const uint32_t*>(image_ + dir_off_[t]);
  }
}

namespace {

size_t HeaderBytes(size_t design_bytes, size_t tables) {
  return kFixedHeader + Align8(design_bytes) + 8 * tables + 8;
}

}  // namespace

std::shared_ptr<const TableSegment> TableSegment::Build(
    std::vector<SegmentRow> rows, int bits, std::shared_ptr<const CompiledDesign> design,
    int threads) {
  std::shared_ptr<TableSegment> seg(new TableSegment());
  seg->design_ = std::move(design);
  seg->bits_ = bits;
  const size_t n = rows.size();
  seg->n_ = n;
  if (n < kParallelMin) threads = 1;
  RadixSort(&rows, [](const SegmentRow& r) { return r.lo; });
  if (bits == 128) RadixSort(&rows, [](const SegmentRow& r) { return r.hi; });
  // Equal fingerprints: order by id so the layout is deterministic.
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && rows[j].hi == rows[i].hi && rows[j].lo == rows[i].lo) ++j;
    if (j - i > 1) std::sort(rows.begin() + i, rows.begin() + j);
    i = j;
  }
  const auto& tables = seg->design_->tables;
  std::vector<int> dir_bits(tables.size());
  for (size_t t = 0; t < tables.size(); ++t)
    dir_bits[t] = DirectoryBitsFor(static_cast<double>(n), tables[t].key_bits);
  const std::string design_bytes = EncodeDesign(seg->design_->design);
  const size_t header_bytes = HeaderBytes(design_bytes.size(), tables.size());
  const size_t size = seg->Layout(header_bytes, dir_bits);
  seg->owned_ = AllocateImage(size);
  char* image = static_cast<char*>(seg->owned_.get());
  seg->image_ = image;
  seg->image_size_ = size;
  seg->Bind();
  // Header.
  std::string header(kImageMagic, 8);
  PutU32(&header, kImageVersion);
  PutU32(&header, static_cast<uint32_t>(bits));
  const uint64_t n64 = n;
  header.append(reinterpret_cast<const char*>(&n64), 8);
  PutU32(&header, static_cast<uint32_t>(tables.size()));
  PutU32(&header, static_cast<uint32_t>(design_bytes.size()));
  header += design_bytes;
  header.resize(kFixedHeader + Align8(design_bytes.size()), '\0');
  for (size_t t = 0; t < tables.size(); ++t) {
    PutU32(&header, static_cast<uint32_t>(dir_bits[t]));
    PutU32(&header, tables[t].identity ? 1 : 0);
  }
  const uint64_t checksum = XXH3_64bits(header.data(), header.size());
  header.append(reinterpret_cast<const char*>(&checksum), 8);
  std::memcpy(image, header.data(), header.size());
  // Rows.
  uint64_t* ids = reinterpret_cast<uint64_t*>(image + seg->ids_off_);
  uint64_t* lo = reinterpret_cast<uint64_t*>(image + seg->lo_off_);
  uint64_t* hi = reinterpret_cast<uint64_t*>(image + seg->hi_off_);
  for (size_t i = 0; i < n; ++i) {
    ids[i] = rows[i].id;
    lo[i] = rows[i].lo;
    if (bits == 128) hi[i] = rows[i].hi;
  }
  rows = {};
  // Tables.
  TableSegment* s = seg.get();
  ParallelFor(tables.size(), threads, [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      const CompiledTable& ct = tables[t];
      if (!ct.identity) {
        uint64_t* keys = reinterpret_cast<uint64_t*>(image + s->keys_off_[t]);
        if (bits == 64) {
          // Sorted in place inside the image (one buffer of n keys per thread, no copy).
          for (size_t i = 0; i < n; ++i) keys[i] = ct.Project(0, lo[i]);
          RadixSort(keys, n, [](uint64_t v) { return v; });
        } else {
          std::vector<std::pair<uint64_t, uint32_t>> pairs(n);
          for (size_t i = 0; i < n; ++i)
            pairs[i] = {ct.Project(hi[i], lo[i]), static_cast<uint32_t>(i)};
          RadixSort(&pairs, [](const std::pair<uint64_t, uint32_t>& p) { return p.first; });
          uint32_t* row_numbers = reinterpret_cast<uint32_t*>(image + s->rows_off_[t]);
          for (size_t i = 0; i < n; ++i) {
            keys[i] = pairs[i].first;
            row_numbers[i] = pairs[i].second;
          }
        }
      }
      BuildDirectory(s->tables_[t].keys, n, dir_bits[t],
                     reinterpret_cast<uint32_t*>(image + s->dir_off_[t]));
    }
  });
  return seg;
}

Result<std::shared_ptr<const TableSegment>> TableSegment::View(
    std::string_view bytes, std::shared_ptr<const CompiledDesign> design,
    std::shared_ptr<const void> keeper, const std::string& what) {
  auto corrupt = [&](const std::string& why) {
    return Status::Corruption(what + ": index section: " + why);
  };
  if (bytes.size() < kFixedHeader) return corrupt("truncated");
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 8 != 0) return corrupt("misaligned");
  const char* base = bytes.data();
  if (std::memcmp(base, kImageMagic, 8) != 0) return corrupt("bad magic");
  if (LoadU32(base + 8) != kImageVersion)
    return Status::Unsupported(what + ": index section version " +
                               std::to_string(LoadU32(base + 8)) + " is not supported");
  const uint32_t bits = LoadU32(base + 12);
  const uint64_t n = LoadU64(base + 16);
  const uint32_t num_tables = LoadU32(base + 24);
  const uint32_t design_bytes = LoadU32(base + 28);
  if ((bits != 64 && bits != 128) || n > std::numeric_limits<uint32_t>::max() || num_tables == 0 ||
      num_tables > kMaxTables || design_bytes > kMaxDesignBytes)
    return corrupt("header fields out of range");
  const size_t header_bytes = HeaderBytes(design_bytes, num_tables);
  if (header_bytes > bytes.size()) return corrupt("truncated header");
  if (XXH3_64bits(base, header_bytes - 8) != LoadU64(base + header_bytes - 8))
    return corrupt("header checksum mismatch");
  Result<IndexDesign> stored = DecodeDesign(bytes.substr(kFixedHeader, design_bytes));
  if (!stored.ok()) return corrupt(stored.status().message());
  if (!SameTables(*stored, design->design) || stored->tables.size() != num_tables)
    return Status::InvalidArgument(what + ": index section was built with design \"" +
                                   stored->description + "\", expected \"" +
                                   design->design.description + "\"");
  std::shared_ptr<TableSegment> seg(new TableSegment());
  seg->design_ = std::move(design);
  seg->keeper_ = std::move(keeper);
  seg->bits_ = static_cast<int>(bits);
  seg->n_ = static_cast<size_t>(n);
  seg->image_ = base;
  seg->image_size_ = bytes.size();
  std::vector<int> dir_bits(num_tables);
  const char* per_table = base + kFixedHeader + Align8(design_bytes);
  for (uint32_t t = 0; t < num_tables; ++t) {
    const uint32_t d = LoadU32(per_table + 8 * t);
    const uint32_t identity = LoadU32(per_table + 8 * t + 4);
    const CompiledTable& ct = seg->design_->tables[t];
    if (d > static_cast<uint32_t>(std::min(ct.key_bits, kMaxDirBits)) ||
        identity != (ct.identity ? 1u : 0u))
      return corrupt("table " + std::to_string(t) + " header is inconsistent");
    dir_bits[t] = static_cast<int>(d);
  }
  const size_t size = seg->Layout(header_bytes, dir_bits);
  if (size != bytes.size())
    return corrupt("is " + std::to_string(bytes.size()) + " bytes, its header implies " +
                   std::to_string(size));
  seg->Bind();
  return std::shared_ptr<const TableSegment>(std::move(seg));
}

// Searches a large bucket of one table's sorted projections (its bounds already checked against the
// row count by the caller).
class TableSegment::TableSearcher {
 public:
  TableSearcher(const uint64_t* keys, const Table& table, const CompiledTable& ct,
                uint64_t projected_query, int k, SearchCounters* counters)
      : keys_(keys), table_(table), ct_(ct), pq_(projected_query), k_(k), counters_(counters) {}

  // Searches the entries of `key` inside its directory bucket [begin, end).
  template <typename Emit>
  void Lookup(uint64_t key, size_t begin, size_t end, int key_distance, Emit& emit) {
    if (begin == end) return;
    const int w = ct_.key_bits;
    if (w > table_.dir_bits) {
      uint64_t low = w == 64 ? key : key << (64 - w);
      uint64_t high = w == 64 ? key : low | (~uint64_t{0} >> w);
      begin = std::lower_bound(keys_ + begin, keys_ + end, low) - keys_;
      end = std::upper_bound(keys_ + begin, keys_ + end, high) - keys_;
    }
    if (end - begin > kLinearRunLimit) ++counters_->oversized;
    Scan(begin, end, w, key_distance, emit);
  }

 private:
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
  const Table& table_;
  const CompiledTable& ct_;
  uint64_t pq_;
  int k_;
  SearchCounters* counters_;
};

std::pair<size_t, size_t> TableSegment::EqualRows64(uint64_t fp, int identity_table) const {
  size_t begin = 0, end = n_;
  if (identity_table >= 0) {
    const Table& st = tables_[identity_table];
    uint64_t bucket = st.dir_bits == 0 ? 0 : fp >> (64 - st.dir_bits);
    begin = st.dir[bucket];
    end = st.dir[bucket + 1];
    if (begin > end || end > n_) return {0, 0};
  }
  auto range = std::equal_range(lo_ + begin, lo_ + end, fp);
  return {static_cast<size_t>(range.first - lo_), static_cast<size_t>(range.second - lo_)};
}

// Every probe of every table (the query's key, and for radius r every key within r bits of it),
// run in three passes so that their cache misses overlap instead of queueing: (1) prefetch every
// probe's directory entry; (2) read the bucket bounds and prefetch the buckets' lines; (3) scan. A
// bucket of up to kSmallBucket keys is scanned whole with XOR + popcount against the query's
// projection — exact, since the projection permutes all bits — and only once however many probe
// keys share it (keys differing only below the directory bits); rows found more than once are
// deduplicated at the end. Larger buckets are binary-searched for each probe key's run.
void TableSegment::CollectRows(uint64_t hi, uint64_t lo, int k, SearchCounters* counters,
                               SearchScratch* scratch) const {
  scratch->rows.clear();
  scratch->fps.clear();
  MakeProbes(hi, lo, design_->design.probe_radius[k], scratch);
  counters->probes += scratch->probes.size();
  PrefetchDirectories(scratch->probes);
  ReadBucketBounds(&scratch->probes);
  ScanProbes(hi, lo, k, counters, scratch);
  if (bits_ == 64 && !scratch->fps.empty()) AddRowsOfFingerprints(scratch);
  std::sort(scratch->rows.begin(), scratch->rows.end());
  scratch->rows.erase(std::unique(scratch->rows.begin(), scratch->rows.end()), scratch->rows.end());
}

void TableSegment::MakeProbes(uint64_t hi, uint64_t lo, int radius, SearchScratch* scratch) const {
  const auto& tables = design_->tables;
  const size_t T = tables.size();
  auto& probes = scratch->probes;
  probes.clear();
  scratch->projected.resize(T);
  for (size_t t = 0; t < T; ++t) {
    const CompiledTable& ct = tables[t];
    const uint64_t pq = ct.Project(hi, lo);
    scratch->projected[t] = pq;
    const uint64_t key = ct.KeyOf(pq);
    const uint32_t table = static_cast<uint32_t>(t);
    probes.push_back({key, 0, 0, table, 0});
    if (radius == 0) continue;
    // Keys within `radius` bits: extend each probe of i flipped bits by one more, above its last.
    for (size_t first = probes.size() - 1, flips = 0; flips < static_cast<size_t>(radius);
         ++flips) {
      const size_t last = probes.size();
      for (size_t p = first; p < last; ++p) {
        const uint64_t base = probes[p].key;
        const uint64_t diff = base ^ key;
        const int from = diff == 0 ? 0 : 64 - std::countl_zero(diff);
        for (int b = from; b < ct.key_bits; ++b)
          probes.push_back(
              {base ^ (uint64_t{1} << b), 0, 0, table, static_cast<uint32_t>(flips + 1)});
      }
      first = last;
    }
  }
}

void TableSegment::PrefetchDirectories(const std::vector<Probe>& probes) const {
  const auto& tables = design_->tables;
  for (const Probe& p : probes) {
    const CompiledTable& ct = tables[p.table];
    const int d = tables_[p.table].dir_bits;
    const uint64_t bucket = d == 0 ? 0 : p.key >> (ct.key_bits - d);
    __builtin_prefetch(tables_[p.table].dir + bucket);
    __builtin_prefetch(tables_[p.table].dir + bucket + 1);
  }
}

void TableSegment::ReadBucketBounds(std::vector<Probe>* probes) const {
  const auto& tables = design_->tables;
  for (Probe& p : *probes) {
    const CompiledTable& ct = tables[p.table];
    const Table& st = tables_[p.table];
    const uint64_t bucket = st.dir_bits == 0 ? 0 : p.key >> (ct.key_bits - st.dir_bits);
    size_t begin = st.dir[bucket], end = st.dir[bucket + 1];
    if (begin > end || end > n_) begin = end = 0;  // a damaged directory: nothing
    p.begin = static_cast<uint32_t>(begin);
    p.end = static_cast<uint32_t>(end);
    if (begin < end && end - begin <= kLinearRunLimit) {
      // Every line of a bucket that will be scanned (a 64 B/fp design scans ~150 per table).
      for (size_t i = begin; i < end; i += 8) __builtin_prefetch(st.keys + i);
      __builtin_prefetch(st.keys + end - 1);
    } else if (begin < end) {
      __builtin_prefetch(st.keys + begin);
    }
  }
}

void TableSegment::ScanProbes(uint64_t hi, uint64_t lo, int k, SearchCounters* counters,
                              SearchScratch* scratch) const {
  const auto& tables = design_->tables;
  // What a row or key found in table t gives: 64 bits, the row (identity table) or the
  // fingerprint (permuted tables, looked up later); 128 bits, the row when within k.
  auto emitter = [this, &tables, scratch, hi, lo, k](size_t t) {
    const CompiledTable* ct = &tables[t];
    const Table* st = &tables_[t];
    return [this, ct, st, scratch, hi, lo, k](size_t i) {
      if (bits_ == 64) {
        if (ct->identity)
          scratch->rows.push_back(static_cast<uint32_t>(i));
        else
          scratch->fps.push_back(ct->Unproject64(st->keys[i]));
      } else {
        uint32_t row = ct->identity ? static_cast<uint32_t>(i) : st->rows[i];
        if (row >= n_) return;
        if (std::popcount(hi_[row] ^ hi) + std::popcount(lo_[row] ^ lo) <= k)
          scratch->rows.push_back(row);
      }
    };
  };
  const auto& probes = scratch->probes;
  for (size_t i = 0; i < probes.size(); ++i) {
    const Probe& p = probes[i];
    const size_t t = p.table;
    const size_t begin = p.begin, end = p.end;
    if (begin == end) continue;
    const uint64_t pq = scratch->projected[t];
    auto emit = emitter(t);
    if (end - begin <= kSmallBucket) {
      // Keys that differ from the query's only below the directory bits share its bucket: the
      // probe flipping none of those bits scans it (it exists: it flips fewer bits).
      const int below = tables[t].key_bits - tables_[t].dir_bits;
      const uint64_t low_mask = below >= 64 ? ~uint64_t{0} : (uint64_t{1} << below) - 1;
      if (((p.key ^ tables[t].KeyOf(pq)) & low_mask) != 0) continue;
      counters->candidates += end - begin;
      const uint64_t* keys = tables_[t].keys;
      for (size_t j = begin; j < end; ++j)
        if (std::popcount(keys[j] ^ pq) <= k) emit(j);
      continue;
    }
    TableSearcher searcher(tables_[t].keys, tables_[t], tables[t], pq, k, counters);
    searcher.Lookup(p.key, begin, end, static_cast<int>(p.flips), emit);
  }
}

// Fingerprints found through permuted tables: find their rows (all rows holding an equal
// fingerprint have the same distance, so the identity table found all of them or none).
void TableSegment::AddRowsOfFingerprints(SearchScratch* scratch) const {
  const auto& tables = design_->tables;
  int identity_table = -1;
  for (size_t t = 0; t < tables.size(); ++t)
    if (tables[t].identity) identity_table = static_cast<int>(t);
  std::sort(scratch->fps.begin(), scratch->fps.end());
  scratch->fps.erase(std::unique(scratch->fps.begin(), scratch->fps.end()), scratch->fps.end());
  std::sort(scratch->rows.begin(), scratch->rows.end());
  const size_t found_direct = scratch->rows.size();
  for (uint64_t fp : scratch->fps) {
    // Found directly already (its rows are in cache): no second lookup.
    bool direct = false;
    if (found_direct <= 16)
      for (size_t j = 0; j < found_direct && !direct; ++j) direct = lo_[scratch->rows[j]] == fp;
    if (direct) continue;
    auto [first, last] = EqualRows64(fp, identity_table);
    if (first == last) continue;
    if (std::binary_search(scratch->rows.begin(), scratch->rows.begin() + found_direct,
                           static_cast<uint32_t>(first)))
      continue;
    for (size_t row = first; row < last; ++row) scratch->rows.push_back(static_cast<uint32_t>(row));
  }
}

size_t TableSegment::Find(uint64_t hi, uint64_t lo, uint64_t id) const {
  size_t lo_i = 0, hi_i = n_;
  const SegmentRow target{hi, lo, id};
  while (lo_i < hi_i) {
    size_t mid = (lo_i + hi_i) / 2;
    if (SegmentRow{this->hi(mid), lo_[mid], ids_[mid]} < target)
      lo_i = mid + 1;
    else
      hi_i = mid;
  }
  if (lo_i < n_ && SegmentRow{this->hi(lo_i), lo_[lo_i], ids_[lo_i]} == target) return lo_i;
  return n_;
}

}  // namespace neardup::index
