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
// 2: one index section (src/index/table_segment.h); 3: + the sketch section of a kDedup store
// (header offset 112; 0 in a kSimHash store) and room for per-entry checksums (offset 104).
// Every segment is written as version 3; a kSimHash store still reads its version-2 segments.
constexpr uint32_t kOldSegmentVersion = 2;
constexpr uint32_t kSegmentVersion = 3;
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
  kOffEntryChecks = 104,  // version 3: per-entry checksums (0 when absent)
  kOffSketch = 112,       // version 3: the sketch section (0 in a kSimHash store), up to the footer
  kOffHeaderChecksum = 120,
};

// The sketch section (version 3), see docs/storage_format.md: the body (per-entry rows, set
// offsets, set blob, key tables) then a 64-byte trailer describing it, so the section is written
// in one pass.
constexpr char kSketchMagic[8] = {'N', 'D', 'S', 'K', 'E', 'T', 'C', 'H'};
constexpr uint32_t kSketchVersion = 1;
constexpr size_t kSketchTrailerSize = 96;
constexpr uint64_t kHasSketchBit = uint64_t{1} << 63;
enum : size_t {  // trailer field offsets
  kSkVersion = 8,
  kSkBands = 12,
  kSkEntries = 16,
  kSkBlobSize = 24,
  kSkNextSeq = 32,
  kSkBodyChecksum = 40,
  kSkBodySize = 48,
  // The store's rule, so that recovery can restore it without the MANIFEST.
  kSkRows = 56,
  kSkWindow = 60,
  kSkThreshold = 64,
  kSkSeed = 72,
  kSkReserved = 80,
  kSkTrailerChecksum = 88,
};
constexpr size_t kSketchRowWords = 4;  // content hash, text bytes | kHasSketchBit, squeezed, seq

// Appends to a file through a buffer, keeping the XXH3-64 of everything written (the footer's
// checksum) and of the part since MarkBody() (the sketch section's body checksum).
class StreamingWriter {
 public:
  explicit StreamingWriter(WritableFile* file) : file_(file) {
    file_state_ = XXH3_createState();
    body_state_ = XXH3_createState();
    XXH3_64bits_reset(file_state_);
    XXH3_64bits_reset(body_state_);
  }
  ~StreamingWriter() {
    XXH3_freeState(file_state_);
    XXH3_freeState(body_state_);
  }
  void Append(std::string_view bytes) {
    if (!status_.ok()) return;
    XXH3_64bits_update(file_state_, bytes.data(), bytes.size());
    if (in_body_) XXH3_64bits_update(body_state_, bytes.data(), bytes.size());
    written_ += bytes.size();
    if (bytes.size() >= kBuffer) {
      FlushBuffer();
      if (status_.ok()) status_ = file_->Append(bytes);
      return;
    }
    buffer_.append(bytes);
    if (buffer_.size() >= kBuffer) FlushBuffer();
  }
  void Pad8() {
    static const char kZeros[8] = {};
    if (written_ % 8 != 0) Append(std::string_view(kZeros, 8 - written_ % 8));
  }
  void StartBody() { in_body_ = true; }
  uint64_t EndBody() {
    in_body_ = false;
    return XXH3_64bits_digest(body_state_);
  }
  uint64_t FileChecksum() const { return XXH3_64bits_digest(file_state_); }
  uint64_t written() const { return written_; }
  Status Finish() {
    FlushBuffer();
    return status_;
  }

 private:
  static constexpr size_t kBuffer = size_t{1} << 20;
  void FlushBuffer() {
    if (status_.ok() && !buffer_.empty()) status_ = file_->Append(buffer_);
    buffer_.clear();
  }
  WritableFile* file_;
  std::string buffer_;
  Status status_;
  uint64_t written_ = 0;
  bool in_body_ = false;
  XXH3_state_t* file_state_;
  XXH3_state_t* body_state_;
};

// The size of the sketch section WriteSketchSection writes for `entries`.
size_t SketchSectionSize(const std::vector<SegmentEntry>& entries, int bands) {
  const size_t n = entries.size();
  size_t blob = 0, sketched = 0, keyed = 0;
  for (const SegmentEntry& e : entries) {
    if (!e.has_sketch || e.tombstone) continue;
    blob += e.set.size();
    ++sketched;
    keyed += e.has_band_keys ? 1 : 0;
  }
  return Align8(n * kSketchRowWords * 8 + (n + 1) * 8 + blob) +
         bands * index::KeyTableImageSize(keyed, 4) + index::KeyTableImageSize(sketched, 8) +
         kSketchTrailerSize;
}

