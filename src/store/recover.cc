// RecoverStore: salvages the intact part of a damaged store directory into a fresh segment, log
// and MANIFEST; see include/neardup/store.h.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "common/set_codec.h"
#include "index/table_segment.h"
#include "neardup/pair_rule.h"
#include "neardup/store.h"
#include "store/file_system.h"
#include "store/manifest.h"
#include "store/segment.h"
#include "store/sketch_record.h"
#include "store/store_format.h"
#include "store/wal.h"

namespace neardup {
namespace {

struct RecoveredDoc {
  Fingerprint fingerprint;
  std::string metadata;
  bool tombstone = false;
  bool has_sketch = false;  // kDedup stores
  store::SketchRecord sketch;
  uint64_t seq = 0;  // order of addition
};

// The document of a salvaged segment entry.
RecoveredDoc DocOf(const store::SegmentEntry& e) {
  RecoveredDoc doc;
  doc.fingerprint = e.fingerprint;
  doc.metadata.assign(e.metadata);
  doc.tombstone = e.tombstone;
  doc.seq = e.seq;
  if (e.has_sketch) {
    doc.has_sketch = true;
    doc.sketch.hashes = e.hashes;
    doc.sketch.set.assign(e.set);
    doc.sketch.band_keys.assign(e.band_keys.begin(), e.band_keys.end());
  }
  return doc;
}

// Reads the bits field of a segment or log header without trusting the rest.
int GuessBits(const std::string& dir, const std::vector<std::string>& files) {
  for (const std::string& name : files) {
    Result<std::string> bytes = store::ReadFile(store::JoinPath(dir, name));
    if (!bytes.ok() || bytes->size() < 16) continue;
    uint32_t bits = LoadU32(bytes->data() + 12);
    if (bits == 64 || bits == 128) return static_cast<int>(bits);
  }
  return 64;
}

// One recovery run, in the order of its steps (RecoverStore below).
class Recovery {
 public:
  explicit Recovery(std::string dir) : dir_(std::move(dir)) {}

  // Takes the store's LOCK: recovery never runs beside a process that has the store open.
  Status Lock() {
    const std::string lock_path = store::JoinPath(dir_, store::kLockName);
    lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd_ < 0) return store::ErrnoStatus("open lock file", lock_path, errno);
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0)
      return Status::IoError(dir_ + ": store is open in another process (" + lock_path +
                             " is locked)");
    return Status::Ok();
  }
  ~Recovery() {
    if (lock_fd_ >= 0) ::close(lock_fd_);
  }

  // Which files to read, oldest content first: the MANIFEST's, or every file if it is unreadable.
  Status ChooseInputs() {
    Result<std::vector<std::string>> listed = store::ListDataFiles(dir_);
    if (!listed.ok()) return listed.status();
    for (const std::string& name : *listed) {
      bool is_segment;
      uint64_t number;
      if (store::ParseFileName(name, &is_segment, &number))
        max_number_ = std::max(max_number_, number);
    }
    Result<store::Manifest> manifest = store::ReadManifest(dir_, /*accept_version_1=*/true);
    if (manifest.ok()) {
      manifest_ok_ = true;
      if (manifest->version == 1)
        report_.messages.push_back(dir_ +
                                   ": MANIFEST version 1 (an older neardup): the store is "
                                   "rewritten in the current format");
      bits_ = manifest->bits;
      indexed_k_ = manifest->indexed_k;
      segment_numbers_ = manifest->segments;
      expected_segment_docs_ = manifest->segments_live;
      fingerprint_options_ = manifest->fingerprint_options;
      if (manifest->rule) {
        const store::ManifestRule& r = *manifest->rule;
        rule_ = store::SegmentRule{r.bands, r.rows, r.bucket_window, r.threshold, r.seed};
        containment_ = r;
      }
      if (Result<IndexDesign> d = index::DecodeDesign(manifest->design); d.ok()) design_ = *d;
      // The MANIFEST's log and every later one (a flush in progress seals a memtable in the
      // earlier log while writes go on in the next).
      wal_numbers_.push_back(manifest->wal_number);
      for (const std::string& name : *listed) {
        bool is_segment;
        uint64_t number;
        if (store::ParseFileName(name, &is_segment, &number) && !is_segment &&
            number > manifest->wal_number) {
          wal_numbers_.push_back(number);
        }
      }
      std::sort(wal_numbers_.begin(), wal_numbers_.end());
      max_number_ = std::max(max_number_, manifest->next_file_number);
      return Status::Ok();
    }
    if (manifest.status().code() != StatusCode::kNotFound) {
      report_.messages.push_back(manifest.status().message() +
                                 " (using every file in the directory)");
    }
    bits_ = GuessBits(dir_, *listed);
    uint64_t newest_wal = 0;
    for (const std::string& name : *listed) {
      bool is_segment;
      uint64_t number;
      store::ParseFileName(name, &is_segment, &number);
      if (is_segment) {
        segment_numbers_.push_back(number);
      } else {
        newest_wal = std::max(newest_wal, number);
      }
    }
    std::sort(segment_numbers_.begin(), segment_numbers_.end());
    if (newest_wal > 0) wal_numbers_.push_back(newest_wal);
    return Status::Ok();
  }

