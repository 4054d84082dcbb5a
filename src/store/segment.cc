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

#include <xxhash.h>

#include "store/store_format.h"

namespace neardup::store {
namespace {

constexpr char kSegmentMagic[8] = {'N', 'D', 'U', 'P', 'S', 'E', 'G', '\0'};
constexpr char kFooterMagic[8] = {'N', 'D', 'S', 'E', 'G', 'E', 'N', 'D'};
constexpr uint32_t kSegmentVersion = 2;  // 2: one index section (src/index/table_segment.h)
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
  kOffIndex = 80,
  kOffIndexSize = 88,
  kOffFileSize = 96,
  kOffHeaderChecksum = 120,
};

}  // namespace

uint64_t IdHash(std::string_view id) { return Checksum(id); }

Status WriteSegment(Env* env, const std::string& path,
                    const std::shared_ptr<const index::CompiledDesign>& design,
                    std::vector<SegmentEntry> entries) {
  const int bits = design->design.bits;
  const int words = bits / 64;
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
  // The index section: the live entries' fingerprints, row id = entry number.
  std::vector<index::SegmentRow> rows;
  rows.reserve(live);
  for (uint64_t i = 0; i < n; ++i) {
    const SegmentEntry& e = entries[order[i].second];
    if (!e.tombstone) rows.push_back({e.fingerprint.hi, e.fingerprint.lo, i});
  }
  std::shared_ptr<const index::TableSegment> image =
      index::TableSegment::Build(std::move(rows), bits, design, /*threads=*/0);

  const size_t fps_offset = kHeaderSize;
  const size_t offsets_offset = fps_offset + n * words * 8;
  const size_t blob_offset = offsets_offset + n * 8;
  const size_t hashes_offset = Align8(blob_offset + blob_size);
  const size_t index_offset = hashes_offset + n * 8;
  const size_t file_size = index_offset + image->image_size() + kFooterSize;

  std::string file(index_offset, '\0');
  char* base = file.data();
  std::memcpy(base, kSegmentMagic, 8);
  auto put32 = [&](size_t off, uint32_t v) { std::memcpy(base + off, &v, 4); };
  auto put64 = [&](size_t off, uint64_t v) { std::memcpy(base + off, &v, 8); };
  put32(kOffVersion, kSegmentVersion);
  put32(kOffBits, bits);
  put32(kOffMaxK, design->design.indexed_k);
  put32(kOffTables, static_cast<uint32_t>(design->tables.size()));
  put64(kOffEntries, n);
  put64(kOffLive, live);
  put64(kOffFingerprints, fps_offset);
  put64(kOffRecordOffsets, offsets_offset);
  put64(kOffBlob, blob_offset);
  put64(kOffBlobSize, blob_size);
  put64(kOffIdHashes, hashes_offset);
  put64(kOffIndex, index_offset);
  put64(kOffIndexSize, image->image_size());
  put64(kOffFileSize, file_size);
  put64(kOffHeaderChecksum, Checksum(base, kOffHeaderChecksum));

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
  }
  // Footer: XXH3-64 of everything before it, computed as the parts are written.
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, file.data(), file.size());
  XXH3_64bits_update(state, image->image(), image->image_size());
  const uint64_t checksum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  std::string footer(kFooterSize, '\0');
  std::memcpy(footer.data(), &checksum, 8);
  std::memcpy(footer.data() + 8, kFooterMagic, 8);

  Result<std::unique_ptr<WritableFile>> out = env->NewWritableFile(path);
  if (!out.ok()) return out.status();
  Status status = (*out)->Append(file);
  if (status.ok()) status = (*out)->Append(std::string_view(image->image(), image->image_size()));
  if (status.ok()) status = (*out)->Append(footer);
  if (status.ok()) status = (*out)->Sync();
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
    return Status::Unsupported(
        path + ": segment format version " + std::to_string(LoadU32(base + kOffVersion)) +
        " is not supported (`neardup index recover` rewrites older segments)");
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