// Streams the sketch section of `entries` in file order (`order[i].second` indexes `entries`).
void WriteSketchSection(const std::vector<SegmentEntry>& entries,
                        const std::vector<std::pair<uint64_t, uint32_t>>& order,
                        const SegmentRule& rule, const BandRows& band_rows,
                        const std::function<void()>& release_inputs, StreamingWriter* out) {
  const int bands = rule.bands;
  const uint64_t n = entries.size();
  std::vector<uint32_t> file_entry(n);  // entries index -> entry number in the file
  for (uint64_t i = 0; i < n; ++i) file_entry[order[i].second] = static_cast<uint32_t>(i);
  out->StartBody();
  const uint64_t body_start = out->written();
  std::string chunk;
  uint64_t next_seq = 0, blob_size = 0;
  std::vector<index::KeyRow<uint64_t>> squeezed_rows;
  auto flush_chunk = [&](bool force) {
    if (force || chunk.size() >= (size_t{1} << 20)) {
      out->Append(chunk);
      chunk.clear();
    }
  };
  for (uint64_t i = 0; i < n; ++i) {
    const SegmentEntry& e = entries[order[i].second];
    const bool sketched = e.has_sketch && !e.tombstone;
    PutU64(&chunk, sketched ? e.hashes.content_hash : 0);
    PutU64(&chunk, sketched ? (e.hashes.text_bytes & ~kHasSketchBit) | kHasSketchBit : 0);
    PutU64(&chunk, sketched ? e.hashes.squeezed_hash : 0);
    PutU64(&chunk, e.seq);
    next_seq = std::max(next_seq, e.seq + 1);
    if (sketched)
      squeezed_rows.push_back({e.hashes.squeezed_hash, static_cast<uint32_t>(i), e.seq});
    flush_chunk(false);
  }
  for (uint64_t i = 0; i <= n; ++i) {
    PutU64(&chunk, blob_size);
    if (i == n) break;
    const SegmentEntry& e = entries[order[i].second];
    if (e.has_sketch && !e.tombstone) blob_size += e.set.size();
    flush_chunk(false);
  }
  flush_chunk(true);
  constexpr size_t kReleaseEvery = size_t{64} << 20;  // bytes of sets between release_inputs
  size_t since_release = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const SegmentEntry& e = entries[order[i].second];
    if (!e.has_sketch || e.tombstone) continue;
    out->Append(e.set);
    since_release += e.set.size();
    if (release_inputs && since_release >= kReleaseEvery) {
      release_inputs();
      since_release = 0;
    }
  }
  out->Pad8();
  std::vector<index::KeyRow<uint32_t>> rows;
  for (int b = 0; b < bands; ++b) {
    if (release_inputs) release_inputs();
    rows.clear();
    if (band_rows) band_rows(b, entries, &rows);
    for (index::KeyRow<uint32_t>& row : rows) row.row = file_entry[row.row];
    // One row per entry with has_band_keys (the planned size; WriteSegment checks what was
    // written).
    index::BuildKeyTable(std::move(rows), &chunk);
    rows = {};
    flush_chunk(true);
  }
  index::BuildKeyTable(std::move(squeezed_rows), &chunk);
  flush_chunk(true);
  const uint64_t body_size = out->written() - body_start;
  const uint64_t body_checksum = out->EndBody();
  std::string trailer(kSketchTrailerSize, '\0');
  char* base = trailer.data();
  std::memcpy(base, kSketchMagic, 8);
  auto put32 = [&](size_t off, uint32_t v) { std::memcpy(base + off, &v, 4); };
  auto put64 = [&](size_t off, uint64_t v) { std::memcpy(base + off, &v, 8); };
  put32(kSkVersion, kSketchVersion);
  put32(kSkBands, static_cast<uint32_t>(bands));
  put64(kSkEntries, n);
  put64(kSkBlobSize, blob_size);
  put64(kSkNextSeq, next_seq);
  put64(kSkBodyChecksum, body_checksum);
  put64(kSkBodySize, body_size);
  put32(kSkRows, static_cast<uint32_t>(rule.rows));
  put32(kSkWindow, rule.bucket_window);
  uint64_t threshold_bits;
  std::memcpy(&threshold_bits, &rule.threshold, 8);
  put64(kSkThreshold, threshold_bits);
  put64(kSkSeed, rule.seed);
  put64(kSkTrailerChecksum, Checksum(base, kSkTrailerChecksum));
  out->Append(trailer);
}

// Every entry's band keys from the band tables (see Segment::BandKeysOfEntries).
void BandKeysFromTables(const std::vector<index::KeyTable<uint32_t>>& tables, uint64_t n,
                        std::vector<uint32_t>* keys, std::vector<uint8_t>* has_keys) {
  const size_t bands = tables.size();
  keys->assign(n * bands, 0);
  std::vector<uint16_t> count(n, 0);
  for (size_t b = 0; b < bands; ++b) {
    const index::KeyTable<uint32_t>& table = tables[b];
    for (size_t i = 0; i < table.size(); ++i) {
      const uint32_t entry = table.row_at(i);
      if (entry >= n) continue;  // damaged, unverified file
      (*keys)[uint64_t{entry} * bands + b] = table.key_at(i);
      ++count[entry];
    }
  }
  // An entry has keys when every band table holds it once (a damaged table may miss some).
  has_keys->assign(n, 0);
  for (uint64_t i = 0; i < n; ++i) (*has_keys)[i] = bands > 0 && count[i] == bands;
}

// The parts of a sketch section, checked against the section's size (every array must fit).
struct SketchLayout {
  SegmentRule rule;
  int bands = 0;
  uint64_t n = 0;
  uint64_t next_seq = 0;
  const uint64_t* rows = nullptr;
  const uint64_t* set_offsets = nullptr;
  const char* blob = nullptr;
  uint64_t blob_size = 0;
  std::vector<index::KeyTable<uint32_t>> band_tables;
  index::KeyTable<uint64_t> squeezed_table;
};