  // The index design of the recovered store: the MANIFEST's, else planned as for a new store.
  Status ChooseDesign() {
    if (!design_) {
      StoreOptions defaults;
      PlanRequest request;
      request.bits = bits_;
      request.indexed_k = indexed_k_;
      request.expected_size = defaults.expected_size;
      request.memory_budget = defaults.memory_budget;
      Result<IndexDesign> planned = PlanIndex(request);
      if (!planned.ok()) return planned.status().WithContext(dir_ + ": recover");
      design_ = *planned;
    }
    Result<std::shared_ptr<const index::CompiledDesign>> compiled = index::CompileDesign(*design_);
    if (!compiled.ok()) return compiled.status().WithContext(dir_ + ": recover");
    compiled_ = std::move(*compiled);
    return Status::Ok();
  }

  // Keeps intact segments whole and salvages the readable entries of damaged ones. A kDedup
  // store's rule is restored from the first intact sketch section when the MANIFEST is lost.
  void ReadSegments() {
    for (uint64_t number : segment_numbers_) {
      const std::string path = store::JoinPath(dir_, store::SegmentFileName(number));
      if (!manifest_ok_ && !rule_) {
        std::optional<store::SegmentRule> found;
        (void)store::SalvageSegment(
            path, bits_, [](const store::SegmentEntry&) {}, nullptr, nullptr, &found);
        if (found) {
          rule_ = found;
          // Segments do not record the containment and edited options (the MANIFEST does):
          // RestoreEditedReason finishes this line once every set has been read.
          rule_message_ =
              path +
              ": the store's dedup rule read from this segment; its containment options are "
              "not recorded there: set to 0.9 / 30 / 0.6 (those of a version-3 MANIFEST); nor "
              "are the edited options: ";
        }
      }
      Result<std::shared_ptr<store::Segment>> seg =
          store::Segment::Open(path, compiled_, rule_ ? &*rule_ : nullptr, true);
      auto keep = [&](const store::SegmentEntry& e) { docs_[std::string(e.id)] = DocOf(e); };
      if (seg.ok()) {
        // Intact: every entry, with its sketch, read back through the salvage reader (which
        // also rebuilds each entry's band keys from the band tables).
        (void)store::SalvageSegment(path, bits_, keep);
        ++report_.segments_kept;
        consumed_.push_back(path);
        continue;
      }
      report_.messages.push_back(seg.status().message());
      if (seg.status().code() == StatusCode::kNotFound) continue;
      bool intact = false;
      store::SalvageChecks checks;  // the store's default limits, the recovered index design
      checks.design = compiled_;
      Result<uint64_t> lost = store::SalvageSegment(path, bits_, keep, &intact, &checks);
      if (lost.ok() && *lost == 0 && intact && seg.status().code() == StatusCode::kUnsupported) {
        // An intact segment of an older format: every entry read, rewritten like a kept one.
        ++report_.segments_kept;
        report_.messages.push_back(path + ": every entry read from the older format");
        consumed_.push_back(path);
        continue;
      }
      if (lost.ok()) {
        ++report_.segments_salvaged;
        report_.entries_lost += *lost;
        report_.messages.push_back(
            path + ": salvaged the entries that pass their checks; " + std::to_string(*lost) +
            " lost (" + std::to_string(checks.out_of_bounds) + " out of bounds, " +
            std::to_string(checks.over_limits) + " over the id/metadata limits, " +
            std::to_string(checks.id_hash_mismatch) + " whose id fails its hash, " +
            std::to_string(checks.fingerprint_mismatch) +
            " whose fingerprint differs from the index section's copy, " +
            std::to_string(checks.entry_checksum_mismatch) + " failing their entry checksum)" +
            (checks.fingerprints_unchecked > 0
                 ? "; " + std::to_string(checks.fingerprints_unchecked) +
                       " fingerprints kept unchecked (the index section is unreadable)"
                 : ""));
      } else {
        report_.messages.push_back(lost.status().message());
      }
      damaged_.push_back(path);
    }
  }