Result<std::shared_ptr<Segment>> Segment::Open(const std::string& path,
                                               std::shared_ptr<const index::CompiledDesign> design,
                                               bool verify_checksum) {
  const int bits = design->design.bits;
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
  seg->indexed_k_ = static_cast<int>(LoadU32(base + kOffMaxK));
  seg->num_tables_ = static_cast<int>(LoadU32(base + kOffTables));
  const uint64_t n = LoadU64(base + kOffEntries);
  const uint64_t live = LoadU64(base + kOffLive);
  const uint64_t fps = LoadU64(base + kOffFingerprints);
  const uint64_t offsets = LoadU64(base + kOffRecordOffsets);
  const uint64_t blob = LoadU64(base + kOffBlob);
  const uint64_t blob_size = LoadU64(base + kOffBlobSize);
  const uint64_t hashes = LoadU64(base + kOffIdHashes);
  const uint64_t index_offset = LoadU64(base + kOffIndex);
  const uint64_t index_size = LoadU64(base + kOffIndexSize);
  const uint64_t words = static_cast<uint64_t>(seg->words_);
  // Every section must follow the writer's layout exactly (no sum below can overflow: each term
  // is checked against the file size first).
  const bool layout_ok = n < (uint64_t{1} << 32) && live <= n && fps == kHeaderSize &&
                         offsets == fps + n * words * 8 && blob == offsets + n * 8 &&
                         blob_size <= size && hashes == Align8(blob + blob_size) &&
                         index_offset == hashes + n * 8 && index_size <= size &&
                         index_offset <= size && index_offset + index_size + kFooterSize == size &&
                         seg->indexed_k_ == design->design.indexed_k &&
                         seg->num_tables_ == static_cast<int>(design->tables.size());
  if (!layout_ok) return Status::Corruption(path + ": segment section table is inconsistent");
  seg->num_entries_ = static_cast<uint32_t>(n);
  seg->num_live_ = static_cast<uint32_t>(live);
  seg->fingerprints_ = reinterpret_cast<const uint64_t*>(base + fps);
  seg->record_offsets_ = reinterpret_cast<const uint64_t*>(base + offsets);
  seg->blob_ = base + blob;
  seg->blob_size_ = blob_size;
  seg->id_hashes_ = reinterpret_cast<const uint64_t*>(base + hashes);
  Result<std::shared_ptr<const index::TableSegment>> image = index::TableSegment::View(
      std::string_view(base + index_offset, index_size), std::move(design), nullptr, path);
  if (!image.ok()) return image.status();
  if ((*image)->size() != live) {
    return Status::Corruption(path + ": index section holds " + std::to_string((*image)->size()) +
                              " rows, the segment " + std::to_string(live) + " live entries");
  }
  seg->index_ = std::move(*image);
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
  thread_local index::SearchScratch scratch;
  index::SearchCounters counters;
  // Row ids are entry numbers read from the file: checked before use.
  auto emit = [&](uint32_t row, int distance) {
    const uint64_t entry = index_->id(row);
    if (entry < num_entries_) hits->push_back({static_cast<uint32_t>(entry), distance});
  };
  if (k <= index_->design().design.indexed_k) {
    index_->Search(query.hi, query.lo, k, &counters, &scratch, emit);
  } else {
    index_->Scan(query.hi, query.lo, k, &counters, emit);
  }
}

