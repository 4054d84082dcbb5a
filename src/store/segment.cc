// Segment file writer, memory-mapped reader and salvage; see segment.h and
// docs/storage_format.md.
#include "store/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>

#include "store/store_format.h"

namespace neardup::store {
namespace {

constexpr char kSegmentMagic[8] = {'N', 'D', 'U', 'P', 'S', 'E', 'G', '\0'};
constexpr char kFooterMagic[8] = {'N', 'D', 'S', 'E', 'G', 'E', 'N', 'D'};
constexpr uint32_t kSegmentVersion = 1;
constexpr size_t kHeaderSize = 128;
constexpr size_t kFooterSize = 16;
constexpr uint64_t kTombstoneBit = uint64_t{1} << 63;

size_t Align8(size_t n) { return (n + 7) & ~size_t{7}; }

// Header field offsets.
enum : size_t {
  kOffVersion = 8,
  kOffBits = 12,
  kOffMaxK = 16,
  kOffTables = 20,
  kOffEntries = 24,
  kOffLive = 32,
  kOffFingerprints = 40,
  kOffRecordOffsets = 48,
  kOffBlob = 56,
  kOffBlobSize = 64,
  kOffIdHashes = 72,
  kOffTablesStart = 88,
  kOffFileSize = 96,
  kOffHeaderChecksum = 120,
};

// Geometry of the permuted table t of T over `bits`: block t covers bits [begin, end); its key is
// the block's top min(16, end - begin) bits.
struct TableGeometry {
  int shift;
  int key_bits;
};
// Small segments use fewer key bits (about one bucket per entry) to keep directories small.
TableGeometry Geometry(int bits, int num_tables, int t, uint64_t live) {
  int begin = t * bits / num_tables;
  int end = (t + 1) * bits / num_tables;
  int wanted = std::clamp(static_cast<int>(std::bit_width(live)), 4, 16);
  int key_bits = std::min(wanted, end - begin);
  return {end - key_bits, key_bits};
}

uint32_t KeyOf(const Fingerprint& fp, const TableGeometry& g) {
  return static_cast<uint32_t>((ToU128(fp) >> g.shift) & ((1u << g.key_bits) - 1));
}

// Byte size of table t's three arrays.
size_t TableBytes(int key_bits, uint64_t live, int words) {
  return Align8(((size_t{1} << key_bits) + 1) * 4) + Align8(live * 4) + live * words * 8;
}

}  // namespace

uint64_t IdHash(std::string_view id) { return Checksum(id); }

Status WriteSegment(const std::string& path, int bits, int max_k,
                    std::vector<SegmentEntry> entries) {
  const int words = bits / 64;
  const int num_tables = max_k + 1;
  if (entries.size() >= (uint64_t{1} << 32) - 1) {
    return Status::ResourceExhausted(path + ": too many entries for one segment");
  }
  std::vector<std::pair<uint64_t, uint32_t>> order(entries.size());
  for (size_t i = 0; i < entries.size(); ++i)
    order[i] = {IdHash(entries[i].id), static_cast<uint32_t>(i)};
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return entries[a.second].id < entries[b.second].id;
  });
  const uint64_t n = entries.size();
  uint64_t live = 0;
  size_t blob_size = 0;
  for (const SegmentEntry& e : entries) {
    live += e.tombstone ? 0 : 1;
    blob_size += 8 + e.id.size() + e.metadata.size();
  }
  const size_t fps_offset = kHeaderSize;
  const size_t offsets_offset = fps_offset + n * words * 8;
  const size_t blob_offset = offsets_offset + n * 8;
  const size_t hashes_offset = Align8(blob_offset + blob_size);
  const size_t tables_offset = hashes_offset + n * 8;
  size_t file_size = tables_offset;
  for (int t = 0; t < num_tables; ++t) {
    file_size += TableBytes(Geometry(bits, num_tables, t, live).key_bits, live, words);
  }
  file_size += kFooterSize;

  std::string file(file_size, '\0');
  char* base = file.data();
  std::memcpy(base, kSegmentMagic, 8);
  auto put32 = [&](size_t off, uint32_t v) { std::memcpy(base + off, &v, 4); };
  auto put64 = [&](size_t off, uint64_t v) { std::memcpy(base + off, &v, 8); };
  put32(kOffVersion, kSegmentVersion);
  put32(kOffBits, bits);
  put32(kOffMaxK, max_k);
  put32(kOffTables, num_tables);
  put64(kOffEntries, n);
  put64(kOffLive, live);
  put64(kOffFingerprints, fps_offset);
  put64(kOffRecordOffsets, offsets_offset);
  put64(kOffBlob, blob_offset);
  put64(kOffBlobSize, blob_size);
  put64(kOffIdHashes, hashes_offset);
  put64(kOffTablesStart, tables_offset);
  put64(kOffFileSize, file_size);
  put64(kOffHeaderChecksum, Checksum(base, kOffHeaderChecksum));

  std::vector<uint32_t> live_entries;
  live_entries.reserve(live);
  size_t blob_pos = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const SegmentEntry& e = entries[order[i].second];
    put64(fps_offset + i * words * 8, e.fingerprint.lo);
    if (words == 2) put64(fps_offset + i * 16 + 8, e.fingerprint.hi);
    put64(offsets_offset + i * 8, blob_pos | (e.tombstone ? kTombstoneBit : 0));
    put32(blob_offset + blob_pos, static_cast<uint32_t>(e.id.size()));
    put32(blob_offset + blob_pos + 4, static_cast<uint32_t>(e.metadata.size()));
    std::memcpy(base + blob_offset + blob_pos + 8, e.id.data(), e.id.size());
    if (!e.metadata.empty()) {
      std::memcpy(base + blob_offset + blob_pos + 8 + e.id.size(), e.metadata.data(),
                  e.metadata.size());
    }
    blob_pos += 8 + e.id.size() + e.metadata.size();
    put64(hashes_offset + i * 8, order[i].first);
    if (!e.tombstone) live_entries.push_back(static_cast<uint32_t>(i));
  }

  // Permuted tables: a counting sort of the live entries by each block key.
  size_t table_pos = tables_offset;
  std::vector<uint32_t> keys(live);
  for (int t = 0; t < num_tables; ++t) {
    const TableGeometry g = Geometry(bits, num_tables, t, live);
    const size_t buckets = size_t{1} << g.key_bits;
    std::vector<uint32_t> directory(buckets + 1, 0);
    for (uint64_t j = 0; j < live; ++j) {
      const SegmentEntry& e = entries[order[live_entries[j]].second];
      keys[j] = KeyOf(e.fingerprint, g);
      ++directory[keys[j] + 1];
    }
    for (size_t b = 0; b < buckets; ++b) directory[b + 1] += directory[b];
    std::memcpy(base + table_pos, directory.data(), directory.size() * 4);
    const size_t entries_pos = table_pos + Align8(directory.size() * 4);
    const size_t fps_pos = entries_pos + Align8(live * 4);
    std::vector<uint32_t> next(directory.begin(), directory.end() - 1);
    for (uint64_t j = 0; j < live; ++j) {
      const uint32_t slot = next[keys[j]]++;
      const uint32_t entry = live_entries[j];
      put32(entries_pos + size_t{slot} * 4, entry);
      const SegmentEntry& e = entries[order[entry].second];
      put64(fps_pos + size_t{slot} * words * 8, e.fingerprint.lo);
      if (words == 2) put64(fps_pos + size_t{slot} * 16 + 8, e.fingerprint.hi);
    }
    table_pos += TableBytes(g.key_bits, live, words);
  }
  put64(file_size - kFooterSize, Checksum(base, file_size - kFooterSize));
  std::memcpy(base + file_size - 8, kFooterMagic, 8);

  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("create segment", path, errno);
  Status status = WriteAll(fd, file, path);
  if (status.ok() && ::fdatasync(fd) != 0) status = ErrnoStatus("fdatasync", path, errno);
  ::close(fd);
  return status;
}