  // Documents lost with missing or unreadable segments: the MANIFEST's count of live documents in
  // its segments against what could be read back from them.
  void CountMissingDocuments() {
    uint64_t segment_docs = 0;
    for (const auto& [id, doc] : docs_) segment_docs += doc.tombstone || id.empty() ? 0 : 1;
    if (!manifest_ok_ || segment_docs >= expected_segment_docs_) return;
    const uint64_t deficit = expected_segment_docs_ - segment_docs;
    report_.messages.push_back(std::to_string(deficit) + " of the " +
                               std::to_string(expected_segment_docs_) +
                               " documents the MANIFEST counts in its segments could not be read");
    report_.entries_lost = std::max(report_.entries_lost, deficit);
  }

  // Replays the log up to its first bad record.
  void ReplayLogs() {
    for (const auto& [id, doc] : docs_) next_seq_ = std::max(next_seq_, doc.seq + 1);
    for (uint64_t number : wal_numbers_) {
      const std::string path = store::JoinPath(dir_, store::WalFileName(number));
      Result<store::WalReadResult> read = store::ReadWal(
          path, bits_,
          [&](std::vector<store::WalOp>& ops) {
            for (store::WalOp& op : ops) {
              RecoveredDoc doc;
              doc.fingerprint = op.fingerprint;
              doc.metadata = std::move(op.metadata);
              doc.tombstone = op.type == store::WalOpType::kRemove;
              doc.has_sketch = op.has_sketch;
              doc.sketch = std::move(op.sketch);
              doc.seq = next_seq_++;
              docs_[op.id] = std::move(doc);
            }
            return Status::Ok();
          },
          /*salvage=*/true);
      if (!read.ok()) {
        report_.messages.push_back(read.status().message());
        if (read.status().code() != StatusCode::kNotFound) damaged_.push_back(path);
        continue;
      }
      report_.wal_records_kept += read->records;
      report_.wal_bytes_dropped += read->dropped_bytes;
      if (read->dropped_bytes > 0) {
        report_.messages.push_back(path + ": dropped " + std::to_string(read->dropped_bytes) +
                                   " bytes after the last intact record");
        damaged_.push_back(path);
      } else {
        consumed_.push_back(path);
      }
    }
  }

  // Without the MANIFEST, whether the rule's `edited` reason was on is read from the sets: a store
  // with it on keeps each document's unit set after its shingle set (verification form 3: 20-bit
  // unit sets; form 2 in a store created before them: 32-bit ones, told apart by the encoding's
  // number of low bits), one without it the shingle set alone. The threshold itself is not
  // recorded anywhere but the MANIFEST: a store whose sets hold unit sets gets PairRuleOptions'
  // defaults (and the report says so), one whose sets do not (or that has no set) gets the reason
  // off, so the recorded rule never contradicts what the sets hold. Sets of both kinds, or unit
  // sets of both widths (never written by one store): the reason off and the unit sets dropped,
  // counted.
  void RestoreEditedReason() {
    if (manifest_ok_ || !rule_) return;
    uint64_t units20 = 0, units32 = 0, either = 0, without_units = 0;
    for (const auto& [id, doc] : docs_) {
      if (doc.tombstone || !doc.has_sketch) continue;
      const int form = SetForm(doc.sketch.set, nullptr);
      units32 += form == store::kShingleAndUnitSetForm ? 1 : 0;
      units20 += form == store::kShingleAndUnit20SetForm ? 1 : 0;
      either += form == kEitherUnitForm ? 1 : 0;
      without_units += form == store::kShingleSetForm ? 1 : 0;
    }
    const uint64_t with_units = units20 + units32 + either;
    char buffer[320];
    if (with_units > 0 && without_units == 0 && (units20 == 0 || units32 == 0)) {
      const PairRuleOptions defaults;
      containment_.edited_threshold = defaults.edited_threshold;
      containment_.edited_min_jaccard = defaults.edited_min_jaccard;
      containment_.verification_form =
          units32 > 0 ? store::kShingleAndUnitSetForm : store::kShingleAndUnit20SetForm;
      std::snprintf(buffer, sizeof(buffer),
                    "the sets hold %d-bit unit sets, so the edited reason was on; its threshold "
                    "is not known: set to the default, %g (shingle Jaccard >= %g)",
                    units32 > 0 ? 32 : 20, defaults.edited_threshold, defaults.edited_min_jaccard);
    } else if (with_units > 0) {
      for (auto& [id, doc] : docs_) {
        size_t used = 0;
        if (!doc.tombstone && doc.has_sketch && SetForm(doc.sketch.set, &used) > 1)
          doc.sketch.set.resize(used);
      }
      if (without_units > 0) {
        std::snprintf(buffer, sizeof(buffer),
                      "the sets of %llu documents hold unit sets and those of %llu do not: the "
                      "edited reason off, the unit sets dropped",
                      static_cast<unsigned long long>(with_units),
                      static_cast<unsigned long long>(without_units));
      } else {
        std::snprintf(buffer, sizeof(buffer),
                      "the sets of %llu documents hold 20-bit unit sets and those of %llu 32-bit "
                      "ones: the edited reason off, the unit sets dropped",
                      static_cast<unsigned long long>(units20),
                      static_cast<unsigned long long>(units32));
      }
    } else {
      std::snprintf(buffer, sizeof(buffer), "%s, so the edited reason: off",
                    without_units > 0 ? "the sets hold no unit sets" : "no set to read them from");
    }
    report_.messages.push_back(rule_message_ + buffer);
  }

