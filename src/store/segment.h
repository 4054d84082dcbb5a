// Immutable segment files: the id/metadata section (fingerprints, ids, metadata, id lookup), one
// index section — the same TableSegment image PermutedIndex builds in memory (src/index/) — and,
// in a kDedup store (format version 3), the sketch section: per entry the pair rule's hashes, its
// order of addition and its encoded shingle set, plus one key table (src/index/key_table.h) per
// LSH band and one for the whitespace-free hash. Written once and memory-mapped on open so
// nothing is rebuilt.
//
// Internal header. A Segment is immutable after Open and safe to search from many threads.
#ifndef NEARDUP_STORE_SEGMENT_H_
#define NEARDUP_STORE_SEGMENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "index/key_table.h"
#include "index/table_segment.h"
#include "neardup/env.h"
#include "neardup/fingerprint.h"
#include "neardup/status.h"
#include "store/sketch_record.h"

namespace neardup::store {

// One entry to write. A tombstone records that the id was removed (it hides older segments'
// entries) and is not searchable.
struct SegmentEntry {
  std::string_view id;
  Fingerprint fingerprint;
  std::string_view metadata;
  bool tombstone = false;
  // kDedup stores: whether the entry has a sketch (live entries of such a store always do, but a
  // salvaged one may have lost it), its pair-rule hashes, encoded shingle set and band keys
  // (SalvageSegment only; WriteSegment takes the band keys from its BandRows), and its order of
  // addition (the store's sequence number: a bucket lists its entries in this order).
  bool has_sketch = false;
  bool has_band_keys = false;  // WriteSegment: BandRows lists this entry in every band
  PairHashes hashes;
  std::string_view set;
  std::span<const uint32_t> band_keys;
  uint64_t seq = 0;
};

// The duplicate rule of a kDedup store as every segment records it (in its sketch section, so
// recovery can restore it without the MANIFEST).
struct SegmentRule {
  int bands = 0;
  int rows = 0;
  uint32_t bucket_window = 0;
  double threshold = 0;
  uint64_t seed = 0;
  friend bool operator==(const SegmentRule&, const SegmentRule&) = default;
};

// The band tables of a segment being written: fills `rows` with (key, index into `entries` (those
// given to WriteSegment), seq) for every entry with has_band_keys, in band `band` (any order).
using BandRows = std::function<void(int band, const std::vector<SegmentEntry>& entries,
                                    std::vector<index::KeyRow<uint32_t>>* rows)>;

// Writes `entries` (ids unique) as segment file `path` and fsyncs it; the index section holds the
// live entries' fingerprints in the tables of `design`. With a rule (a kDedup store) the file is
// of format version 3 with a sketch section: the entries' sketches and one key table per band
// (rows from `band_rows`) plus one of the whitespace-free hashes; without, version 2. Entries are
// reordered by id hash. The sketch section is streamed to the file (band by band), so a large
// compaction does not hold it in memory; `release_inputs` (if given) is called every 64 MiB of
// sets streamed and before each band's rows are asked for: a compaction drops its input segments'
// mapped pages there (Segment::ReleasePages), which the entries' views may still be read from
// (they map again). The caller fsyncs the directory (the MANIFEST write does).
Status WriteSegment(Env* env, const std::string& path,
                    const std::shared_ptr<const index::CompiledDesign>& design,
                    std::vector<SegmentEntry> entries, const SegmentRule* rule = nullptr,
                    const BandRows& band_rows = nullptr,
                    const std::function<void()>& release_inputs = nullptr);

// A hit inside one segment.
struct SegmentHit {
  uint32_t entry = 0;
  int distance = 0;
};

class Segment {
 public:
  // Maps and validates `path`: magic, version, header checksum, section bounds, width, the index
  // section's header and design (must be `design`'s tables); and the whole-file checksum if
  // `verify_checksum`. Without it, every offset is still bounds-checked when read. Errors name the
  // file.
  // With a rule, the store is kDedup and the file must be of version 3 with that rule; without,
  // version 2.
  static Result<std::shared_ptr<Segment>> Open(const std::string& path,
                                               std::shared_ptr<const index::CompiledDesign> design,
                                               const SegmentRule* rule, bool verify_checksum);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  // Drops this process's mapping of the file's pages (they stay in the page cache, and the next
  // read maps them again): a compaction that has streamed a segment's sets calls it, so a merge of
  // the whole store does not hold every input page resident at once.
  void ReleasePages() const;
  uint32_t size() const { return num_entries_; }
  uint32_t live() const { return num_live_; }
  int indexed_k() const { return indexed_k_; }
  // The index section (its row ids are entry numbers).
  const index::TableSegment& index() const { return *index_; }

  Fingerprint fingerprint(uint32_t entry) const;
  bool tombstone(uint32_t entry) const;
  // Empty views if the record is out of bounds (only possible in a damaged, unverified file).
  std::string_view id(uint32_t entry) const;
  std::string_view metadata(uint32_t entry) const;

  // Entry index holding `id` (live or tombstone), or -1.
  int64_t Find(std::string_view id) const;

  // Appends every non-tombstone entry within k of `query` (each once). Uses the permuted tables
  // when k <= indexed_k, else scans the index section's rows.
  void Search(const Fingerprint& query, int k, std::vector<SegmentHit>* hits) const;