// Reads the sketch section `section` (8-byte aligned, trailer last); `what` names the file in
// errors. verify_body: also check the body checksum (reads every byte).
Status ReadSketchSection(std::string_view section, const std::string& what, bool verify_body,
                         SketchLayout* layout) {
  if (section.size() < kSketchTrailerSize)
    return Status::Corruption(what + ": sketch section is truncated");
  const char* trailer = section.data() + section.size() - kSketchTrailerSize;
  if (std::memcmp(trailer, kSketchMagic, 8) != 0 ||
      LoadU64(trailer + kSkTrailerChecksum) != Checksum(trailer, kSkTrailerChecksum)) {
    return Status::Corruption(what + ": sketch section trailer is damaged");
  }
  if (LoadU32(trailer + kSkVersion) != kSketchVersion) {
    return Status::Unsupported(what + ": sketch section version " +
                               std::to_string(LoadU32(trailer + kSkVersion)) + " is not supported");
  }
  const std::string_view body = section.substr(0, section.size() - kSketchTrailerSize);
  if (LoadU64(trailer + kSkBodySize) != body.size()) {
    return Status::Corruption(what + ": sketch section size does not match its trailer");
  }
  if (verify_body && LoadU64(trailer + kSkBodyChecksum) != Checksum(body)) {
    return Status::Corruption(what + ": sketch section checksum mismatch (file damaged)");
  }
  layout->bands = static_cast<int>(LoadU32(trailer + kSkBands));
  layout->rule.bands = layout->bands;
  layout->rule.rows = static_cast<int>(LoadU32(trailer + kSkRows));
  layout->rule.bucket_window = LoadU32(trailer + kSkWindow);
  std::memcpy(&layout->rule.threshold, trailer + kSkThreshold, 8);
  layout->rule.seed = LoadU64(trailer + kSkSeed);
  layout->n = LoadU64(trailer + kSkEntries);
  layout->next_seq = LoadU64(trailer + kSkNextSeq);
  layout->blob_size = LoadU64(trailer + kSkBlobSize);
  const uint64_t size = body.size();
  const uint64_t n = layout->n;
  if (layout->bands < 0 || layout->bands > 1024 || n >= (uint64_t{1} << 32) ||
      n > size / (kSketchRowWords * 8) || layout->blob_size > size) {
    return Status::Corruption(what + ": sketch section fields out of range");
  }
  const uint64_t offsets_off = n * kSketchRowWords * 8;
  const uint64_t blob_off = offsets_off + (n + 1) * 8;
  const uint64_t tables_off = Align8(blob_off + layout->blob_size);
  if (tables_off > size) return Status::Corruption(what + ": sketch section is truncated");
  const char* base = body.data();
  layout->rows = reinterpret_cast<const uint64_t*>(base);
  layout->set_offsets = reinterpret_cast<const uint64_t*>(base + offsets_off);
  layout->blob = base + blob_off;
  uint64_t at = tables_off;
  layout->band_tables.clear();
  for (int b = 0; b < layout->bands; ++b) {
    size_t used = 0;
    Result<index::KeyTable<uint32_t>> table = index::KeyTable<uint32_t>::View(
        body.substr(at), what + " band " + std::to_string(b), &used);
    if (!table.ok()) return table.status();
    layout->band_tables.push_back(*table);
    at += used;
  }
  size_t used = 0;
  Result<index::KeyTable<uint64_t>> squeezed =
      index::KeyTable<uint64_t>::View(body.substr(at), what + " whitespace table", &used);
  if (!squeezed.ok()) return squeezed.status();
  layout->squeezed_table = *squeezed;
  if (at + used != size) return Status::Corruption(what + ": sketch section has trailing bytes");
  return Status::Ok();
}

}  // namespace

uint64_t IdHash(std::string_view id) { return Checksum(id); }

uint64_t EntryChecksum(const Fingerprint& fingerprint, std::string_view id,
                       std::string_view metadata, bool tombstone) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  const uint64_t words[3] = {
      fingerprint.hi, fingerprint.lo,
      (uint64_t{id.size()} << 33) | (uint64_t{metadata.size()} << 1) | (tombstone ? 1u : 0u)};
  XXH3_64bits_update(state, words, sizeof(words));
  XXH3_64bits_update(state, id.data(), id.size());
  XXH3_64bits_update(state, metadata.data(), metadata.size());
  const uint64_t checksum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return checksum;
}

namespace {

// The entries in the file's order: ascending id hash, then id (the order Find's binary search
// reads), as (id hash, entry number).
std::vector<std::pair<uint64_t, uint32_t>> IdHashOrder(const std::vector<SegmentEntry>& entries) {
  std::vector<std::pair<uint64_t, uint32_t>> order(entries.size());
  for (size_t i = 0; i < entries.size(); ++i)
    order[i] = {IdHash(entries[i].id), static_cast<uint32_t>(i)};
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return entries[a.second].id < entries[b.second].id;
  });
  return order;
}

// The index section: the live entries' fingerprints, row id = entry number in the file's order.
std::shared_ptr<const index::TableSegment> BuildIndexImage(
    const std::vector<SegmentEntry>& entries,
    const std::vector<std::pair<uint64_t, uint32_t>>& order, uint64_t live, int bits,
    const std::shared_ptr<const index::CompiledDesign>& design) {
  std::vector<index::SegmentRow> rows;
  rows.reserve(live);
  for (uint64_t i = 0; i < order.size(); ++i) {
    const SegmentEntry& e = entries[order[i].second];
    if (!e.tombstone) rows.push_back({e.fingerprint.hi, e.fingerprint.lo, i});
  }
  return index::TableSegment::Build(std::move(rows), bits, design, /*threads=*/0);
}

// Where WriteSegment puts each section (the order Segment::Open checks).
struct SegmentLayout {
  uint64_t n = 0, live = 0;
  int words = 1;
  size_t blob_size = 0;
  size_t fps_offset = 0, offsets_offset = 0, blob_offset = 0, hashes_offset = 0, checks_offset = 0,
         index_offset = 0, index_size = 0, sketch_offset = 0, file_size = 0;
};