Result<uint64_t> SalvageSegment(const std::string& path, int bits,
                                const std::function<void(const SegmentEntry&)>& on_entry,
                                bool* file_intact, SalvageChecks* checks) {
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
  const size_t size = file.size();
  const bool intact = size >= kHeaderSize + kFooterSize &&
                      std::memcmp(base + size - 8, kFooterMagic, 8) == 0 &&
                      LoadU64(base + size - kFooterSize) == Checksum(base, size - kFooterSize);
  if (file_intact != nullptr) *file_intact = intact;
  SalvageChecks defaults;
  SalvageChecks& c = checks != nullptr ? *checks : defaults;
  const uint64_t words = static_cast<uint64_t>(bits / 64);
  const uint64_t n = LoadU64(base + kOffEntries);
  const uint64_t fps = LoadU64(base + kOffFingerprints);
  const uint64_t offsets = LoadU64(base + kOffRecordOffsets);
  const uint64_t blob = LoadU64(base + kOffBlob);
  const uint64_t blob_size = LoadU64(base + kOffBlobSize);
  const uint64_t hashes = LoadU64(base + kOffIdHashes);
  // In a damaged file every entry is checked against what the segment keeps per entry: its id's
  // hash (id_hashes) and, for live entries, the index section's copy of its fingerprint.
  const bool check = !intact;
  std::vector<std::pair<uint64_t, uint64_t>> index_copy;  // entry -> (hi, lo)
  std::vector<bool> in_index;
  bool index_readable = false;
  if (check && c.design != nullptr && LoadU32(base + kOffVersion) == kSegmentVersion) {
    const uint64_t index_offset = LoadU64(base + kOffIndex);
    const uint64_t index_size = LoadU64(base + kOffIndexSize);
    if (index_offset % 8 == 0 && index_offset <= size && index_size <= size - index_offset) {
      Result<std::shared_ptr<const index::TableSegment>> image = index::TableSegment::View(
          std::string_view(base + index_offset, index_size), c.design, nullptr, path);
      if (image.ok() && n < (uint64_t{1} << 32)) {
        index_readable = true;
        index_copy.assign(n, {0, 0});
        in_index.assign(n, false);
        const index::TableSegment& t = **image;
        for (size_t row = 0; row < t.size(); ++row) {
          const uint64_t entry = t.id(row);
          if (entry < n) {
            index_copy[entry] = {t.hi(row), t.lo(row)};
            in_index[entry] = true;
          }
        }
      }
    }
  }
  uint64_t lost = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t fp_pos = fps + i * words * 8;
    const uint64_t off_pos = offsets + i * 8;
    if (fp_pos + words * 8 > size || off_pos + 8 > size) {
      ++lost;
      ++c.out_of_bounds;
      continue;
    }
    const uint64_t raw = LoadU64(base + off_pos);
    const uint64_t offset = raw & ~kTombstoneBit;
    if (offset + 8 > blob_size || blob + offset + 8 > size) {
      ++lost;
      ++c.out_of_bounds;
      continue;
    }
    const uint32_t id_len = LoadU32(base + blob + offset);
    const uint32_t meta_len = LoadU32(base + blob + offset + 4);
    const uint64_t record_end = blob + offset + 8 + id_len + meta_len;
    if (offset + 8 + id_len + meta_len > blob_size || record_end > size) {
      ++lost;
      ++c.out_of_bounds;
      continue;
    }
    if (id_len == 0 || (check && (id_len > c.max_id_bytes || meta_len > c.max_metadata_bytes))) {
      ++lost;
      ++c.over_limits;
      continue;
    }
    SegmentEntry entry;
    entry.id = std::string_view(base + blob + offset + 8, id_len);
    entry.metadata = std::string_view(base + blob + offset + 8 + id_len, meta_len);
    entry.tombstone = (raw & kTombstoneBit) != 0;
    entry.fingerprint =
        words == 1 ? Fingerprint::From64(LoadU64(base + fp_pos))
                   : Fingerprint::From128(LoadU64(base + fp_pos + 8), LoadU64(base + fp_pos));
    if (check) {
      const uint64_t hash_pos = hashes + i * 8;
      if (hash_pos + 8 > size || LoadU64(base + hash_pos) != IdHash(entry.id)) {
        ++lost;
        ++c.id_hash_mismatch;
        continue;
      }
      if (!entry.tombstone) {
        if (!index_readable) {
          ++c.fingerprints_unchecked;
        } else if (!in_index[i] || index_copy[i].first != entry.fingerprint.hi ||
                   index_copy[i].second != entry.fingerprint.lo) {
          ++lost;
          ++c.fingerprint_mismatch;
          continue;
        }
      }
    }
    on_entry(entry);
  }
  return lost;
}

}  // namespace neardup::store
