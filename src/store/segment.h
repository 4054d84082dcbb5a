// Immutable segment files: the id/metadata section (fingerprints, ids, metadata, id lookup) plus
// one index section — the same TableSegment image PermutedIndex builds in memory (src/index/) —
// written once and memory-mapped on open so nothing is rebuilt.
//
// Internal header. A Segment is immutable after Open and safe to search from many threads.
#ifndef NEARDUP_STORE_SEGMENT_H_
#define NEARDUP_STORE_SEGMENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "index/table_segment.h"
#include "neardup/env.h"
#include "neardup/fingerprint.h"
#include "neardup/status.h"

namespace neardup::store {

// One entry to write. A tombstone records that the id was removed (it hides older segments'
// entries) and is not searchable.
struct SegmentEntry {
  std::string_view id;
  Fingerprint fingerprint;
  std::string_view metadata;
  bool tombstone = false;
};

// Writes `entries` (ids unique) as segment file `path` and fsyncs it; the index section holds the
// live entries' fingerprints in the tables of `design`. Entries are reordered by id hash. The
// caller fsyncs the directory (the MANIFEST write does).
Status WriteSegment(Env* env, const std::string& path,
                    const std::shared_ptr<const index::CompiledDesign>& design,
                    std::vector<SegmentEntry> entries);

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
  static Result<std::shared_ptr<Segment>> Open(const std::string& path,
                                               std::shared_ptr<const index::CompiledDesign> design,
                                               bool verify_checksum);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
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

 private:
  Segment() = default;
  bool RecordBounds(uint32_t entry, size_t* begin, uint32_t* id_len, uint32_t* meta_len) const;

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
};

// Hash of an external id used by the segment's id lookup.
uint64_t IdHash(std::string_view id);

// What SalvageSegment checks each entry of a damaged segment against, and what it found.
struct SalvageChecks {
  size_t max_id_bytes = 2048;  // the store's limits (StoreOptions)
  size_t max_metadata_bytes = 4096;
  // The store's index design: the index section's own copy of each live entry's fingerprint is
  // compared with the fingerprints array. Null: fingerprints are not cross-checked.
  std::shared_ptr<const index::CompiledDesign> design;

  // Filled in: entries refused, by reason (each also counts in the returned number lost).
  uint64_t out_of_bounds = 0;         // record outside the file or the blob
  uint64_t over_limits = 0;           // empty id, id or metadata longer than the limits
  uint64_t id_hash_mismatch = 0;      // the id's bytes do not hash to id_hashes[i]
  uint64_t fingerprint_mismatch = 0;  // the two copies of the fingerprint differ
  // Live entries kept without a fingerprint check (the index section is unreadable).
  uint64_t fingerprints_unchecked = 0;
};

// Best-effort reading of a damaged or older-format segment for recovery: if the header is intact,
// calls `on_entry` for every entry that passes `checks` (when the file is damaged: record in
// bounds, id and metadata within the limits, id matching its hash in id_hashes, fingerprint
// matching the index section's copy); returns how many entries were refused (lost). Corruption if
// the header itself is unreadable. A segment whose whole-file checksum matches (an intact file of
// an older format) is read whole from the sections every version shares (fingerprints, record
// offsets, records). Sets `*file_intact` (if given) to whether the whole-file checksum matches.
Result<uint64_t> SalvageSegment(const std::string& path, int bits,
                                const std::function<void(const SegmentEntry&)>& on_entry,
                                bool* file_intact = nullptr, SalvageChecks* checks = nullptr);

}  // namespace neardup::store

#endif  // NEARDUP_STORE_SEGMENT_H_