SegmentLayout PlanLayout(const std::vector<SegmentEntry>& entries, int bits, uint64_t live,
                         size_t index_size, int bands) {
  SegmentLayout l;
  l.n = entries.size();
  l.live = live;
  l.words = bits / 64;
  for (const SegmentEntry& e : entries) l.blob_size += 8 + e.id.size() + e.metadata.size();
  l.fps_offset = kHeaderSize;
  l.offsets_offset = l.fps_offset + l.n * l.words * 8;
  l.blob_offset = l.offsets_offset + l.n * 8;
  l.hashes_offset = Align8(l.blob_offset + l.blob_size);
  l.checks_offset = l.hashes_offset + l.n * 8;  // version 3: per-entry checksums
  l.index_offset = l.checks_offset + l.n * 8;
  l.index_size = index_size;
  l.sketch_offset = l.index_offset + index_size;  // images are 8-byte multiples
  const size_t sketch_size = bands > 0 ? SketchSectionSize(entries, bands) : 0;
  l.file_size = l.sketch_offset + sketch_size + kFooterSize;
  return l;
}

void Put32(char* base, size_t off, uint32_t v) { std::memcpy(base + off, &v, 4); }
void Put64(char* base, size_t off, uint64_t v) { std::memcpy(base + off, &v, 8); }

// The header: magic, version, the design's shape, the section table and its checksum.
void PutHeader(const SegmentLayout& l, const index::CompiledDesign& design, int bands, char* base) {
  std::memcpy(base, kSegmentMagic, 8);
  Put32(base, kOffVersion, kSegmentVersion);
  Put32(base, kOffBits, design.design.bits);
  Put32(base, kOffMaxK, design.design.indexed_k);
  Put32(base, kOffTables, static_cast<uint32_t>(design.tables.size()));
  Put64(base, kOffEntries, l.n);
  Put64(base, kOffLive, l.live);
  Put64(base, kOffFingerprints, l.fps_offset);
  Put64(base, kOffRecordOffsets, l.offsets_offset);
  Put64(base, kOffBlob, l.blob_offset);
  Put64(base, kOffBlobSize, l.blob_size);
  Put64(base, kOffIdHashes, l.hashes_offset);
  Put64(base, kOffIndex, l.index_offset);
  Put64(base, kOffIndexSize, l.index_size);
  Put64(base, kOffFileSize, l.file_size);
  Put64(base, kOffEntryChecks, l.checks_offset);
  if (bands > 0) Put64(base, kOffSketch, l.sketch_offset);
  Put64(base, kOffHeaderChecksum, Checksum(base, kOffHeaderChecksum));
}

// The entry sections in the file's order: fingerprints, record offsets (with the tombstone bit),
// the id/metadata records, id hashes and per-entry checksums.
void PutEntries(const std::vector<SegmentEntry>& entries,
                const std::vector<std::pair<uint64_t, uint32_t>>& order, const SegmentLayout& l,
                char* base) {
  size_t blob_pos = 0;
  for (uint64_t i = 0; i < l.n; ++i) {
    const SegmentEntry& e = entries[order[i].second];
    Put64(base, l.fps_offset + i * l.words * 8, e.fingerprint.lo);
    if (l.words == 2) Put64(base, l.fps_offset + i * 16 + 8, e.fingerprint.hi);
    Put64(base, l.offsets_offset + i * 8, blob_pos | (e.tombstone ? kTombstoneBit : 0));
    Put32(base, l.blob_offset + blob_pos, static_cast<uint32_t>(e.id.size()));
    Put32(base, l.blob_offset + blob_pos + 4, static_cast<uint32_t>(e.metadata.size()));
    std::memcpy(base + l.blob_offset + blob_pos + 8, e.id.data(), e.id.size());
    if (!e.metadata.empty()) {
      std::memcpy(base + l.blob_offset + blob_pos + 8 + e.id.size(), e.metadata.data(),
                  e.metadata.size());
    }
    blob_pos += 8 + e.id.size() + e.metadata.size();
    Put64(base, l.hashes_offset + i * 8, order[i].first);
    Put64(base, l.checks_offset + i * 8,
          EntryChecksum(e.fingerprint, e.id, e.metadata, e.tombstone));
  }
}

// Footer: XXH3-64 of everything before it, computed as the parts are written; then the file is
// finished and synced.
Status FinishSegmentFile(StreamingWriter* writer, WritableFile* out) {
  const uint64_t checksum = writer->FileChecksum();
  std::string footer(kFooterSize, '\0');
  std::memcpy(footer.data(), &checksum, 8);
  std::memcpy(footer.data() + 8, kFooterMagic, 8);
  writer->Append(footer);
  Status status = writer->Finish();
  if (status.ok()) status = out->Sync();
  return status;
}

}  // namespace