  // What a sketch's set bytes hold: the verification form (store/manifest.h: 1 the shingle set
  // alone, 2 a shingle set and a 32-bit unit set after it, 3 one with a 20-bit unit set),
  // kEitherUnitForm for a unit set of either width (empty), 0 none (damaged). *shingle_bytes, if
  // given, gets the shingle set's length. The width is the universe the encoder chose L for.
  static constexpr int kEitherUnitForm = 23;
  static int SetForm(std::string_view bytes, size_t* shingle_bytes) {
    std::vector<uint32_t> set;
    size_t used = 0, unit_used = 0;
    if (!DecodeShingleSet(bytes, &set, &used)) return 0;
    if (shingle_bytes) *shingle_bytes = used;
    if (used == bytes.size()) return store::kShingleSetForm;
    const std::string_view units = bytes.substr(used);
    if (!DecodeShingleSet(units, &set, &unit_used) || unit_used != units.size()) return 0;
    if (set.empty()) return kEitherUnitForm;
    const int low = EncodedLowBits(units);
    const bool fits20 = low == SetCodecLowBits(set.size(), 20) && set.back() < (1u << 20);
    const bool fits32 = low == SetCodecLowBits(set.size(), 32);
    if (fits20 && fits32) return kEitherUnitForm;
    if (fits20) return store::kShingleAndUnit20SetForm;
    return fits32 ? store::kShingleAndUnitSetForm : 0;
  }