  // ---- the sketch section (version 3; bands() == 0 otherwise) ----
  int bands() const { return bands_; }
  // One past the largest sequence number of the segment's entries (0 for an empty segment).
  uint64_t next_seq() const { return next_seq_; }
  bool has_sketch(uint32_t entry) const;
  PairHashes hashes(uint32_t entry) const;
  uint64_t seq(uint32_t entry) const;
  // The encoded shingle set (empty view if out of bounds: a damaged, unverified file).
  std::string_view set_bytes(uint32_t entry) const;
  // Band b's table: keys -> entry numbers (bounds-check them), oldest first within a key.
  const index::KeyTable<uint32_t>& band_table(int band) const { return band_tables_[band]; }
  // The whitespace-free hash's table, the same way.
  const index::KeyTable<uint64_t>& squeezed_table() const { return squeezed_table_; }

 private:
  struct SectionTable;
  Segment() = default;
  bool RecordBounds(uint32_t entry, size_t* begin, uint32_t* id_len, uint32_t* meta_len) const;
  // Open's steps after the header: the section table read and checked against the writer's
  // layout (the entry sections viewed), the index section viewed, the sketch section viewed.
  Status ReadSectionTable(const index::CompiledDesign& design, int bands, SectionTable* table);
  Status ViewIndexSection(std::shared_ptr<const index::CompiledDesign> design,
                          const SectionTable& table);
  Status ViewSketchSection(const SegmentRule* rule, int bands, const SectionTable& table);

  std::string path_;
  const char* base_ = nullptr;
  uint64_t file_size_ = 0;
  int bits_ = 64;
  int words_ = 1;
  int indexed_k_ = 3;
  int num_tables_ = 4;
  uint32_t num_entries_ = 0;
  uint32_t num_live_ = 0;
  const uint64_t* fingerprints_ = nullptr;    // num_entries * words (lo[, hi])
  const uint64_t* record_offsets_ = nullptr;  // blob offset; top bit = tombstone
  const char* blob_ = nullptr;
  uint64_t blob_size_ = 0;
  const uint64_t* id_hashes_ = nullptr;  // ascending; entries are stored in this order
  std::shared_ptr<const index::TableSegment> index_;
  // The sketch section.
  int bands_ = 0;
  uint64_t next_seq_ = 0;
  const uint64_t* sketch_rows_ = nullptr;  // per entry: content hash, text bytes | flag, squeezed
                                           // hash, seq
  const uint64_t* set_offsets_ = nullptr;  // num_entries + 1
  const char* set_blob_ = nullptr;
  uint64_t set_blob_size_ = 0;
  std::vector<index::KeyTable<uint32_t>> band_tables_;
  index::KeyTable<uint64_t> squeezed_table_;
};

// Hash of an external id used by the segment's id lookup.
uint64_t IdHash(std::string_view id);

// std::lower_bound(sorted, sorted + n, key) for values spread evenly over 64 bits (hashes): it
// starts where the key's value puts it and reads a few cache lines near there instead of log2(n)
// spread over the array (Segment::Find: a search of a store of many segments checks each hit's id
// against every newer segment). Correct for any sorted array; fast for uniform ones.
const uint64_t* LowerBoundUniform(const uint64_t* sorted, size_t n, uint64_t key);
// The per-entry checksum of segment version 3 (XXH3-64 of the fingerprint, the id and metadata
// lengths and the tombstone bit, the id and the metadata): what `index recover` checks a salvaged
// entry against.
uint64_t EntryChecksum(const Fingerprint& fingerprint, std::string_view id,
                       std::string_view metadata, bool tombstone);

// What SalvageSegment checks each entry of a damaged segment against, and what it found.
struct SalvageChecks {
  size_t max_id_bytes = 2048;  // the store's limits (StoreOptions)
  size_t max_metadata_bytes = 4096;
  // The store's index design: the index section's own copy of each live entry's fingerprint is
  // compared with the fingerprints array. Null: fingerprints are not cross-checked.
  std::shared_ptr<const index::CompiledDesign> design;

  // Filled in: entries refused, by reason (each also counts in the returned number lost).
  uint64_t out_of_bounds = 0;            // record outside the file or the blob
  uint64_t over_limits = 0;              // empty id, id or metadata longer than the limits
  uint64_t id_hash_mismatch = 0;         // the id's bytes do not hash to id_hashes[i]
  uint64_t fingerprint_mismatch = 0;     // the two copies of the fingerprint differ
  uint64_t entry_checksum_mismatch = 0;  // version 3: the entry fails its own checksum
  // Live entries of a version-2 segment kept without a fingerprint check (the index section is
  // unreadable; a version-3 entry's checksum covers its fingerprint).
  uint64_t fingerprints_unchecked = 0;
};

// Best-effort reading of a damaged or older-format segment for recovery: if the header is intact,
// calls `on_entry` for every entry that passes `checks` (when the file is damaged: record in
// bounds, id and metadata within the limits, id matching its hash in id_hashes, fingerprint
// matching the index section's copy); returns how many entries were refused (lost). Corruption if
// the header itself is unreadable. A segment whose whole-file checksum matches (an intact file of
// an older format) is read whole from the sections every version shares (fingerprints, record
// offsets, records). Sets `*file_intact` (if given) to whether the whole-file checksum matches.
// Of a version-3 segment it also reads the sketch section when the section's own checksums hold
// (entry.has_sketch, hashes, set, band_keys and seq are then set, and *sketch_rule, if given, gets
// the rule the section records; nullopt when there is no intact sketch section).
Result<uint64_t> SalvageSegment(const std::string& path, int bits,
                                const std::function<void(const SegmentEntry&)>& on_entry,
                                bool* file_intact = nullptr, SalvageChecks* checks = nullptr,
                                std::optional<SegmentRule>* sketch_rule = nullptr);

}  // namespace neardup::store

#endif  // NEARDUP_STORE_SEGMENT_H_