Status WriteSegment(Env* env, const std::string& path,
                    const std::shared_ptr<const index::CompiledDesign>& design,
                    std::vector<SegmentEntry> entries, const SegmentRule* rule,
                    const BandRows& band_rows, const std::function<void()>& release_inputs) {
  const int bands = rule != nullptr ? rule->bands : 0;
  if (entries.size() >= (uint64_t{1} << 32) - 1) {
    return Status::ResourceExhausted(path + ": too many entries for one segment");
  }
  const std::vector<std::pair<uint64_t, uint32_t>> order = IdHashOrder(entries);
  uint64_t live = 0;
  for (const SegmentEntry& e : entries) live += e.tombstone ? 0 : 1;
  std::shared_ptr<const index::TableSegment> image =
      BuildIndexImage(entries, order, live, design->design.bits, design);
  const SegmentLayout layout =
      PlanLayout(entries, design->design.bits, live, image->image_size(), bands);

  // Header and entry sections in memory, then the index image and the sketch section streamed.
  std::string file(layout.index_offset, '\0');
  PutHeader(layout, *design, bands, file.data());
  PutEntries(entries, order, layout, file.data());
  Result<std::unique_ptr<WritableFile>> out = env->NewWritableFile(path);
  if (!out.ok()) return out.status();
  StreamingWriter writer(out->get());
  writer.Append(file);
  std::string().swap(file);
  writer.Append(std::string_view(image->image(), image->image_size()));
  image.reset();
  if (bands > 0) WriteSketchSection(entries, order, *rule, band_rows, release_inputs, &writer);
  if (writer.written() != layout.file_size - kFooterSize) {
    (void)writer.Finish();
    return Status::Internal(path + ": segment sections came out at " +
                            std::to_string(writer.written()) + " bytes, not the " +
                            std::to_string(layout.file_size - kFooterSize) + " planned");
  }
  return FinishSegmentFile(&writer, out->get());
}