namespace {

// Validates the header of a mapped file; fills the layout fields of `seg`-like out params.
Status CheckHeader(const std::string& path, const char* base, uint64_t size, int bits) {
  if (size < kHeaderSize + kFooterSize) {
    return Status::Corruption(path + ": segment file is truncated (" + std::to_string(size) +
                              " bytes)");
  }
  if (std::memcmp(base, kSegmentMagic, 8) != 0) {
    return Status::Corruption(path + ": not a neardup segment (bad magic)");
  }
  if (LoadU64(base + kOffHeaderChecksum) != Checksum(base, kOffHeaderChecksum)) {
    return Status::Corruption(path + ": segment header checksum mismatch");
  }
  if (LoadU32(base + kOffVersion) != kSegmentVersion) {
    return Status::Unsupported(path + ": segment format version " +
                               std::to_string(LoadU32(base + kOffVersion)) + " is not supported");
  }
  if (static_cast<int>(LoadU32(base + kOffBits)) != bits) {
    return Status::Corruption(path + ": segment holds " + std::to_string(LoadU32(base + kOffBits)) +
                              "-bit fingerprints, store is " + std::to_string(bits) + "-bit");
  }
  if (LoadU64(base + kOffFileSize) != size) {
    return Status::Corruption(path + ": segment is " + std::to_string(size) +
                              " bytes, header says " +
                              std::to_string(LoadU64(base + kOffFileSize)) + " (truncated?)");
  }
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<Segment>> Segment::Open(const std::string& path, int bits,
                                               bool verify_checksum) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(path + ": segment file is missing");
    return ErrnoStatus("open segment", path, errno);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("stat", path, err);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderSize + kFooterSize) {
    ::close(fd);
    return Status::Corruption(path + ": segment file is truncated (" + std::to_string(size) +
                              " bytes)");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (map == MAP_FAILED) return ErrnoStatus("mmap", path, err);
  std::shared_ptr<Segment> seg(new Segment());
  seg->path_ = path;
  seg->base_ = static_cast<const char*>(map);
  seg->file_size_ = size;
  const char* base = seg->base_;
  NEARDUP_RETURN_IF_ERROR(CheckHeader(path, base, size, bits));
  if (verify_checksum) {
    if (std::memcmp(base + size - 8, kFooterMagic, 8) != 0 ||
        LoadU64(base + size - kFooterSize) != Checksum(base, size - kFooterSize)) {
      return Status::Corruption(path + ": segment checksum mismatch (file damaged)");
    }
  }
  seg->bits_ = bits;
  seg->words_ = bits / 64;
  seg->max_k_ = static_cast<int>(LoadU32(base + kOffMaxK));
  seg->num_tables_ = static_cast<int>(LoadU32(base + kOffTables));
  const uint64_t n = LoadU64(base + kOffEntries);
  const uint64_t live = LoadU64(base + kOffLive);
  const uint64_t fps = LoadU64(base + kOffFingerprints);
  const uint64_t offsets = LoadU64(base + kOffRecordOffsets);
  const uint64_t blob = LoadU64(base + kOffBlob);
  const uint64_t blob_size = LoadU64(base + kOffBlobSize);
  const uint64_t hashes = LoadU64(base + kOffIdHashes);
  const uint64_t tables = LoadU64(base + kOffTablesStart);
  const uint64_t words = static_cast<uint64_t>(seg->words_);
  // Every section must follow the writer's layout exactly.
  bool layout_ok = n < (uint64_t{1} << 32) && live <= n && seg->max_k_ >= 0 && seg->max_k_ < 64 &&
                   seg->num_tables_ == seg->max_k_ + 1 && fps == kHeaderSize &&
                   offsets == fps + n * words * 8 && blob == offsets + n * 8 && blob_size <= size &&
                   hashes == Align8(blob + blob_size) && tables == hashes + n * 8;
  uint64_t end = tables;
  if (layout_ok) {
    for (int t = 0; t < seg->num_tables_; ++t) {
      end += TableBytes(Geometry(bits, seg->num_tables_, t, live).key_bits, live, seg->words_);
    }
    layout_ok = end + kFooterSize == size;
  }
  if (!layout_ok) return Status::Corruption(path + ": segment section table is inconsistent");
  seg->num_entries_ = static_cast<uint32_t>(n);
  seg->num_live_ = static_cast<uint32_t>(live);
  seg->fingerprints_ = reinterpret_cast<const uint64_t*>(base + fps);
  seg->record_offsets_ = reinterpret_cast<const uint64_t*>(base + offsets);
  seg->blob_ = base + blob;
  seg->blob_size_ = blob_size;
  seg->id_hashes_ = reinterpret_cast<const uint64_t*>(base + hashes);
  size_t pos = tables;
  for (int t = 0; t < seg->num_tables_; ++t) {
    const TableGeometry g = Geometry(bits, seg->num_tables_, t, live);
    Table table;
    table.shift = g.shift;
    table.mask = (1u << g.key_bits) - 1;
    table.directory = reinterpret_cast<const uint32_t*>(base + pos);
    table.entries =
        reinterpret_cast<const uint32_t*>(base + pos + Align8(((size_t{1} << g.key_bits) + 1) * 4));
    table.fingerprints = reinterpret_cast<const uint64_t*>(
        reinterpret_cast<const char*>(table.entries) + Align8(live * 4));
    if (table.directory[table.mask + 1] != live) {
      return Status::Corruption(path + ": segment table " + std::to_string(t) +
                                " directory is inconsistent");
    }
    seg->tables_.push_back(table);
    pos += TableBytes(g.key_bits, live, seg->words_);
  }
  ::madvise(map, size, MADV_RANDOM);
  return seg;
}

Segment::~Segment() {
  if (base_ != nullptr) ::munmap(const_cast<char*>(base_), file_size_);
}

Fingerprint Segment::fingerprint(uint32_t entry) const {
  if (words_ == 1) return Fingerprint::From64(fingerprints_[entry]);
  return Fingerprint::From128(fingerprints_[entry * 2 + 1], fingerprints_[entry * 2]);
}

bool Segment::tombstone(uint32_t entry) const {
  return (record_offsets_[entry] & kTombstoneBit) != 0;
}

bool Segment::RecordBounds(uint32_t entry, size_t* begin, uint32_t* id_len,
                           uint32_t* meta_len) const {
  const uint64_t offset = record_offsets_[entry] & ~kTombstoneBit;
  if (offset > blob_size_ || blob_size_ - offset < 8) return false;
  *id_len = LoadU32(blob_ + offset);
  *meta_len = LoadU32(blob_ + offset + 4);
  if (uint64_t{*id_len} + *meta_len > blob_size_ - offset - 8) return false;
  *begin = offset + 8;
  return true;
}

std::string_view Segment::id(uint32_t entry) const {
  size_t begin;
  uint32_t id_len, meta_len;
  if (!RecordBounds(entry, &begin, &id_len, &meta_len)) return {};
  return std::string_view(blob_ + begin, id_len);
}

std::string_view Segment::metadata(uint32_t entry) const {
  size_t begin;
  uint32_t id_len, meta_len;
  if (!RecordBounds(entry, &begin, &id_len, &meta_len)) return {};
  return std::string_view(blob_ + begin + id_len, meta_len);
}

int64_t Segment::Find(std::string_view id) const {
  const uint64_t hash = IdHash(id);
  const uint64_t* first = std::lower_bound(id_hashes_, id_hashes_ + num_entries_, hash);
  for (const uint64_t* p = first; p != id_hashes_ + num_entries_ && *p == hash; ++p) {
    const auto entry = static_cast<uint32_t>(p - id_hashes_);
    if (this->id(entry) == id) return entry;
  }
  return -1;
}

void Segment::Search(const Fingerprint& query, int k, std::vector<SegmentHit>* hits) const {
  const size_t first_hit = hits->size();
  if (k > max_k_) {
    for (uint32_t i = 0; i < num_entries_; ++i) {
      int d = words_ == 1 ? HammingDistance(fingerprints_[i], query.lo)
                          : HammingDistance(fingerprints_[i * 2], query.lo) +
                                HammingDistance(fingerprints_[i * 2 + 1], query.hi);
      if (d <= k && !tombstone(i)) hits->push_back({i, d});
    }
    return;
  }
  const unsigned __int128 q = ToU128(query);
  for (const Table& table : tables_) {
    const auto key = static_cast<uint32_t>((q >> table.shift) & table.mask);
    const uint32_t begin = table.directory[key];
    const uint32_t end = table.directory[key + 1];
    if (words_ == 1) {
      const uint64_t lo = query.lo;
      for (uint32_t j = begin; j < end; ++j) {
        int d = HammingDistance(table.fingerprints[j], lo);
        if (d <= k) hits->push_back({table.entries[j], d});
      }
    } else {
      for (uint32_t j = begin; j < end; ++j) {
        int d = HammingDistance(table.fingerprints[j * 2], query.lo) +
                HammingDistance(table.fingerprints[j * 2 + 1], query.hi);
        if (d <= k) hits->push_back({table.entries[j], d});
      }
    }
  }
  // An entry matching in several blocks is found once per block.
  if (tables_.size() > 1 && hits->size() - first_hit > 1) {
    std::sort(hits->begin() + first_hit, hits->end(),
              [](const SegmentHit& a, const SegmentHit& b) { return a.entry < b.entry; });
    hits->erase(
        std::unique(hits->begin() + first_hit, hits->end(),
                    [](const SegmentHit& a, const SegmentHit& b) { return a.entry == b.entry; }),
        hits->end());
  }
}

Result<uint64_t> SalvageSegment(const std::string& path, int bits,
                                const std::function<void(const SegmentEntry&)>& on_entry) {
  Result<std::string> contents = ReadFile(path);
  if (!contents.ok()) return contents.status();
  const std::string& file = *contents;
  const char* base = file.data();
  // Accept a wrong total size (truncation): read what is there.
  if (file.size() < kHeaderSize || std::memcmp(base, kSegmentMagic, 8) != 0 ||
      LoadU64(base + kOffHeaderChecksum) != Checksum(base, kOffHeaderChecksum) ||
      static_cast<int>(LoadU32(base + kOffBits)) != bits) {
    return Status::Corruption(path + ": segment header is unreadable; nothing salvaged");
  }
  const uint64_t words = static_cast<uint64_t>(bits / 64);
  const uint64_t n = LoadU64(base + kOffEntries);
  const uint64_t fps = LoadU64(base + kOffFingerprints);
  const uint64_t offsets = LoadU64(base + kOffRecordOffsets);
  const uint64_t blob = LoadU64(base + kOffBlob);
  const uint64_t blob_size = LoadU64(base + kOffBlobSize);
  uint64_t lost = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t fp_pos = fps + i * words * 8;
    const uint64_t off_pos = offsets + i * 8;
    if (fp_pos + words * 8 > file.size() || off_pos + 8 > file.size()) {
      ++lost;
      continue;
    }
    const uint64_t raw = LoadU64(base + off_pos);
    const uint64_t offset = raw & ~kTombstoneBit;
    if (offset + 8 > blob_size || blob + offset + 8 > file.size()) {
      ++lost;
      continue;
    }
    const uint32_t id_len = LoadU32(base + blob + offset);
    const uint32_t meta_len = LoadU32(base + blob + offset + 4);
    const uint64_t record_end = blob + offset + 8 + id_len + meta_len;
    if (id_len == 0 || offset + 8 + id_len + meta_len > blob_size || record_end > file.size()) {
      ++lost;
      continue;
    }
    SegmentEntry entry;
    entry.id = std::string_view(base + blob + offset + 8, id_len);
    entry.metadata = std::string_view(base + blob + offset + 8 + id_len, meta_len);
    entry.tombstone = (raw & kTombstoneBit) != 0;
    entry.fingerprint =
        words == 1 ? Fingerprint::From64(LoadU64(base + fp_pos))
                   : Fingerprint::From128(LoadU64(base + fp_pos + 8), LoadU64(base + fp_pos));
    on_entry(entry);
  }
  return lost;
}

}  // namespace neardup::store