  // Writes the survivors as one segment plus an empty log and a fresh MANIFEST, renames damaged
  // files to *.corrupt and deletes the consumed intact ones.
  Status WriteRecoveredStore() {
    store::FileSystem* fs = store::FileSystem::Default();
    std::vector<store::SegmentEntry> entries;
    std::vector<const RecoveredDoc*> sources;
    if (!rule_) {
      // A kDedup store whose MANIFEST and segments are all unreadable: the rule is unknown, so
      // the sketches the log holds cannot be kept.
      for (const auto& [id, doc] : docs_) {
        if (doc.has_sketch && !doc.tombstone) {
          report_.messages.push_back(
              "the store's dedup rule could not be read (no MANIFEST, no intact segment): the "
              "documents are kept with their fingerprints only, as a simhash-rule store");
          break;
        }
      }
    }
    uint64_t without_sketch = 0;
    for (const auto& [id, doc] : docs_) {
      if (doc.tombstone || id.empty()) continue;
      store::SegmentEntry e;
      e.id = id;
      e.fingerprint = doc.fingerprint;
      e.metadata = doc.metadata;
      e.seq = doc.seq;
      if (rule_ && doc.has_sketch) {
        e.has_sketch = true;
        e.has_band_keys = static_cast<int>(doc.sketch.band_keys.size()) == rule_->bands;
        e.hashes = doc.sketch.hashes;
        e.set = doc.sketch.set;
      } else if (rule_) {
        ++without_sketch;
      }
      entries.push_back(e);
      sources.push_back(&doc);
    }
    if (without_sketch > 0) {
      report_.sketches_lost = without_sketch;
      report_.messages.push_back(
          std::to_string(without_sketch) +
          " documents are kept without their sketch (it could not be read): fingerprint queries "
          "find them, the dedup rule does not; add their texts again to restore it");
    }
    auto band_rows = [&](int band, const std::vector<store::SegmentEntry>& entries,
                         std::vector<index::KeyRow<uint32_t>>* rows) {
      for (size_t i = 0; i < entries.size(); ++i) {
        if (!entries[i].has_band_keys) continue;
        rows->push_back(
            {sources[i]->sketch.band_keys[band], static_cast<uint32_t>(i), entries[i].seq});
      }
    };
    report_.documents = entries.size();
    store::Manifest fresh;
    fresh.bits = bits_;
    fresh.indexed_k = indexed_k_;
    fresh.design = index::EncodeDesign(*design_);
    fresh.fingerprint_options = fingerprint_options_;
    if (rule_) {
      store::ManifestRule rule;
      rule.threshold = rule_->threshold;
      rule.bands = rule_->bands;
      rule.rows = rule_->rows;
      rule.bucket_window = rule_->bucket_window;
      rule.seed = rule_->seed;
      rule.containment_threshold = containment_.containment_threshold;
      rule.containment_min_shingles = containment_.containment_min_shingles;
      rule.containment_min_ratio = containment_.containment_min_ratio;
      rule.edited_threshold = containment_.edited_threshold;
      rule.edited_min_jaccard = containment_.edited_min_jaccard;
      rule.verification_form = containment_.verification_form;
      fresh.rule = rule;
    }
    uint64_t next = max_number_ + 1;
    if (!entries.empty()) {
      const uint64_t number = next++;
      NEARDUP_RETURN_IF_ERROR(
          store::WriteSegment(fs, store::JoinPath(dir_, store::SegmentFileName(number)), compiled_,
                              std::move(entries), rule_ ? &*rule_ : nullptr, band_rows));
      fresh.segments.push_back(number);
    }
    fresh.wal_number = next++;
    fresh.next_file_number = next;
    fresh.segments_live = report_.documents;
    Result<std::unique_ptr<store::WalWriter>> wal =
        store::WalWriter::Create(fs, dir_, fresh.wal_number, bits_);
    if (!wal.ok()) return wal.status();
    for (const std::string& path : damaged_) {
      NEARDUP_RETURN_IF_ERROR(fs->Rename(path, path + ".corrupt"));
    }
    NEARDUP_RETURN_IF_ERROR(store::WriteManifest(fs, dir_, fresh));
    for (const std::string& path : consumed_) (void)fs->Remove(path);
    return Status::Ok();
  }

  RecoveryReport& report() { return report_; }

 private:
  const std::string dir_;
  int lock_fd_ = -1;
  RecoveryReport report_;
  int bits_ = 64;
  int indexed_k_ = 3;
  bool manifest_ok_ = false;
  uint64_t max_number_ = 0;
  uint64_t expected_segment_docs_ = 0;  // live documents the MANIFEST counts in its segments
  std::string fingerprint_options_;
  std::vector<uint64_t> segment_numbers_, wal_numbers_;
  std::optional<IndexDesign> design_;
  std::optional<store::SegmentRule> rule_;  // a kDedup store's rule
  // Its containment and edited options and verification form: the MANIFEST's, else those of a
  // version-3 MANIFEST and the edited reason as the sets say (RestoreEditedReason).
  store::ManifestRule containment_;
  std::string rule_message_;  // the report's line on a rule read from a segment
  uint64_t next_seq_ = 0;     // for the log's adds
  std::shared_ptr<const index::CompiledDesign> compiled_;
  std::unordered_map<std::string, RecoveredDoc> docs_;
  std::vector<std::string> damaged_;   // renamed to *.corrupt
  std::vector<std::string> consumed_;  // intact inputs, deleted once the new store is written
};

}  // namespace

Result<RecoveryReport> RecoverStore(const std::string& dir) {
  Recovery recovery(dir);
  NEARDUP_RETURN_IF_ERROR(recovery.Lock());
  NEARDUP_RETURN_IF_ERROR(recovery.ChooseInputs());
  NEARDUP_RETURN_IF_ERROR(recovery.ChooseDesign());
  recovery.ReadSegments();
  recovery.CountMissingDocuments();
  recovery.ReplayLogs();
  recovery.RestoreEditedReason();
  NEARDUP_RETURN_IF_ERROR(recovery.WriteRecoveredStore());
  return std::move(recovery.report());
}

}  // namespace neardup