namespace {

// Validates the header of a mapped file; fills the layout fields of `seg`-like out params.
Status CheckHeader(const std::string& path, const char* base, uint64_t size, int bits,
                   bool accept_version_2) {
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
  const uint32_t found = LoadU32(base + kOffVersion);
  if (found != kSegmentVersion && !(found == kOldSegmentVersion && accept_version_2)) {
    return Status::Unsupported(
        path + ": segment format version " + std::to_string(found) + " is not supported" +
        (found < kSegmentVersion ? " (`neardup index recover` rewrites older segments)"
                                 : " (written by a newer neardup)"));
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

// A segment file mapped read-only.
struct MappedFile {
  const char* base = nullptr;
  uint64_t size = 0;
};

// Maps `path` (at least a header and a footer long).
Result<MappedFile> MapSegmentFile(const std::string& path) {
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
  return MappedFile{static_cast<const char*>(map), size};
}

// The footer's magic and its checksum of everything before it.
Status CheckFileChecksum(const std::string& path, const char* base, uint64_t size) {
  if (std::memcmp(base + size - 8, kFooterMagic, 8) != 0 ||
      LoadU64(base + size - kFooterSize) != Checksum(base, size - kFooterSize)) {
    return Status::Corruption(path + ": segment checksum mismatch (file damaged)");
  }
  return Status::Ok();
}

}  // namespace

// The header's section table, as read (ReadSectionTable checks it against the writer's layout).
struct Segment::SectionTable {
  uint64_t n = 0, live = 0, fps = 0, offsets = 0, blob = 0, blob_size = 0, hashes = 0;
  uint64_t index_offset = 0, index_size = 0, sketch_offset = 0, sketch_size = 0;
};

Result<std::shared_ptr<Segment>> Segment::Open(const std::string& path,
                                               std::shared_ptr<const index::CompiledDesign> design,
                                               const SegmentRule* rule, bool verify_checksum) {
  const int bands = rule != nullptr ? rule->bands : 0;
  Result<MappedFile> mapped = MapSegmentFile(path);
  if (!mapped.ok()) return mapped.status();
  std::shared_ptr<Segment> seg(new Segment());  // unmaps the file from here on
  seg->path_ = path;
  seg->base_ = mapped->base;
  seg->file_size_ = mapped->size;
  NEARDUP_RETURN_IF_ERROR(CheckHeader(path, seg->base_, seg->file_size_, design->design.bits,
                                      /*accept_version_2=*/bands == 0));
  if (verify_checksum)
    NEARDUP_RETURN_IF_ERROR(CheckFileChecksum(path, seg->base_, seg->file_size_));
  SectionTable sections;
  NEARDUP_RETURN_IF_ERROR(seg->ReadSectionTable(*design, bands, &sections));
  NEARDUP_RETURN_IF_ERROR(seg->ViewIndexSection(std::move(design), sections));
  if (bands > 0) NEARDUP_RETURN_IF_ERROR(seg->ViewSketchSection(rule, bands, sections));
  ::madvise(const_cast<char*>(seg->base_), seg->file_size_, MADV_RANDOM);
  return seg;
}

Status Segment::ReadSectionTable(const index::CompiledDesign& design, int bands, SectionTable* t) {
  const char* base = base_;
  const uint64_t size = file_size_;
  bits_ = design.design.bits;
  words_ = bits_ / 64;
  indexed_k_ = static_cast<int>(LoadU32(base + kOffMaxK));
  num_tables_ = static_cast<int>(LoadU32(base + kOffTables));
  t->n = LoadU64(base + kOffEntries);
  t->live = LoadU64(base + kOffLive);
  t->fps = LoadU64(base + kOffFingerprints);
  t->offsets = LoadU64(base + kOffRecordOffsets);
  t->blob = LoadU64(base + kOffBlob);
  t->blob_size = LoadU64(base + kOffBlobSize);
  t->hashes = LoadU64(base + kOffIdHashes);
  t->index_offset = LoadU64(base + kOffIndex);
  t->index_size = LoadU64(base + kOffIndexSize);
  const uint64_t n = t->n;
  const uint64_t words = static_cast<uint64_t>(words_);
  const bool version_3 = LoadU32(base + kOffVersion) == kSegmentVersion;
  t->sketch_offset = version_3 ? LoadU64(base + kOffSketch) : 0;
  // A kSimHash store's segment has no sketch section; a kDedup store's must have one.
  if ((bands > 0) != (t->sketch_offset != 0)) {
    return Status::Corruption(path_ + (bands > 0 ? ": segment has no sketch section, the store "
                                                   "applies the dedup rule"
                                                 : ": segment has a sketch section, the store "
                                                   "applies the simhash rule"));
  }
  const uint64_t index_end = bands > 0 ? t->sketch_offset : size - kFooterSize;
  t->sketch_size = bands > 0 && t->sketch_offset + kFooterSize <= size
                       ? size - kFooterSize - t->sketch_offset
                       : 0;
  // Every section must follow the writer's layout exactly (no sum below can overflow: each term
  // is checked against the file size first).
  // Version 3 keeps a checksum per entry between the id hashes and the index section.
  const uint64_t checks = version_3 ? LoadU64(base + kOffEntryChecks) : 0;
  const uint64_t index_after = version_3 ? checks + n * 8 : t->hashes + n * 8;
  const bool layout_ok =
      n < (uint64_t{1} << 32) && t->live <= n && t->fps == kHeaderSize &&
      t->offsets == t->fps + n * words * 8 && t->blob == t->offsets + n * 8 &&
      t->blob_size <= size && t->hashes == Align8(t->blob + t->blob_size) &&
      (!version_3 || checks == t->hashes + n * 8) && t->index_offset == index_after &&
      t->index_size <= size && t->index_offset <= size && t->sketch_offset % 8 == 0 &&
      (bands == 0 || t->sketch_offset + kFooterSize <= size) &&
      t->index_offset + t->index_size == index_end && indexed_k_ == design.design.indexed_k &&
      num_tables_ == static_cast<int>(design.tables.size());
  if (!layout_ok) return Status::Corruption(path_ + ": segment section table is inconsistent");
  num_entries_ = static_cast<uint32_t>(n);
  num_live_ = static_cast<uint32_t>(t->live);
  fingerprints_ = reinterpret_cast<const uint64_t*>(base + t->fps);
  record_offsets_ = reinterpret_cast<const uint64_t*>(base + t->offsets);
  blob_ = base + t->blob;
  blob_size_ = t->blob_size;
  id_hashes_ = reinterpret_cast<const uint64_t*>(base + t->hashes);
  return Status::Ok();
}

Status Segment::ViewIndexSection(std::shared_ptr<const index::CompiledDesign> design,
                                 const SectionTable& t) {
  Result<std::shared_ptr<const index::TableSegment>> image = index::TableSegment::View(
      std::string_view(base_ + t.index_offset, t.index_size), std::move(design), nullptr, path_);
  if (!image.ok()) return image.status();
  if ((*image)->size() != t.live) {
    return Status::Corruption(path_ + ": index section holds " + std::to_string((*image)->size()) +
                              " rows, the segment " + std::to_string(t.live) + " live entries");
  }
  index_ = std::move(*image);
  return Status::Ok();
}

Status Segment::ViewSketchSection(const SegmentRule* rule, int bands, const SectionTable& t) {
  SketchLayout layout;
  NEARDUP_RETURN_IF_ERROR(
      ReadSketchSection(std::string_view(base_ + t.sketch_offset, t.sketch_size), path_,
                        /*verify_body=*/false, &layout));
  if (layout.bands != bands || layout.n != t.n || (rule != nullptr && !(layout.rule == *rule))) {
    return Status::Corruption(
        path_ + ": sketch section holds " + std::to_string(layout.bands) + " bands and " +
        std::to_string(layout.n) + " entries of another rule or count than the store's " +
        std::to_string(bands) + " bands and the segment's " + std::to_string(t.n) + " entries");
  }
  bands_ = bands;
  next_seq_ = layout.next_seq;
  sketch_rows_ = layout.rows;
  set_offsets_ = layout.set_offsets;
  set_blob_ = layout.blob;
  set_blob_size_ = layout.blob_size;
  band_tables_ = std::move(layout.band_tables);
  squeezed_table_ = layout.squeezed_table;
  // The band directories in RAM (about 16 bytes a document for 30 bands): a check's first
  // access in each table never waits for the page cache.
  for (index::KeyTable<uint32_t>& table : band_tables_) table.KeepDirectoryInMemory();
  squeezed_table_.KeepDirectoryInMemory();
  return Status::Ok();
}

bool Segment::has_sketch(uint32_t entry) const {
  return bands_ > 0 && (sketch_rows_[entry * kSketchRowWords + 1] & kHasSketchBit) != 0;
}

PairHashes Segment::hashes(uint32_t entry) const {
  const uint64_t* row = sketch_rows_ + entry * kSketchRowWords;
  return {row[0], row[1] & ~kHasSketchBit, row[2]};
}

uint64_t Segment::seq(uint32_t entry) const {
  return bands_ > 0 ? sketch_rows_[entry * kSketchRowWords + 3] : 0;
}

std::string_view Segment::set_bytes(uint32_t entry) const {
  const uint64_t from = set_offsets_[entry], to = set_offsets_[entry + 1];
  if (from > to || to > set_blob_size_) return {};
  return std::string_view(set_blob_ + from, to - from);
}

Segment::~Segment() {
  if (base_ != nullptr) ::munmap(const_cast<char*>(base_), file_size_);
}

void Segment::ReleasePages() const {
  // A read-only shared mapping: MADV_DONTNEED only unmaps the pages (no data is lost); advisory.
  if (base_ != nullptr) ::madvise(const_cast<char*>(base_), file_size_, MADV_DONTNEED);
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

const uint64_t* LowerBoundUniform(const uint64_t* sorted, size_t n, uint64_t key) {
  if (n == 0) return sorted;
  // `key` is near key / 2^64 of the way in (within ~sqrt(n) for uniform values): start there and
  // gallop out to bounds, then binary-search between them.
  const auto guess = static_cast<size_t>((static_cast<unsigned __int128>(key) * n) >> 64);  // < n
  size_t lo, hi;  // the answer is in [lo, hi], and hi == n or sorted[hi] >= key
  if (sorted[guess] < key) {
    lo = guess + 1;
    hi = lo;
    for (size_t step = 1; hi < n && sorted[hi] < key; step *= 2) {
      lo = hi + 1;
      hi = std::min(n, hi + step);
    }
  } else {
    hi = guess;
    lo = hi;
    for (size_t step = 1; lo > 0; step *= 2) {
      const size_t probe = lo > step ? lo - step : 0;
      if (sorted[probe] < key) {
        lo = probe + 1;
        break;
      }
      hi = lo = probe;
    }
  }
  return std::lower_bound(sorted + lo, sorted + hi, key);
}

int64_t Segment::Find(std::string_view id) const {
  const uint64_t hash = IdHash(id);
  const uint64_t* first = LowerBoundUniform(id_hashes_, num_entries_, hash);
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

namespace {

// A segment file as SalvageSegment reads it: its bytes and the header's section offsets, none
// trusted (every position is checked against the size before it is read).
struct SalvageView {
  const char* base = nullptr;
  uint64_t size = 0;
  uint32_t version = 0;
  uint64_t words = 1, n = 0, fps = 0, offsets = 0, blob = 0, blob_size = 0, hashes = 0;
};

// The index section's copy of each live entry's fingerprint, when the section is readable.
struct IndexCopy {
  bool readable = false;
  std::vector<std::pair<uint64_t, uint64_t>> fingerprints;  // entry -> (hi, lo)
  std::vector<bool> in_index;
};

IndexCopy ReadIndexCopy(const std::string& path, const SalvageView& v,
                        const std::shared_ptr<const index::CompiledDesign>& design) {
  IndexCopy copy;
  const uint64_t index_offset = LoadU64(v.base + kOffIndex);
  const uint64_t index_size = LoadU64(v.base + kOffIndexSize);
  if (index_offset % 8 != 0 || index_offset > v.size || index_size > v.size - index_offset) {
    return copy;
  }
  Result<std::shared_ptr<const index::TableSegment>> image = index::TableSegment::View(
      std::string_view(v.base + index_offset, index_size), design, nullptr, path);
  if (!image.ok() || v.n >= (uint64_t{1} << 32)) return copy;
  copy.readable = true;
  copy.fingerprints.assign(v.n, {0, 0});
  copy.in_index.assign(v.n, false);
  const index::TableSegment& t = **image;
  for (size_t row = 0; row < t.size(); ++row) {
    const uint64_t entry = t.id(row);
    if (entry < v.n) {
      copy.fingerprints[entry] = {t.hi(row), t.lo(row)};
      copy.in_index[entry] = true;
    }
  }
  return copy;
}

// A version-3 segment's sketch section, when its own checksums hold, with its band keys by
// entry.
struct SalvagedSketch {
  bool present = false;
  SketchLayout layout;
  std::vector<uint32_t> band_keys;
  std::vector<uint8_t> has_keys;
};

void ReadSalvagedSketch(const std::string& path, const SalvageView& v, SalvagedSketch* sketch) {
  if (v.version != kSegmentVersion || LoadU64(v.base + kOffSketch) == 0) return;
  const uint64_t offset = LoadU64(v.base + kOffSketch);
  const uint64_t sketch_size = v.size - std::min<uint64_t>(v.size, offset + kFooterSize);
  if (offset % 8 == 0 && offset + kFooterSize <= v.size &&
      ReadSketchSection(std::string_view(v.base + offset, sketch_size), path,
                        /*verify_body=*/true, &sketch->layout)
          .ok() &&
      sketch->layout.n == v.n) {
    sketch->present = true;
    BandKeysFromTables(sketch->layout.band_tables, v.n, &sketch->band_keys, &sketch->has_keys);
  }
}

// Entry i's record: false (and the reason counted in *c) if it lies outside the file or the
// blob, or is over the limits (checked in a damaged file only: `check`).
bool ReadSalvageEntry(const SalvageView& v, uint64_t i, bool check, SalvageChecks* c,
                      SegmentEntry* entry) {
  const uint64_t fp_pos = v.fps + i * v.words * 8;
  const uint64_t off_pos = v.offsets + i * 8;
  if (fp_pos + v.words * 8 > v.size || off_pos + 8 > v.size) {
    ++c->out_of_bounds;
    return false;
  }
  const uint64_t raw = LoadU64(v.base + off_pos);
  const uint64_t offset = raw & ~kTombstoneBit;
  if (offset + 8 > v.blob_size || v.blob + offset + 8 > v.size) {
    ++c->out_of_bounds;
    return false;
  }
  const uint32_t id_len = LoadU32(v.base + v.blob + offset);
  const uint32_t meta_len = LoadU32(v.base + v.blob + offset + 4);
  const uint64_t record_end = v.blob + offset + 8 + id_len + meta_len;
  if (offset + 8 + id_len + meta_len > v.blob_size || record_end > v.size) {
    ++c->out_of_bounds;
    return false;
  }
  if (id_len == 0 || (check && (id_len > c->max_id_bytes || meta_len > c->max_metadata_bytes))) {
    ++c->over_limits;
    return false;
  }
  entry->id = std::string_view(v.base + v.blob + offset + 8, id_len);
  entry->metadata = std::string_view(v.base + v.blob + offset + 8 + id_len, meta_len);
  entry->tombstone = (raw & kTombstoneBit) != 0;
  entry->fingerprint =
      v.words == 1 ? Fingerprint::From64(LoadU64(v.base + fp_pos))
                   : Fingerprint::From128(LoadU64(v.base + fp_pos + 8), LoadU64(v.base + fp_pos));
  return true;
}

// A damaged segment's entry i against what the segment keeps per entry: its id's hash
// (id_hashes), for live entries the index section's copy of its fingerprint, and (version 3)
// its own checksum. False (and the reason counted in *c) if any disagrees.
bool EntryVouchedFor(const SalvageView& v, uint64_t i, const SegmentEntry& entry,
                     const IndexCopy& index_copy, SalvageChecks* c) {
  const uint64_t hash_pos = v.hashes + i * 8;
  if (hash_pos + 8 > v.size || LoadU64(v.base + hash_pos) != IdHash(entry.id)) {
    ++c->id_hash_mismatch;
    return false;
  }
  // Version 3: the entry's own checksum covers its fingerprint, id, metadata and tombstone bit.
  bool checksum_ok = true;
  const bool has_checksum = v.version == kSegmentVersion;
  if (has_checksum) {
    const uint64_t checks = LoadU64(v.base + kOffEntryChecks);
    const uint64_t check_pos = checks + i * 8;
    checksum_ok = checks != 0 && check_pos >= checks && check_pos + 8 <= v.size &&
                  LoadU64(v.base + check_pos) ==
                      EntryChecksum(entry.fingerprint, entry.id, entry.metadata, entry.tombstone);
  }
  if (!entry.tombstone && index_copy.readable &&
      (!index_copy.in_index[i] || index_copy.fingerprints[i].first != entry.fingerprint.hi ||
       index_copy.fingerprints[i].second != entry.fingerprint.lo)) {
    ++c->fingerprint_mismatch;
    return false;
  }
  if (!checksum_ok) {
    ++c->entry_checksum_mismatch;
    return false;
  }
  // Without the index section's copy, only a version-3 entry checksum vouches for the
  // fingerprint.
  if (!entry.tombstone && !index_copy.readable && !has_checksum) ++c->fingerprints_unchecked;
  return true;
}

// Entry i's sketch (hashes, sequence number, set, band keys) from the salvaged section.
void AttachSketch(const SalvagedSketch& sketch, uint64_t i, SegmentEntry* entry) {
  const SketchLayout& s = sketch.layout;
  const uint64_t* row = s.rows + i * kSketchRowWords;
  entry->seq = row[3];
  const uint64_t from = s.set_offsets[i], to = s.set_offsets[i + 1];
  if ((row[1] & kHasSketchBit) != 0 && from <= to && to <= s.blob_size) {
    entry->has_sketch = true;
    entry->hashes = {row[0], row[1] & ~kHasSketchBit, row[2]};
    entry->set = std::string_view(s.blob + from, to - from);
    entry->has_band_keys = sketch.has_keys[i] != 0;
    if (entry->has_band_keys) {
      entry->band_keys = std::span<const uint32_t>(sketch.band_keys.data() + i * s.bands,
                                                   static_cast<size_t>(s.bands));
    }
  }
}

}  // namespace

Result<uint64_t> SalvageSegment(const std::string& path, int bits,
                                const std::function<void(const SegmentEntry&)>& on_entry,
                                bool* file_intact, SalvageChecks* checks,
                                std::optional<SegmentRule>* sketch_rule) {
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
  const SalvageView v{base,
                      size,
                      LoadU32(base + kOffVersion),
                      static_cast<uint64_t>(bits / 64),
                      LoadU64(base + kOffEntries),
                      LoadU64(base + kOffFingerprints),
                      LoadU64(base + kOffRecordOffsets),
                      LoadU64(base + kOffBlob),
                      LoadU64(base + kOffBlobSize),
                      LoadU64(base + kOffIdHashes)};
  // In a damaged file every entry is checked against what the segment keeps per entry.
  const bool check = !intact;
  IndexCopy index_copy;
  if (check && c.design != nullptr &&
      (v.version == kSegmentVersion || v.version == kOldSegmentVersion)) {
    index_copy = ReadIndexCopy(path, v, c.design);
  }
  SalvagedSketch sketch;
  ReadSalvagedSketch(path, v, &sketch);
  if (sketch_rule != nullptr) {
    *sketch_rule = std::nullopt;
    if (sketch.present) *sketch_rule = sketch.layout.rule;
  }
  uint64_t lost = 0;
  for (uint64_t i = 0; i < v.n; ++i) {
    SegmentEntry entry;
    if (!ReadSalvageEntry(v, i, check, &c, &entry) ||
        (check && !EntryVouchedFor(v, i, entry, index_copy, &c))) {
      ++lost;
      continue;
    }
    if (sketch.present) AttachSketch(sketch, i, &entry);
    on_entry(entry);
  }
  return lost;
}

}  // namespace neardup::store
