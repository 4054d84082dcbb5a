// DocumentStore implementation: memtable + write-ahead log + memory-mapped segments, group
// commit, flush and background compaction, and the duplicate rule applied to them (the pair rule
// of neardup/pair_rule.h over candidates from the band and whitespace-hash tables, or the SimHash
// radius); see include/neardup/store.h and docs/storage_format.md.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/set_codec.h"
#include "common/string_hash.h"
#include "index/key_table.h"
#include "index/table_segment.h"
#include "neardup/dedup.h"
#include "neardup/fingerprinter.h"
#include "neardup/pair_rule.h"
#include "neardup/permuted_index.h"
#include "neardup/store.h"
#include "store/manifest.h"
#include "store/memtable.h"
#include "store/segment.h"
#include "store/sketch_record.h"
#include "store/store_format.h"
#include "store/wal.h"

namespace neardup {
namespace {

using store::Manifest;
using store::MemTable;
using store::Segment;
using store::SegmentEntry;
using store::SegmentHit;
using store::SketchRecord;
using store::WalOp;
using store::WalOpType;
using store::WalWriter;

// A bucket (band key, whitespace-free hash) yields at most `bucket_window` live documents to a
// check; walking it stops after this many times as many versions (replaced or removed ones
// included), so a bucket full of overwritten documents costs a bounded walk too.
constexpr size_t kMaxVisitsPerWindow = 8;

constexpr const char* kVerificationForm = "narrowed32-elias-fano";
// ... with the `edited` reason on: the shingle set, then the 20-bit unit set, both so (form 3);
// in a store made with 32-bit unit sets, those (form 2).
constexpr const char* kUnits20VerificationForm = "narrowed32-elias-fano+units20";
constexpr const char* kUnitsVerificationForm = "narrowed32-elias-fano+units";
static_assert(store::UnitBitsOfForm(store::kShingleAndUnit20SetForm) ==
              ShingleSimilarity::kUnitBits);

// Keeps the first `limit` duplicates (0: all).
void Truncate(size_t limit, CheckResult* result) {
  if (limit == 0 || result->duplicates.size() <= limit) return;
  result->duplicates.resize(limit);
  result->truncated = true;
}

bool ByDistanceThenId(const StoredDocument& a, const StoredDocument& b) {
  return a.distance != b.distance ? a.distance < b.distance : a.id < b.id;
}
bool BySimilarityThenId(const StoredDocument& a, const StoredDocument& b) {
  return a.similarity != b.similarity ? a.similarity > b.similarity : a.id < b.id;
}

// Dedup's options with the containment and edited options a kDedup store's MANIFEST records.
DedupOptions RecordedContainment(const store::ManifestRule& rule) {
  DedupOptions dedup;
  dedup.containment_threshold = rule.containment_threshold;
  dedup.containment_min_shingles = rule.containment_min_shingles;
  dedup.containment_min_ratio = rule.containment_min_ratio;
  dedup.edited_threshold = rule.edited_threshold;
  dedup.edited_min_jaccard = rule.edited_min_jaccard;
  return dedup;
}

// The pair rule of a kDedup store as its MANIFEST records it: dedup's (ResolvePairRule) for the
// store's threshold and recorded containment and edited options.
PairRuleOptions StorePairRule(const store::ManifestRule& rule) {
  DedupOptions dedup = RecordedContainment(rule);
  dedup.lsh.threshold = rule.threshold;
  return ResolvePairRule(dedup);
}

// The bands and rows dedup uses for `lsh` with the containment options of `rule` (ResolveDedupLsh
// with the store's pair rule: down to the lowest Jaccard it accepts).
Result<LshParameters> DedupLshParameters(const MinHashLshOptions& lsh,
                                         const store::ManifestRule& rule) {
  DedupOptions dedup = RecordedContainment(rule);
  dedup.lsh = lsh;
  Result<MinHashLshOptions> resolved = ResolveDedupLsh(dedup);
  if (!resolved.ok()) return resolved.status();
  return *resolved->parameters;
}

// The operations of a commit group decided so far but not yet applied to the memtable: what the
// group's later checks see, with the group's adds indexed like a tiny memtable.
struct Pending {
  std::vector<WalOp> ops;
  std::vector<const DocumentSketch*> sketches;  // per op: an add's sketch (kDedup), else null
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> latest;  // id -> op
  // The adds' buckets, indexed only when a check of the group needs them (a bulk AddBatch never
  // does): ops [0, indexed) are in them.
  mutable std::unordered_map<uint64_t, std::vector<uint32_t>> bands;     // band << 32 | key -> ops
  mutable std::unordered_map<uint64_t, std::vector<uint32_t>> squeezed;  // hash -> ops
  mutable size_t indexed = 0;

  bool Shadows(std::string_view id) const { return latest.find(id) != latest.end(); }
  // The op is the group's live version of its id.
  bool Live(size_t op) const {
    auto it = latest.find(std::string_view(ops[op].id));
    return it != latest.end() && it->second == op && ops[op].type == WalOpType::kAdd;
  }
};

// A stored (or pending) document a check looks at.
struct Candidate {
  std::string_view id;
  Fingerprint fingerprint;
  std::string_view metadata;
  store::PairHashes hashes;
  std::string_view set_bytes;                    // a stored document's encoded set(s)
  const std::vector<uint32_t>* set = nullptr;    // a pending document's set
  const std::vector<uint32_t>* units = nullptr;  // ... and its unit set
  bool lsh = false;                              // shares a band bucket (else only the hash)
};

class DocumentStoreImpl : public DocumentStore {
 public:
  DocumentStoreImpl(std::string dir, const StoreOptions& options)
      : dir_(std::move(dir)), options_(options) {}
  ~DocumentStoreImpl() override { (void)Close(); }

  Status Init();
  // The steps of Init, in order.
  Status ValidateOptions();
  Status OpenDirectoryAndLock();
  Result<Manifest> ReadOrCreateManifest();
  Result<Manifest> CreateManifest();
  Status AdoptManifest(const Manifest& manifest);
  Status OpenSegments();
  Status ReplayLogs(std::string* wal_path, store::WalReadResult* replay);
  Status ResumeLog(const std::string& wal_path, const store::WalReadResult& replay);
  void RemoveLeftoverFiles();

  Status Add(const DocumentInput& doc, bool* replaced) override;
  Status AddBatch(std::span<const DocumentInput> docs) override;
  Result<std::vector<CheckResult>> CheckBatch(std::span<const DocumentInput> docs,
                                              const CheckOptions& options) override;
  Result<CheckResult> CheckAndAdd(const DocumentInput& doc, int k, bool always_add) override;
  std::optional<MinHashLshOptions> LshOptions() const override;
  bool SketchesNeedUnits() const override;
  int SketchUnitBits() const override;
  Result<std::vector<StoredDocument>> Search(const Fingerprint& query, int k,
                                             size_t limit) const override;
  Result<StoredDocument> Get(std::string_view id) const override;
  Status Remove(std::string_view id) override;
  StoreStats Stats() const override;
  StoreHealth Health() const override;
  Status Flush() override;
  Status Compact() override;
  Status Close() override;

 private:
  // One caller waiting to commit.
  struct Writer {
    enum Kind { kAdd, kRemove, kCheck, kFlush } kind = kAdd;
    std::span<const DocumentInput> docs;
    std::vector<SketchRecord> sketches;  // per doc, kDedup stores (made before queueing)
    std::string_view remove_id;
    CheckOptions check;                           // kCheck
    std::vector<CheckResult>* results = nullptr;  // kCheck: one per doc
    Status status;
    bool replaced = false;
    bool done = false;
    std::condition_variable cv;
  };

  // The design of a new store: options_.design, or planned within the budget.
  Result<IndexDesign> PlanStoreDesign(int bits, int indexed_k) const;
  // Refuses explicit options that differ from what the store was created with; sets design_.
  Status CheckCompatible(const Manifest& manifest);
  // The rule's options from options_ (a new store) or the MANIFEST; sets bands_ and friends.
  Status ResolveRule(const Manifest* manifest, std::optional<store::ManifestRule>* rule);
  // ResolveRule's steps: a new store's rule from options_; an existing store's recorded rule
  // against the options given (`where` starts the error message).
  Status ResolveNewRule(std::optional<store::ManifestRule>* rule_out) const;
  Status CheckRecordedRule(const store::ManifestRule& recorded, const std::string& where) const;
  // Whether StoreOptions sets any containment or edited option.
  bool ContainmentGiven() const {
    return options_.containment_threshold || options_.containment_min_shingles ||
           options_.containment_min_ratio || options_.edited_threshold ||
           options_.edited_min_jaccard;
  }
  // allow_empty_id: a lookup (AddMode::kNever) needs no id.
  Status ValidateDoc(const DocumentInput& doc, bool allow_empty_id = false) const;
  Status ValidateK(const Fingerprint& fp, int k) const;
  // ValidateDoc for every doc (naming its index), then the sketch records of a kDedup store.
  Status PrepareDocs(std::span<const DocumentInput> docs,
                     std::vector<SketchRecord>* sketches) const;
  Status Commit(Writer* writer);
  Status CommitGroup(std::vector<Writer*>& group, bool force_flush);
  // Commit leader: seals mem_ as imm_ (after waiting for the previous one's flush) and hands it
  // to the background thread, or with `wait` writes everything in memory to segments now.
  Status FlushMemTableLocked(bool wait);
  // Seals mem_ (non-empty, imm_ null) as imm_ behind a new log; commit leader only.
  Status SealMemTableLocked();
  // Writes imm_ (if any) to a segment and swaps the MANIFEST; times itself.
  Status FlushImmutable();
  Status FlushImmutableNow();
  // Removes the logs numbered [first, active_wal_number_): consumed once the MANIFEST that no
  // longer names them is durable (a failure leaves them for the next open to remove).
  void RemoveConsumedLogs(uint64_t first);
  Status WriteManifestLocked(const std::vector<uint64_t>& numbers);  // manifest_mu_ held
  void BackgroundLoop();
  void MaybeScheduleCompaction();
  // Health bookkeeping: a failed write makes the store degraded; a later good one makes it ok.
  void NoteWriteError(const Status& status);
  void NoteWriteOk();
  // Appends one record to the log and syncs it per the SyncMode; on failure the record's bytes are
  // truncated away again so the log stays a sequence of whole records (commit leader only).
  Status AppendToLog(std::string_view record);
  // Before a write after a failed one: makes sure the log ends at its last whole record.
  Status RepairLog();

  // state_mu_ held (shared or exclusive).
  std::optional<StoredDocument> LookupLocked(std::string_view id) const;
  bool ShadowedLocked(std::string_view id, size_t segment_index) const;
  // Every live document within k, sorted by (distance, id); only the `limit` best (0 = all) are
  // returned, and only their metadata is copied.
  Status SearchLocked(const Fingerprint& query, int k, std::vector<StoredDocument>* out,
                      size_t limit = 0) const;
  // The duplicates of `doc` under the store's rule among the stored documents and the live ops
  // of `pending` (null: none), sorted (see CheckResult).
  void FindDuplicatesLocked(const DocumentInput& doc, int k, const Pending* pending,
                            std::vector<StoredDocument>* out) const;
  // CommitGroup's decisions, under the shared state lock (see there).
  int64_t DecideGroupLocked(std::vector<Writer*>& group, Pending* pending) const;
  // kDedup: the candidates of `doc` (whitespace-free hash, then each band's bucket).
  void DedupCandidatesLocked(const DocumentInput& doc, const Pending* pending,
                             std::vector<Candidate>* out) const;
  // DedupCandidatesLocked's gathering of one document's candidates (each once, by id), and its
  // two steps.
  struct CandidateSink;
  void WhitespaceCandidatesLocked(CandidateSink& sink) const;
  void BandCandidatesLocked(CandidateSink& sink) const;
  // Adds the ops of `pending` not yet indexed to its band and whitespace indexes.
  void IndexPending(const Pending& pending) const;
  // The segments a background compaction merges: the newest ones, as long as the next older one
  // is no larger than all of them together (size-tiered: each document is rewritten about
  // log2(store / memtable) times). Returns the index of the first; segments_.size() for none.
  size_t ChooseCompactionInputsLocked() const;
  // Merges all segments, or (!all) the ones ChooseCompactionInputsLocked picks, into one; times
  // CompactRangeNow.
  Status CompactRange(bool all);
  Status CompactRangeNow(bool all);

  const std::string dir_;
  StoreOptions options_;
  Env* fs_ = Env::Default();
  int bits_ = 64;
  int indexed_k_ = 3;
  std::shared_ptr<const index::CompiledDesign> design_;  // the store's index design
  std::string fingerprint_options_;
  double planned_bytes_per_fingerprint_ = 0;
  // The rule: bands_ == 0 for a kSimHash store; else the resolved LSH options (bands, rows set).
  int bands_ = 0;
  MinHashLshOptions lsh_;
  PairRuleOptions pair_rule_options_;  // kDedup: the recorded pair rule (StorePairRule)
  // kDedup with the edited reason on: sketches carry unit sets, stored after the shingle sets.
  bool with_units() const { return bands_ > 0 && pair_rule_options_.edited_threshold > 0; }
  // The recorded verification form (store/manifest.h; kDedup): whether unit sets are 20 or 32 bits.
  uint32_t verification_form_ = store::kShingleSetForm;
  int unit_bits() const { return with_units() ? store::UnitBitsOfForm(verification_form_) : 0; }
  uint64_t lsh_tag_ = 0;
  store::SegmentRule segment_rule_;  // the rule as segments record it (kDedup)
  // kDedup: THE pair rule (neardup/pair_rule.h) with the store's recorded threshold and
  // containment options (StorePairRule), corpus-independent (no boilerplate frequencies): what
  // dedup decides with those options.
  std::optional<PairRule> pair_rule_;
  // The rule segments are opened and written with: null for a kSimHash store.
  const store::SegmentRule* segment_rule() const { return bands_ > 0 ? &segment_rule_ : nullptr; }
  int lock_fd_ = -1;
  bool reading_beside_writer_ = false;  // read-only, opened while another process writes

 public:
  bool reading_beside_writer() const { return reading_beside_writer_; }

 private:
  bool closed_ = true;

  mutable std::shared_mutex state_mu_;  // guards segments_, segment_numbers_, mem_, live_
  std::vector<std::shared_ptr<Segment>> segments_;  // oldest first
  std::vector<uint64_t> segment_numbers_;
  std::unique_ptr<MemTable> mem_;
  // A full memtable sealed and being written to a segment by the background thread (null when
  // none): searched between mem_ and the segments meanwhile, so writers never wait for a flush
  // unless mem_ fills up again before it ends.
  std::unique_ptr<MemTable> imm_;
  uint64_t live_ = 0;

  std::mutex manifest_mu_;  // guards the fields below and MANIFEST writes
  uint64_t next_file_number_ = 1;
  // The oldest log the MANIFEST replays from (imm_'s while it is being flushed) and the log
  // writers append to; every log numbered from wal_number_ on is replayed at open.
  uint64_t wal_number_ = 0;
  uint64_t active_wal_number_ = 0;
  uint64_t imm_live_ = 0;  // live_ when imm_ was sealed (the segments' count once it is written)
  uint64_t segments_live_ = 0;  // live documents counting segments only (as of the last flush)

  std::mutex writer_mu_;
  std::deque<Writer*> writers_;
  std::unique_ptr<WalWriter> wal_;  // used by the commit leader only
  bool log_needs_repair_ = false;   // a failed write may have left bytes after the last record

  mutable std::mutex health_mu_;
  StoreHealth health_;

  std::mutex compaction_mu_;
  std::condition_variable compaction_cv_;
  bool compaction_requested_ = false;
  bool flush_requested_ = false;
  bool stopping_ = false;
  std::thread compaction_thread_;  // the background thread: flushes imm_, then compacts
  std::mutex flush_run_mu_;        // one flush (segment write of imm_) at a time
  std::mutex compact_run_mu_;      // one compaction at a time

  mutable std::atomic<uint64_t> searches_{0};
  std::atomic<uint64_t> wal_bytes_{0};  // size of the current log
  std::atomic<uint64_t> wal_syncs_{0}, writes_{0}, flushes_{0}, compactions_{0};
  std::atomic<uint64_t> flush_nanos_{0}, compaction_nanos_{0};
  double open_seconds_ = 0;
  // The log tail dropped at open (see StoreStats::wal_dropped*); written once, in Open.
  uint64_t wal_dropped_bytes_ = 0;
  std::string wal_dropped_;
  std::string wal_dropped_file_;
  Status KeepDroppedTail(const std::string& wal_path, const store::WalReadResult& replay);
};

// Opening a store: the steps below, in order. A read-only open stops after the replay: it writes
// nothing (no log truncation, no clean-up) and runs no background compaction.
Status DocumentStoreImpl::Init() {
  const auto start = std::chrono::steady_clock::now();
  NEARDUP_RETURN_IF_ERROR(ValidateOptions());
  NEARDUP_RETURN_IF_ERROR(OpenDirectoryAndLock());
  Result<Manifest> manifest = ReadOrCreateManifest();
  if (!manifest.ok()) return manifest.status();
  NEARDUP_RETURN_IF_ERROR(AdoptManifest(*manifest));
  NEARDUP_RETURN_IF_ERROR(OpenSegments());
  std::string wal_path;
  store::WalReadResult replay;
  NEARDUP_RETURN_IF_ERROR(ReplayLogs(&wal_path, &replay));
  if (options_.read_only) {
    wal_bytes_.store(replay.valid_bytes);
  } else {
    NEARDUP_RETURN_IF_ERROR(ResumeLog(wal_path, replay));
    RemoveLeftoverFiles();
  }
  closed_ = false;
  if (!options_.read_only) compaction_thread_ = std::thread([this] { BackgroundLoop(); });
  open_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

// Range checks of the creation options, the file layer; a read-only open creates nothing and
// compacts nothing.
Status DocumentStoreImpl::ValidateOptions() {
  if (options_.bits && *options_.bits != 64 && *options_.bits != 128) {
    return Status::InvalidArgument("StoreOptions.bits must be 64 or 128, got " +
                                   std::to_string(*options_.bits));
  }
  if (options_.indexed_k && (*options_.indexed_k < 0 || *options_.indexed_k > 15)) {
    return Status::InvalidArgument("StoreOptions.indexed_k must be in [0, 15], got " +
                                   std::to_string(*options_.indexed_k));
  }
  if (options_.env != nullptr) fs_ = options_.env;
  if (options_.read_only) {
    options_.create_if_missing = false;
    options_.compaction_trigger = 0;
  }
  return Status::Ok();
}

// The directory (made when creating) and its LOCK: exclusive for a writer; shared for a reader,
// or none while a writer has it (reading_beside_writer_).
Status DocumentStoreImpl::OpenDirectoryAndLock() {
  struct stat st;
  if (::stat(dir_.c_str(), &st) != 0) {
    if (!options_.create_if_missing) return Status::NotFound(dir_ + ": no such store directory");
    if (::mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST) {
      return store::ErrnoStatus("mkdir", dir_, errno);
    }
  } else if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(dir_ + ": not a directory");
  }
  const std::string lock_path = store::JoinPath(dir_, store::kLockName);
  lock_fd_ = options_.read_only ? ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC)
                                : ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0 && !(options_.read_only && errno == ENOENT)) {
    return store::ErrnoStatus("open lock file", lock_path, errno);
  }
  if (lock_fd_ >= 0 && ::flock(lock_fd_, (options_.read_only ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) return store::ErrnoStatus("lock", lock_path, err);
    if (!options_.read_only) {
      return Status::IoError(dir_ + ": store is already open by another process (" + lock_path +
                             " is locked)");
    }
    // A writer (`neardup serve`) has the store: read a snapshot without the lock. Every file is
    // written whole and renamed into place (MANIFEST, segments) or only appended to (the log), so
    // what the MANIFEST names is complete; a log record being written is a torn tail, not read. A
    // file removed meanwhile (a compaction or log rotation finished) makes Open try again.
    ::close(lock_fd_);
    lock_fd_ = -1;
    reading_beside_writer_ = true;
  }
  return Status::Ok();
}

// The MANIFEST, or for a new directory (create_if_missing) the one CreateManifest writes.
Result<Manifest> DocumentStoreImpl::ReadOrCreateManifest() {
  Result<Manifest> manifest = store::ReadManifest(dir_);
  if (manifest.ok()) {
    if (options_.error_if_exists) return Status::AlreadyExists(dir_ + ": a store exists already");
    return manifest;
  }
  if (manifest.status().code() != StatusCode::kNotFound) return manifest.status();
  // No MANIFEST: a new store, unless data files are lying around.
  Result<std::vector<std::string>> files = store::ListDataFiles(dir_);
  if (!files.ok()) return files.status();
  if (!files->empty()) {
    return Status::Corruption(store::JoinPath(dir_, store::kManifestName) +
                              ": missing although data files exist; run `neardup index recover " +
                              dir_ + "`");
  }
  if (!options_.create_if_missing) return Status::NotFound(dir_ + ": no store here (no MANIFEST)");
  return CreateManifest();
}

// A new store: its width, indexed_k, rule and index design from options_, an empty first log,
// and the MANIFEST recording them.
Result<Manifest> DocumentStoreImpl::CreateManifest() {
  Manifest m;
  m.bits = options_.bits.value_or(64);
  if (!options_.fingerprint_options.empty()) {
    // What the fingerprints mean must be readable, and say their width.
    Result<FingerprintOptions> recorded = ParseFingerprintOptions(options_.fingerprint_options);
    if (!recorded.ok()) return recorded.status().WithContext("StoreOptions.fingerprint_options");
    if (!options_.bits) m.bits = recorded->bits;
    if (recorded->bits != m.bits) {
      return Status::InvalidArgument("StoreOptions.fingerprint_options are for " +
                                     std::to_string(recorded->bits) + "-bit fingerprints, " +
                                     "StoreOptions.bits is " + std::to_string(m.bits));
    }
  }
  m.indexed_k = options_.indexed_k.value_or(3);
  NEARDUP_RETURN_IF_ERROR(ResolveRule(nullptr, &m.rule));
  Result<IndexDesign> design = PlanStoreDesign(m.bits, m.indexed_k);
  if (!design.ok()) return design.status();
  m.design = index::EncodeDesign(*design);
  m.fingerprint_options = options_.fingerprint_options;
  planned_bytes_per_fingerprint_ = design->bytes_per_fingerprint;
  m.wal_number = 1;
  m.next_file_number = 2;
  Result<std::unique_ptr<WalWriter>> wal = WalWriter::Create(fs_, dir_, m.wal_number, m.bits);
  if (!wal.ok()) return wal.status();
  NEARDUP_RETURN_IF_ERROR(store::WriteManifest(fs_, dir_, m));
  return m;
}

// Checks the MANIFEST against options_ and this build (design, fingerprint options, rule) and
// takes the store's state from it.
Status DocumentStoreImpl::AdoptManifest(const Manifest& manifest) {
  NEARDUP_RETURN_IF_ERROR(CheckCompatible(manifest));
  if (!manifest.fingerprint_options.empty()) {
    // As LevelDB checks its comparator's name: the recorded options must be ones this build reads.
    const std::string where = store::JoinPath(dir_, store::kManifestName);
    Result<FingerprintOptions> recorded = ParseFingerprintOptions(manifest.fingerprint_options);
    if (!recorded.ok()) {
      return Status::Unsupported(where + ": recorded " + recorded.status().message() +
                                 " (written by another version of neardup?)");
    }
    if (recorded->bits != manifest.bits) {
      return Status::Corruption(where + ": recorded fingerprint options are for " +
                                std::to_string(recorded->bits) + "-bit fingerprints, the store " +
                                "holds " + std::to_string(manifest.bits) + "-bit ones");
    }
  }
  {
    std::optional<store::ManifestRule> rule;
    NEARDUP_RETURN_IF_ERROR(ResolveRule(&manifest, &rule));
  }
  bits_ = manifest.bits;
  indexed_k_ = manifest.indexed_k;
  options_.bits = bits_;
  options_.indexed_k = indexed_k_;
  fingerprint_options_ = manifest.fingerprint_options;
  next_file_number_ = manifest.next_file_number;
  wal_number_ = manifest.wal_number;
  segments_live_ = manifest.segments_live;
  segment_numbers_ = manifest.segments;
  return Status::Ok();
}

// Opens the MANIFEST's segments (checksums verified unless told not to) and an empty memtable
// whose sequence numbers go on from theirs.
Status DocumentStoreImpl::OpenSegments() {
  uint64_t next_seq = 0;
  for (uint64_t number : segment_numbers_) {
    Result<std::shared_ptr<Segment>> seg =
        Segment::Open(store::JoinPath(dir_, store::SegmentFileName(number)), design_,
                      segment_rule(), options_.verify_checksums_on_open);
    if (!seg.ok()) return seg.status();
    next_seq = std::max(next_seq, (*seg)->next_seq());
    segments_.push_back(*seg);
  }
  mem_ = std::make_unique<MemTable>(design_, bands_, next_seq);
  live_ = segments_live_;
  return Status::Ok();
}

// Replays the MANIFEST's log and every later one into the memtable, in order. `wal_path`: the last
// log read (the one writes go on in); `replay`: what reading it found (a dropped tail is recorded
// in wal_dropped_*).
Status DocumentStoreImpl::ReplayLogs(std::string* wal_path_out, store::WalReadResult* replay_out) {
  // The logs to replay: the MANIFEST's and every later one (a memtable sealed by a flush that a
  // crash interrupted is in the earlier log, the writes after it in the later one), in order.
  std::vector<uint64_t> logs = {wal_number_};
  if (Result<std::vector<std::string>> files = store::ListDataFiles(dir_); files.ok()) {
    for (const std::string& name : *files) {
      bool is_segment;
      uint64_t number;
      if (store::ParseFileName(name, &is_segment, &number) && !is_segment && number > wal_number_) {
        logs.push_back(number);
      }
    }
  }
  std::sort(logs.begin(), logs.end());
  std::string wal_path;
  Result<store::WalReadResult> replay = Status::Internal("no log replayed");
  for (uint64_t log : logs) {
    const std::string path = store::JoinPath(dir_, store::WalFileName(log));
    struct stat log_stat;
    if (log != logs.front() && log == logs.back() && ::stat(path.c_str(), &log_stat) == 0 &&
        static_cast<uint64_t>(log_stat.st_size) <= store::kWalHeaderSize) {
      // A new log whose creation a crash cut short (no record can be in a log before its header
      // is synced): the writes go on in the previous one.
      if (!options_.read_only) (void)fs_->Remove(path);
      break;
    }
    wal_path = path;
    replay = store::ReadWal(wal_path, bits_, [&](std::vector<WalOp>& ops) {
      for (WalOp& op : ops) {
        const bool exists = LookupLocked(op.id).has_value();
        if (op.type == WalOpType::kAdd && !exists) ++live_;
        if (op.type == WalOpType::kRemove && exists) --live_;
        mem_->Put(std::move(op));
      }
      return Status::Ok();
    });
    if (!replay.ok()) {
      if (replay.status().code() == StatusCode::kNotFound) {
        return Status::Corruption(wal_path + ": log named by MANIFEST is missing");
      }
      return replay.status();
    }
    active_wal_number_ = log;
  }
  if (replay->dropped_bytes > 0) {
    wal_dropped_bytes_ = replay->dropped_bytes;
    wal_dropped_ = wal_path + ": " + std::to_string(replay->dropped_bytes) +
                   " bytes dropped at offset " + std::to_string(replay->valid_bytes) + ": " +
                   replay->dropped_reason;
    if (options_.read_only) wal_dropped_ += " (read-only open: the log is left as it is)";
  }
  *wal_path_out = wal_path;
  *replay_out = std::move(*replay);
  return Status::Ok();
}

// A writer goes on appending to the last log (its dropped tail kept aside, then cut off).
Status DocumentStoreImpl::ResumeLog(const std::string& wal_path,
                                    const store::WalReadResult& replay) {
  if (replay.dropped_bytes > 0) NEARDUP_RETURN_IF_ERROR(KeepDroppedTail(wal_path, replay));
  Result<std::unique_ptr<WalWriter>> wal =
      WalWriter::OpenForAppend(fs_, wal_path, replay.valid_bytes);
  if (!wal.ok()) return wal.status();
  wal_ = std::move(*wal);
  wal_bytes_.store(wal_->size());
  return Status::Ok();
}

// Files not named by the MANIFEST are leftovers of an interrupted flush or compaction.
void DocumentStoreImpl::RemoveLeftoverFiles() {
  Result<std::vector<std::string>> files = store::ListDataFiles(dir_);
  if (!files.ok()) return;
  for (const std::string& name : *files) {
    bool is_segment;
    uint64_t number;
    if (!store::ParseFileName(name, &is_segment, &number)) continue;
    bool referenced = is_segment ? std::find(segment_numbers_.begin(), segment_numbers_.end(),
                                             number) != segment_numbers_.end()
                                 : number >= wal_number_;
    if (!referenced && number >= 1) (void)fs_->Remove(store::JoinPath(dir_, name));
  }
}

// A dropped log tail is kept beside the log as <log>.tail-<offset>.corrupt (never deleted, like
// the *.corrupt files of `index recover`) before the log is truncated, unless it is zeros only.
Status DocumentStoreImpl::KeepDroppedTail(const std::string& wal_path,
                                          const store::WalReadResult& replay) {
  if (replay.dropped_all_zero) return Status::Ok();
  Result<std::string> contents = store::ReadFile(wal_path);
  if (!contents.ok()) return contents.status();
  const std::string aside = wal_path + ".tail-" + std::to_string(replay.valid_bytes) + ".corrupt";
  Result<std::unique_ptr<store::WritableFile>> file = fs_->NewWritableFile(aside);
  if (!file.ok()) return file.status().WithContext("keeping the dropped log tail");
  Status status = (*file)->Append(std::string_view(*contents).substr(replay.valid_bytes));
  if (status.ok()) status = (*file)->Sync();
  if (status.ok()) status = fs_->SyncDir(dir_);
  if (!status.ok()) return status.WithContext("keeping the dropped log tail in " + aside);
  wal_dropped_file_ = aside;
  wal_dropped_ += "; kept in " + aside;
  return Status::Ok();
}

Result<IndexDesign> DocumentStoreImpl::PlanStoreDesign(int bits, int indexed_k) const {
  if (options_.design) {
    IndexDesign design = *options_.design;
    if (design.bits != bits || design.indexed_k != indexed_k)
      return Status::InvalidArgument("StoreOptions.design is for " + std::to_string(design.bits) +
                                     " bits and indexed_k " + std::to_string(design.indexed_k) +
                                     ", the store is " + std::to_string(bits) + "-bit, indexed_k " +
                                     std::to_string(indexed_k));
    return design;
  }
  PlanRequest request;
  request.bits = bits;
  request.indexed_k = indexed_k;
  request.expected_size = std::max(1.0, options_.expected_size);
  request.memory_budget = options_.memory_budget;
  Result<IndexDesign> plan = PlanIndex(request);
  if (!plan.ok()) {
    return plan.status().WithContext(dir_ + ": index design for " +
                                     std::to_string(static_cast<uint64_t>(request.expected_size)) +
                                     " documents within " + options_.memory_budget.ToString());
  }
  return plan;
}

Status DocumentStoreImpl::CheckCompatible(const Manifest& manifest) {
  const std::string where = dir_ + ": store was created with ";
  if (options_.bits && *options_.bits != manifest.bits)
    return Status::InvalidArgument(where + std::to_string(manifest.bits) +
                                   "-bit fingerprints, not " + std::to_string(*options_.bits));
  if (options_.indexed_k && *options_.indexed_k != manifest.indexed_k)
    return Status::InvalidArgument(where + "indexed_k " + std::to_string(manifest.indexed_k) +
                                   ", not " + std::to_string(*options_.indexed_k));
  if (!options_.fingerprint_options.empty() &&
      options_.fingerprint_options != manifest.fingerprint_options)
    return Status::InvalidArgument(where + "fingerprint options \"" + manifest.fingerprint_options +
                                   "\", not \"" + options_.fingerprint_options +
                                   "\" (fingerprints made with other options are not comparable)");
  Result<IndexDesign> design = index::DecodeDesign(manifest.design);
  if (!design.ok())
    return Status::Corruption(store::JoinPath(dir_, store::kManifestName) + ": " +
                              design.status().message());
  if (design->bits != manifest.bits || design->indexed_k != manifest.indexed_k)
    return Status::Corruption(store::JoinPath(dir_, store::kManifestName) +
                              ": index design does not match the store's width and indexed_k");
  if (options_.design && !index::SameTables(*options_.design, *design))
    return Status::InvalidArgument(where + "index design \"" + design->description + "\", not \"" +
                                   options_.design->description + "\"");
  Result<std::shared_ptr<const index::CompiledDesign>> compiled = index::CompileDesign(*design);
  if (!compiled.ok())
    return Status::Corruption(store::JoinPath(dir_, store::kManifestName) + ": " +
                              compiled.status().message());
  design_ = std::move(*compiled);
  return Status::Ok();
}

// A new store's rule, from the options (none for a kSimHash store).
Status DocumentStoreImpl::ResolveNewRule(std::optional<store::ManifestRule>* rule_out) const {
  if (options_.rule.value_or(StoreRule::kDedup) == StoreRule::kSimHash) {
    if (options_.lsh)
      return Status::InvalidArgument("StoreOptions.lsh: a kSimHash store has no LSH options");
    if (ContainmentGiven())
      return Status::InvalidArgument(
          "StoreOptions.containment_*, edited_*: a kSimHash store has no pair rule");
    return Status::Ok();
  }
  const MinHashLshOptions lsh = options_.lsh.value_or(MinHashLshOptions{});
  store::ManifestRule rule;
  const PairRuleOptions defaults;
  rule.containment_threshold =
      options_.containment_threshold.value_or(defaults.containment_threshold);
  rule.containment_min_shingles =
      options_.containment_min_shingles.value_or(defaults.containment_min_shingles);
  rule.containment_min_ratio =
      options_.containment_min_ratio.value_or(defaults.containment_min_ratio);
  rule.edited_threshold = options_.edited_threshold.value_or(defaults.edited_threshold);
  rule.edited_min_jaccard = options_.edited_min_jaccard.value_or(defaults.edited_min_jaccard);
  rule.verification_form =
      rule.edited_threshold > 0 ? store::kShingleAndUnit20SetForm : store::kShingleSetForm;
  PairRuleOptions pair_rule = StorePairRule(rule);
  pair_rule.jaccard_threshold = lsh.threshold;
  NEARDUP_RETURN_IF_ERROR(ValidatePairRuleOptions(pair_rule).WithContext("StoreOptions"));
  // Bands and rows as dedup chooses them for this threshold (ResolveDedupLsh: down to the
  // lowest Jaccard the pair rule accepts), so the store finds the candidates dedup finds.
  Result<LshParameters> parameters = DedupLshParameters(lsh, rule);
  if (!parameters.ok()) return parameters.status().WithContext("StoreOptions.lsh");
  rule.threshold = lsh.threshold;
  rule.bands = parameters->bands;
  rule.rows = parameters->rows;
  rule.bucket_window = lsh.bucket_window;
  rule.seed = lsh.seed;
  *rule_out = rule;
  return Status::Ok();
}

// Options given to the open of an existing kDedup store must be the recorded ones.
Status DocumentStoreImpl::CheckRecordedRule(const store::ManifestRule& recorded,
                                            const std::string& where) const {
  // A store created before the edited reason answers with it off (edited threshold 0).
  const std::pair<const std::optional<double>*, double> containment[] = {
      {&options_.containment_threshold, recorded.containment_threshold},
      {&options_.containment_min_shingles, recorded.containment_min_shingles},
      {&options_.containment_min_ratio, recorded.containment_min_ratio},
      {&options_.edited_threshold, recorded.edited_threshold},
      {&options_.edited_min_jaccard, recorded.edited_min_jaccard}};
  const char* const containment_names[] = {"containment threshold", "containment_min_shingles",
                                           "containment_min_ratio", "edited threshold",
                                           "edited_min_jaccard"};
  for (size_t i = 0; i < std::size(containment); ++i) {
    const auto& [given, value] = containment[i];
    if (*given && **given != value) {
      char buffer[160];
      std::snprintf(buffer, sizeof(buffer), "%s %g, not %g", containment_names[i], value, **given);
      return Status::InvalidArgument(where + buffer);
    }
  }
  if (options_.lsh) {
    const MinHashLshOptions& wanted = *options_.lsh;
    Result<LshParameters> parameters = DedupLshParameters(wanted, recorded);
    if (!parameters.ok()) return parameters.status().WithContext("StoreOptions.lsh");
    auto text = [](double threshold, int bands, int rows, uint32_t window) {
      char buffer[160];
      std::snprintf(buffer, sizeof(buffer), "threshold %g, %d bands of %d rows, bucket window %u",
                    threshold, bands, rows, window);
      return std::string(buffer);
    };
    if (wanted.threshold != recorded.threshold || parameters->bands != recorded.bands ||
        parameters->rows != recorded.rows || wanted.bucket_window != recorded.bucket_window ||
        wanted.seed != recorded.seed) {
      return Status::InvalidArgument(
          where + text(recorded.threshold, recorded.bands, recorded.rows, recorded.bucket_window) +
          ", not " +
          text(wanted.threshold, parameters->bands, parameters->rows, wanted.bucket_window) +
          (wanted.seed != recorded.seed ? " (and another seed)" : ""));
    }
  }
  return Status::Ok();
}

Status DocumentStoreImpl::ResolveRule(const Manifest* manifest,
                                      std::optional<store::ManifestRule>* rule_out) {
  const std::string where = dir_ + ": store was created with ";
  if (manifest == nullptr) return ResolveNewRule(rule_out);  // a new store
  const StoreRule rule = manifest->rule ? StoreRule::kDedup : StoreRule::kSimHash;
  if (options_.rule && *options_.rule != rule) {
    return Status::InvalidArgument(where + "the " + StoreRuleName(rule) + " rule, not " +
                                   StoreRuleName(*options_.rule) +
                                   " (docs/storage_format.md says how to rebuild a store)");
  }
  if (!manifest->rule) {
    if (options_.lsh || ContainmentGiven()) {
      return Status::InvalidArgument(
          where +
          "the simhash rule (format version 2): it has no LSH, containment or edited options to "
          "compare with StoreOptions");
    }
    bands_ = 0;
    return Status::Ok();
  }
  const store::ManifestRule& recorded = *manifest->rule;
  lsh_.threshold = recorded.threshold;
  lsh_.parameters = LshParameters{recorded.bands, recorded.rows};
  lsh_.bucket_window = recorded.bucket_window;
  lsh_.seed = recorded.seed;
  NEARDUP_RETURN_IF_ERROR(CheckRecordedRule(recorded, where));
  bands_ = recorded.bands;
  lsh_tag_ = LshTag(LshParameters{recorded.bands, recorded.rows}, recorded.seed);
  pair_rule_options_ = StorePairRule(recorded);
  verification_form_ = recorded.verification_form;
  auto pair_rule = PairRule::Create(pair_rule_options_);
  if (!pair_rule.ok()) {
    return Status::Corruption(store::JoinPath(dir_, store::kManifestName) + ": " +
                              pair_rule.status().message());
  }
  pair_rule_.emplace(std::move(*pair_rule));
  segment_rule_ = {recorded.bands, recorded.rows, recorded.bucket_window, recorded.threshold,
                   recorded.seed};
  return Status::Ok();
}

Status DocumentStoreImpl::PrepareDocs(std::span<const DocumentInput> docs,
                                      std::vector<SketchRecord>* sketches) const {
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::string where = docs.size() > 1 ? "document " + std::to_string(i) : "";
    Status status = ValidateDoc(docs[i]);
    if (!status.ok()) return where.empty() ? status : status.WithContext(where);
  }
  if (bands_ == 0) return Status::Ok();
  sketches->resize(docs.size());
  for (size_t i = 0; i < docs.size(); ++i)
    (*sketches)[i] = SketchRecord::From(*docs[i].sketch, unit_bits());
  return Status::Ok();
}

Status DocumentStoreImpl::ValidateDoc(const DocumentInput& doc, bool allow_empty_id) const {
  if (doc.id.empty() && !allow_empty_id) return Status::InvalidArgument("id: must not be empty");
  if (doc.id.size() > options_.max_id_bytes) {
    return Status::InvalidArgument("id: " + std::to_string(doc.id.size()) +
                                   " bytes exceeds the limit of " +
                                   std::to_string(options_.max_id_bytes));
  }
  if (doc.metadata.size() > options_.max_metadata_bytes) {
    return Status::InvalidArgument("metadata: " + std::to_string(doc.metadata.size()) +
                                   " bytes exceeds the limit of " +
                                   std::to_string(options_.max_metadata_bytes));
  }
  if (doc.fingerprint.bits != bits_) {
    return Status::InvalidArgument("fingerprint: " + std::to_string(doc.fingerprint.bits) +
                                   "-bit, the store holds " + std::to_string(bits_) + "-bit");
  }
  if (bands_ > 0) {
    if (doc.sketch == nullptr) {
      return Status::InvalidArgument(
          "text: this store applies the dedup rule, which needs the text of every document it "
          "adds or checks (a fingerprint alone is not enough); create the store with the simhash "
          "rule (`--rule simhash`) to store bare fingerprints");
    }
    if (doc.sketch->lsh_tag != lsh_tag_) {
      return Status::InvalidArgument(
          "sketch: made with other LSH parameters than the store's (make sketches with a "
          "DocumentSketcher created from the store's LshOptions())");
    }
    if (with_units() && !doc.sketch->has_units) {
      return Status::InvalidArgument(
          "sketch: has no unit set, which this store's pair rule (the `edited` reason) needs "
          "(make sketches with a DocumentSketcher created with_units, as SketchesNeedUnits() "
          "says)");
    }
    if (with_units() && doc.sketch->unit_bits != unit_bits()) {
      return Status::InvalidArgument(
          "sketch: its unit set has " + std::to_string(doc.sketch->unit_bits) +
          "-bit elements, this store's (" + dir_ + ") " + std::to_string(unit_bits()) +
          " (make sketches with a DocumentSketcher created with the store's SketchUnitBits())");
    }
    if (!doc.sketch->band_keys.empty() &&
        doc.sketch->band_keys.size() != static_cast<size_t>(bands_)) {
      return Status::InvalidArgument("sketch: " + std::to_string(doc.sketch->band_keys.size()) +
                                     " band keys, the store has " + std::to_string(bands_) +
                                     " bands");
    }
  }
  return Status::Ok();
}

Status DocumentStoreImpl::ValidateK(const Fingerprint& fp, int k) const {
  if (fp.bits != bits_) {
    return Status::InvalidArgument("fingerprint: " + std::to_string(fp.bits) +
                                   "-bit, the store holds " + std::to_string(bits_) + "-bit");
  }
  if (k < 0 || k > bits_) {
    return Status::InvalidArgument("k: " + std::to_string(k) + " is outside [0, " +
                                   std::to_string(bits_) + "]");
  }
  return Status::Ok();
}

Status DocumentStoreImpl::Add(const DocumentInput& doc, bool* replaced) {
  Writer w;
  w.kind = Writer::kAdd;
  w.docs = std::span<const DocumentInput>(&doc, 1);
  NEARDUP_RETURN_IF_ERROR(PrepareDocs(w.docs, &w.sketches));
  Status status = Commit(&w);
  if (replaced != nullptr) *replaced = w.replaced;
  return status;
}

Status DocumentStoreImpl::AddBatch(std::span<const DocumentInput> docs) {
  Writer w;
  w.kind = Writer::kAdd;
  w.docs = docs;
  NEARDUP_RETURN_IF_ERROR(PrepareDocs(docs, &w.sketches));
  if (docs.empty()) return Status::Ok();
  return Commit(&w);
}

Result<std::vector<CheckResult>> DocumentStoreImpl::CheckBatch(std::span<const DocumentInput> docs,
                                                               const CheckOptions& options) {
  if (bands_ == 0) {
    for (const DocumentInput& doc : docs)
      NEARDUP_RETURN_IF_ERROR(ValidateK(doc.fingerprint, options.k));
  }
  std::vector<CheckResult> results(docs.size());
  if (options.add == AddMode::kNever) {
    // A pure lookup: nothing is written, so no place in the commit queue is needed.
    for (size_t i = 0; i < docs.size(); ++i) {
      Status status = ValidateDoc(docs[i], /*allow_empty_id=*/true);
      if (!status.ok())
        return docs.size() > 1 ? status.WithContext("document " + std::to_string(i)) : status;
    }
    searches_.fetch_add(docs.size(), std::memory_order_relaxed);
    std::shared_lock<std::shared_mutex> state(state_mu_);
    if (!mem_) return Status::InvalidArgument(dir_ + ": store is closed");
    for (size_t i = 0; i < docs.size(); ++i) {
      FindDuplicatesLocked(docs[i], options.k, nullptr, &results[i].duplicates);
      Truncate(options.limit, &results[i]);
    }
    return results;
  }
  if (options.add == AddMode::kIfNew && !docs.empty() && !options_.read_only) {
    // A document with a duplicate already stored is not added: when every document of the batch
    // has one, nothing is written and the answer needs no place in the commit queue (no wait for
    // another writer's fsync). What is visible here is durable (the memtable takes a group's
    // writes after its log sync), so the answer is the one the queue would give at this moment
    // (no earlier document of the batch is added, so none is a duplicate). Otherwise, from the
    // first document without a stored duplicate, the queue decides the whole batch again,
    // atomically with its adds.
    for (size_t i = 0; i < docs.size(); ++i) {
      Status status = ValidateDoc(docs[i]);
      if (!status.ok())
        return docs.size() > 1 ? status.WithContext("document " + std::to_string(i)) : status;
    }
    {
      std::lock_guard<std::mutex> lock(writer_mu_);
      if (closed_) return Status::InvalidArgument(dir_ + ": store is closed");
    }
    std::shared_lock<std::shared_mutex> state(state_mu_);
    bool all_found = mem_ != nullptr;
    for (size_t i = 0; i < docs.size() && all_found; ++i) {
      FindDuplicatesLocked(docs[i], options.k, nullptr, &results[i].duplicates);
      all_found = !results[i].duplicates.empty();
    }
    if (all_found) {
      searches_.fetch_add(docs.size(), std::memory_order_relaxed);
      for (CheckResult& result : results) Truncate(options.limit, &result);
      return results;
    }
    for (CheckResult& result : results) result.duplicates.clear();
  }
  Writer w;
  w.kind = Writer::kCheck;
  w.docs = docs;
  w.check = options;
  w.results = &results;
  NEARDUP_RETURN_IF_ERROR(PrepareDocs(docs, &w.sketches));
  if (docs.empty()) return results;
  searches_.fetch_add(docs.size(), std::memory_order_relaxed);
  NEARDUP_RETURN_IF_ERROR(Commit(&w));
  return results;
}

Result<CheckResult> DocumentStoreImpl::CheckAndAdd(const DocumentInput& doc, int k,
                                                   bool always_add) {
  CheckOptions options;
  options.k = k;
  options.add = always_add ? AddMode::kAlways : AddMode::kIfNew;
  Result<std::vector<CheckResult>> results =
      CheckBatch(std::span<const DocumentInput>(&doc, 1), options);
  if (!results.ok()) return results.status();
  return std::move((*results)[0]);
}

std::optional<MinHashLshOptions> DocumentStoreImpl::LshOptions() const {
  if (bands_ == 0) return std::nullopt;
  return lsh_;
}

bool DocumentStoreImpl::SketchesNeedUnits() const { return with_units(); }
int DocumentStoreImpl::SketchUnitBits() const { return unit_bits(); }

Status DocumentStoreImpl::Remove(std::string_view id) {
  if (id.empty()) return Status::InvalidArgument("id: must not be empty");
  Writer w;
  w.kind = Writer::kRemove;
  w.remove_id = id;
  return Commit(&w);
}

Status DocumentStoreImpl::Flush() {
  Writer w;
  w.kind = Writer::kFlush;
  return Commit(&w);
}

// LevelDB-style group commit: writers queue up; the one at the front commits everybody queued
// behind it with one log write and one fsync.
Status DocumentStoreImpl::Commit(Writer* writer) {
  std::unique_lock<std::mutex> lock(writer_mu_);
  if (closed_) return Status::InvalidArgument(dir_ + ": store is closed");
  if (options_.read_only) return Status::InvalidArgument(dir_ + ": store is open read-only");
  writers_.push_back(writer);
  while (!writer->done && writer != writers_.front()) writer->cv.wait(lock);
  if (writer->done) return writer->status;
  // This writer leads a group. Alone in the queue, it waits the group-commit window for others to
  // join (fewer fsyncs at low concurrency); when writers queued up behind it during the previous
  // group's commit, they are the group, and waiting would only leave the disk and the CPU idle.
  if (options_.sync_mode == SyncMode::kGroupCommit && options_.group_commit_interval_ms > 0 &&
      writer->kind != Writer::kFlush && writers_.size() == 1) {
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.group_commit_interval_ms));
    lock.lock();
  }
  std::vector<Writer*> group(writers_.begin(), writers_.end());
  bool force_flush = false;
  for (Writer* w : group) force_flush |= w->kind == Writer::kFlush;
  lock.unlock();
  (void)CommitGroup(group, force_flush);  // sets every writer's status
  lock.lock();
  for (Writer* w : group) {
    writers_.pop_front();
    if (w != writer) {
      w->done = true;
      w->cv.notify_one();
    }
  }
  if (!writers_.empty()) writers_.front()->cv.notify_one();
  return writer->status;
}

// Decides every writer's operations in queue order, into `pending` (the latest op per id, and the
// adds' sketches: earlier writers of the group are not yet applied). Returns the change in live
// documents.
int64_t DocumentStoreImpl::DecideGroupLocked(std::vector<Writer*>& group, Pending* pending) const {
  std::vector<WalOp>& ops = pending->ops;
  int64_t live_delta = 0;
  auto exists = [&](std::string_view id) {
    auto it = pending->latest.find(id);
    if (it != pending->latest.end()) return ops[it->second].type == WalOpType::kAdd;
    return LookupLocked(id).has_value();
  };
  auto add_op = [&](const DocumentInput& doc, SketchRecord* sketch) {
    bool existed = exists(doc.id);
    if (!existed) ++live_delta;
    WalOp op;
    op.type = WalOpType::kAdd;
    op.id.assign(doc.id);
    op.fingerprint = doc.fingerprint;
    op.metadata.assign(doc.metadata);
    if (sketch != nullptr) {
      op.has_sketch = true;
      op.sketch = std::move(*sketch);
    }
    pending->latest[op.id] = ops.size();
    ops.push_back(std::move(op));
    pending->sketches.push_back(sketch != nullptr ? doc.sketch : nullptr);
    return existed;
  };
  for (Writer* w : group) {
    w->status = Status::Ok();
    auto sketch_of = [&](size_t i) { return bands_ > 0 ? &w->sketches[i] : nullptr; };
    switch (w->kind) {
      case Writer::kFlush:
        break;
      case Writer::kAdd:
        for (size_t i = 0; i < w->docs.size(); ++i) w->replaced = add_op(w->docs[i], sketch_of(i));
        break;
      case Writer::kRemove: {
        if (!exists(w->remove_id)) {
          w->status = Status::NotFound("id: no document \"" + std::string(w->remove_id) + "\"");
          break;
        }
        --live_delta;
        WalOp op;
        op.type = WalOpType::kRemove;
        op.id.assign(w->remove_id);
        pending->latest[op.id] = ops.size();
        ops.push_back(std::move(op));
        pending->sketches.push_back(nullptr);
        break;
      }
      case Writer::kCheck: {
        for (size_t i = 0; i < w->docs.size(); ++i) {
          const DocumentInput& doc = w->docs[i];
          CheckResult& result = (*w->results)[i];
          FindDuplicatesLocked(doc, w->check.k, pending, &result.duplicates);
          if (w->check.add == AddMode::kAlways || result.duplicates.empty()) {
            result.added = true;
            result.replaced = add_op(doc, sketch_of(i));
          }
          Truncate(w->check.limit, &result);
        }
        break;
      }
    }
  }
  return live_delta;
}

Status DocumentStoreImpl::CommitGroup(std::vector<Writer*>& group, bool force_flush) {
  Pending pending;
  std::vector<WalOp>& ops = pending.ops;
  int64_t live_delta = 0;
  {
    std::shared_lock<std::shared_mutex> state(state_mu_);
    live_delta = DecideGroupLocked(group, &pending);
  }
  if (!ops.empty()) {
    std::string payload;
    for (const WalOp& op : ops) store::AppendWalOp(op, &payload);
    const std::string record = store::EncodeWalRecord(static_cast<uint32_t>(ops.size()), payload);
    Status status = RepairLog();
    if (status.ok()) status = AppendToLog(record);
    if (!status.ok()) {
      NoteWriteError(status);
      for (Writer* w : group) w->status = status;
      return status;
    }
    {
      std::unique_lock<std::shared_mutex> state(state_mu_);
      for (WalOp& op : ops) mem_->Put(std::move(op));
      live_ = static_cast<uint64_t>(static_cast<int64_t>(live_) + live_delta);
    }
    writes_.fetch_add(ops.size(), std::memory_order_relaxed);
    wal_bytes_.store(wal_->size());
  }
  if (force_flush || mem_->size() >= options_.memtable_limit ||
      (options_.wal_flush_bytes > 0 && wal_->size() >= options_.wal_flush_bytes)) {
    if (force_flush) NEARDUP_RETURN_IF_ERROR(RepairLog());
    Status status = FlushMemTableLocked(/*wait=*/force_flush);
    if (!status.ok()) {
      // The group's operations are durable in the log; only an explicit Flush fails. The next
      // commit retries the flush.
      NoteWriteError(status);
      for (Writer* w : group) {
        if (w->kind == Writer::kFlush) w->status = status;
      }
      return status;
    }
  }
  NoteWriteOk();
  return Status::Ok();
}

Status DocumentStoreImpl::AppendToLog(std::string_view record) {
  const uint64_t before = wal_->size();
  Status status = wal_->Append(record);
  if (status.ok() && options_.sync_mode != SyncMode::kNone) {
    status = wal_->Sync();
    wal_syncs_.fetch_add(1, std::memory_order_relaxed);
  }
  if (!status.ok()) {
    // Unacknowledged: take the record (or its written part) out of the log again, so it neither
    // corrupts later records nor reappears after a restart.
    log_needs_repair_ = !wal_->TruncateTo(before).ok();
  }
  return status;
}

Status DocumentStoreImpl::RepairLog() {
  if (!log_needs_repair_) return Status::Ok();
  Status status = wal_->TruncateTo(wal_->size());
  if (!status.ok()) {
    // The descriptor may be unusable: reopen the file at its last whole record.
    Result<std::unique_ptr<WalWriter>> reopened =
        WalWriter::OpenForAppend(fs_, wal_->path(), wal_->size());
    if (!reopened.ok()) return reopened.status().WithContext("repairing the log");
    wal_ = std::move(*reopened);
  }
  log_needs_repair_ = false;
  return Status::Ok();
}

void DocumentStoreImpl::NoteWriteError(const Status& status) {
  std::lock_guard<std::mutex> lock(health_mu_);
  health_.state = StoreState::kDegraded;
  health_.reason = status.ToString();
  ++health_.write_errors;
}

void DocumentStoreImpl::NoteWriteOk() {
  std::lock_guard<std::mutex> lock(health_mu_);
  if (health_.state != StoreState::kDegraded) return;
  health_.state = StoreState::kOk;
  health_.reason.clear();
  ++health_.recoveries;
}

StoreHealth DocumentStoreImpl::Health() const {
  std::lock_guard<std::mutex> lock(health_mu_);
  return health_;
}

Status DocumentStoreImpl::WriteManifestLocked(const std::vector<uint64_t>& numbers) {
  Manifest m;
  m.bits = bits_;
  m.indexed_k = indexed_k_;
  m.design = index::EncodeDesign(design_->design);
  m.fingerprint_options = fingerprint_options_;
  m.next_file_number = next_file_number_;
  m.wal_number = wal_number_;
  m.segments_live = segments_live_;
  m.segments = numbers;
  if (bands_ > 0) {
    store::ManifestRule rule;
    rule.threshold = lsh_.threshold;
    rule.bands = lsh_.parameters->bands;
    rule.rows = lsh_.parameters->rows;
    rule.bucket_window = lsh_.bucket_window;
    rule.seed = lsh_.seed;
    rule.containment_threshold = pair_rule_options_.containment_threshold;
    rule.containment_min_shingles = pair_rule_options_.containment_min_shingles;
    rule.containment_min_ratio = pair_rule_options_.containment_min_ratio;
    rule.edited_threshold = pair_rule_options_.edited_threshold;
    rule.edited_min_jaccard = pair_rule_options_.edited_min_jaccard;
    rule.verification_form = verification_form_;
    m.rule = rule;
  }
  return store::WriteManifest(fs_, dir_, m);
}

Status DocumentStoreImpl::FlushMemTableLocked(bool wait) {
  // A memtable sealed earlier is written first: by the background thread if it is at it (this
  // waits for it: writers are held back only when mem_ filled up before that flush ended), else
  // here.
  NEARDUP_RETURN_IF_ERROR(FlushImmutable());
  bool empty;
  {
    std::shared_lock<std::shared_mutex> state(state_mu_);
    empty = mem_->size() == 0;
  }
  if (empty) {
    if (wait && options_.sync_mode == SyncMode::kNone) return wal_->Sync();
    return Status::Ok();
  }
  NEARDUP_RETURN_IF_ERROR(SealMemTableLocked());
  if (wait) return FlushImmutable();
  {
    std::lock_guard<std::mutex> lock(compaction_mu_);
    flush_requested_ = true;
  }
  compaction_cv_.notify_one();
  return Status::Ok();
}

Status DocumentStoreImpl::SealMemTableLocked() {
  // The sealed memtable's log is complete and synced before writers move on to a new one, so a
  // power cut never keeps later writes without earlier ones.
  NEARDUP_RETURN_IF_ERROR(wal_->Sync());
  uint64_t new_wal_number;
  {
    std::lock_guard<std::mutex> manifest_lock(manifest_mu_);
    new_wal_number = next_file_number_++;
  }
  Result<std::unique_ptr<WalWriter>> new_wal = WalWriter::Create(fs_, dir_, new_wal_number, bits_);
  if (!new_wal.ok()) {
    (void)fs_->Remove(store::JoinPath(dir_, store::WalFileName(new_wal_number)));
    return new_wal.status();
  }
  {
    std::unique_lock<std::shared_mutex> state(state_mu_);
    imm_ = std::move(mem_);
    mem_ = std::make_unique<MemTable>(design_, bands_, imm_->next_seq());
    imm_live_ = live_;
  }
  {
    std::lock_guard<std::mutex> manifest_lock(manifest_mu_);
    active_wal_number_ = new_wal_number;
  }
  wal_ = std::move(*new_wal);
  wal_bytes_.store(wal_->size());
  return Status::Ok();
}

Status DocumentStoreImpl::FlushImmutable() {
  const auto start = std::chrono::steady_clock::now();
  Status status = FlushImmutableNow();
  flush_nanos_.fetch_add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                   std::chrono::steady_clock::now() - start)
                                                   .count()),
                         std::memory_order_relaxed);
  return status;
}

// A memtable's entries as a segment's, newest version of each id first, and the memtable entry
// each came from (its band keys are read from there).
std::vector<SegmentEntry> SegmentEntriesOf(const MemTable& imm, int bands,
                                           std::vector<const MemTable::Entry*>* sources) {
  std::vector<SegmentEntry> entries;
  entries.reserve(imm.size());
  sources->reserve(imm.size());
  imm.ForEachNewest([&](const MemTable::Entry& entry) {
    SegmentEntry e;
    e.id = *entry.id;
    e.fingerprint = entry.fingerprint;
    e.metadata = entry.metadata;
    e.tombstone = entry.tombstone;
    if (entry.has_sketch) {
      e.has_sketch = true;
      e.has_band_keys = static_cast<int>(entry.sketch.band_keys.size()) == bands;
      e.hashes = entry.sketch.hashes;
      e.set = entry.sketch.set;
    }
    e.seq = entry.seq;
    entries.push_back(e);
    sources->push_back(&entry);
  });
  return entries;
}

void DocumentStoreImpl::RemoveConsumedLogs(uint64_t first) {
  Result<std::vector<std::string>> files = store::ListDataFiles(dir_);
  if (!files.ok()) return;
  for (const std::string& name : *files) {
    bool is_segment;
    uint64_t number;
    if (store::ParseFileName(name, &is_segment, &number) && !is_segment && number >= first &&
        number < active_wal_number_) {
      (void)fs_->Remove(store::JoinPath(dir_, name));
    }
  }
}

Status DocumentStoreImpl::FlushImmutableNow() {
  std::lock_guard<std::mutex> run_lock(flush_run_mu_);
  const MemTable* imm;
  {
    std::shared_lock<std::shared_mutex> state(state_mu_);
    imm = imm_.get();  // immutable until reset below, by this thread only
  }
  if (imm == nullptr) return Status::Ok();
  std::vector<const MemTable::Entry*> sources;
  std::vector<SegmentEntry> entries = SegmentEntriesOf(*imm, bands_, &sources);
  // The band keys band-major, gathered in one pass over the entries (each band's rows are then
  // read from one contiguous column).
  std::vector<uint32_t> keyed;  // entries with band keys
  std::vector<uint32_t> columns;
  if (bands_ > 0) {
    for (size_t i = 0; i < entries.size(); ++i) {
      if (!entries[i].tombstone && entries[i].has_band_keys)
        keyed.push_back(static_cast<uint32_t>(i));
    }
    columns.resize(keyed.size() * static_cast<size_t>(bands_));
    for (size_t j = 0; j < keyed.size(); ++j) {
      const std::vector<uint32_t>& keys = sources[keyed[j]]->sketch.band_keys;
      for (int b = 0; b < bands_; ++b) columns[static_cast<size_t>(b) * keyed.size() + j] = keys[b];
    }
  }
  auto band_rows = [&](int band, const std::vector<SegmentEntry>& entries,
                       std::vector<index::KeyRow<uint32_t>>* rows) {
    rows->reserve(keyed.size());
    const uint32_t* column = columns.data() + static_cast<size_t>(band) * keyed.size();
    for (size_t j = 0; j < keyed.size(); ++j) {
      rows->push_back({column[j], keyed[j], entries[keyed[j]].seq});
    }
  };
  uint64_t segment_number;
  {
    std::lock_guard<std::mutex> manifest_lock(manifest_mu_);
    segment_number = next_file_number_++;
  }
  const std::string segment_path = store::JoinPath(dir_, store::SegmentFileName(segment_number));
  // On failure (e.g. disk full) the half-written segment goes; imm_ and its log stay, and the
  // next flush retries.
  Status written = store::WriteSegment(fs_, segment_path, design_, std::move(entries),
                                       segment_rule(), band_rows);
  Result<std::shared_ptr<Segment>> segment = Status::Internal("not opened");
  if (written.ok()) segment = Segment::Open(segment_path, design_, segment_rule(), false);
  if (!segment.ok()) {
    (void)fs_->Remove(segment_path);
    return written.ok() ? segment.status() : written;
  }
  uint64_t flushed_log;
  {
    std::lock_guard<std::mutex> manifest_lock(manifest_mu_);
    std::vector<uint64_t> numbers;
    {
      std::shared_lock<std::shared_mutex> state(state_mu_);
      numbers = segment_numbers_;
    }
    numbers.push_back(segment_number);
    flushed_log = wal_number_;
    const uint64_t old_segments_live = segments_live_;
    wal_number_ = active_wal_number_;  // imm_'s log is no longer needed once this is durable
    segments_live_ = imm_live_;
    Status status = WriteManifestLocked(numbers);
    if (!status.ok()) {
      wal_number_ = flushed_log;
      segments_live_ = old_segments_live;
      (void)fs_->Remove(segment_path);
      return status;
    }
    std::unique_lock<std::shared_mutex> state(state_mu_);
    segments_.push_back(*segment);
    segment_numbers_ = numbers;
    imm_.reset();
  }
  RemoveConsumedLogs(flushed_log);  // the logs before the MANIFEST's
  flushes_.fetch_add(1, std::memory_order_relaxed);
  MaybeScheduleCompaction();
  return Status::Ok();
}

size_t DocumentStoreImpl::ChooseCompactionInputsLocked() const {
  const size_t count = segments_.size();
  if (options_.compaction_trigger == 0 || count <= options_.compaction_trigger) return count;
  // The newest segments, extended to an older one while it is no larger than them together.
  size_t first = count - 1;
  uint64_t newer = segments_[first]->size();
  while (first > 0 && segments_[first - 1]->size() <= newer) {
    --first;
    newer += segments_[first]->size();
  }
  if (count - first < 2) {
    // Each segment is larger than all newer ones together (sizes fall steeply): merge the two
    // newest so that the count stays bounded.
    first = count - 2;
  }
  return first;
}

void DocumentStoreImpl::MaybeScheduleCompaction() {
  if (options_.compaction_trigger == 0) return;
  size_t count;
  {
    std::shared_lock<std::shared_mutex> state(state_mu_);
    count = segments_.size();
  }
  if (count > options_.compaction_trigger) {
    std::lock_guard<std::mutex> lock(compaction_mu_);
    compaction_requested_ = true;
    compaction_cv_.notify_one();
  }
}

void DocumentStoreImpl::BackgroundLoop() {
  std::unique_lock<std::mutex> lock(compaction_mu_);
  while (true) {
    compaction_cv_.wait(lock,
                        [&] { return flush_requested_ || compaction_requested_ || stopping_; });
    if (stopping_) return;
    const bool flush = flush_requested_, compact = compaction_requested_;
    flush_requested_ = compaction_requested_ = false;
    lock.unlock();
    // An error leaves imm_ (or the old segments) in place; the next flush or write retries.
    if (flush) {
      if (Status status = FlushImmutable(); !status.ok()) {
        NoteWriteError(status.WithContext("flush"));
      }
    }
    if (compact && options_.compaction_trigger > 0) {
      if (Status status = CompactRange(/*all=*/false); !status.ok()) {
        NoteWriteError(status.WithContext("compaction"));
      }
    }
    lock.lock();
  }
}

Status DocumentStoreImpl::Compact() { return CompactRange(/*all=*/true); }

Status DocumentStoreImpl::CompactRange(bool all) {
  const auto start = std::chrono::steady_clock::now();
  Status status = CompactRangeNow(all);
  compaction_nanos_.fetch_add(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count()),
      std::memory_order_relaxed);
  return status;
}

// A merge's surviving entries (views into `inputs`, newest first): the newest version of every id
// wins; tombstones go when `drop_tombstones`. `sketched`: the inputs have band tables (a kDedup
// store). Sets (*kept)[s][i] to the index in `entries` of input s's entry i (UINT32_MAX if
// dropped). Sized once for every input entry: growing by doubling held up to 1.5x their 128 B.
void GatherSurvivors(const std::vector<std::shared_ptr<Segment>>& inputs, bool sketched,
                     bool drop_tombstones, std::vector<SegmentEntry>* entries,
                     std::vector<std::vector<uint32_t>>* kept) {
  size_t total = 0;
  for (const std::shared_ptr<Segment>& input : inputs) total += input->size();
  entries->reserve(total);
  std::unordered_set<std::string_view> seen;
  seen.reserve(total);
  for (size_t s = inputs.size(); s-- > 0;) {
    const Segment& seg = *inputs[s];
    (*kept)[s].assign(seg.size(), UINT32_MAX);
    std::vector<uint8_t> keyed(seg.size(), 0);
    if (sketched) {
      const index::KeyTable<uint32_t>& table = seg.band_table(0);
      for (size_t i = 0; i < table.size(); ++i) {
        if (table.row_at(i) < seg.size()) keyed[table.row_at(i)] = 1;
      }
    }
    for (uint32_t i = 0; i < seg.size(); ++i) {
      std::string_view id = seg.id(i);
      if (!seen.insert(id).second) continue;
      if (seg.tombstone(i) && drop_tombstones) continue;
      SegmentEntry e;
      e.id = id;
      e.fingerprint = seg.fingerprint(i);
      e.metadata = seg.metadata(i);
      e.tombstone = seg.tombstone(i);
      if (seg.has_sketch(i)) {
        e.has_sketch = true;
        e.has_band_keys = keyed[i] != 0;
        e.hashes = seg.hashes(i);
        e.set = seg.set_bytes(i);
      }
      e.seq = seg.seq(i);
      (*kept)[s][i] = static_cast<uint32_t>(entries->size());
      entries->push_back(e);
    }
  }
}

// Band `band`'s rows of a merge's output: each surviving entry's key from the input tables, with
// its index in `entries` (see GatherSurvivors).
void AppendBandRows(const std::vector<std::shared_ptr<Segment>>& inputs,
                    const std::vector<std::vector<uint32_t>>& kept, int band,
                    const std::vector<SegmentEntry>& entries,
                    std::vector<index::KeyRow<uint32_t>>* rows) {
  for (size_t s = 0; s < inputs.size(); ++s) {
    const index::KeyTable<uint32_t>& table = inputs[s]->band_table(band);
    for (size_t i = 0; i < table.size(); ++i) {
      const uint32_t entry = table.row_at(i);
      if (entry >= kept[s].size() || kept[s][entry] == UINT32_MAX) continue;
      const uint32_t out = kept[s][entry];
      if (!entries[out].has_band_keys) continue;
      rows->push_back({table.key_at(i), out, entries[out].seq});
    }
  }
}

Status DocumentStoreImpl::CompactRangeNow(bool all) {
  if (options_.read_only) return Status::InvalidArgument(dir_ + ": store is open read-only");
  std::lock_guard<std::mutex> run_lock(compact_run_mu_);
  std::vector<std::shared_ptr<Segment>> inputs;
  std::vector<uint64_t> input_numbers;
  size_t first;
  uint64_t number;
  {
    // The output's file number is taken together with the snapshot, so file numbers keep the
    // order of content age (RecoverStore relies on it).
    std::lock_guard<std::mutex> manifest_lock(manifest_mu_);
    std::shared_lock<std::shared_mutex> state(state_mu_);
    first = all ? 0 : ChooseCompactionInputsLocked();
    if (first >= segments_.size()) return Status::Ok();
    inputs.assign(segments_.begin() + first, segments_.end());
    input_numbers.assign(segment_numbers_.begin() + first, segment_numbers_.end());
    if (inputs.size() == 1 && (first > 0 || inputs[0]->live() == inputs[0]->size()))
      return Status::Ok();
    number = next_file_number_++;
  }
  // Newest version of every id wins. Removed ids (tombstones) are dropped only when the merge
  // starts at the oldest segment; otherwise they still hide older segments' entries.
  const bool drop_tombstones = first == 0;
  std::vector<SegmentEntry> entries;
  // Per input, entry -> index into `entries` of its surviving version (UINT32_MAX if dropped).
  std::vector<std::vector<uint32_t>> kept(inputs.size());
  GatherSurvivors(inputs, bands_ > 0, drop_tombstones, &entries, &kept);
  auto band_rows = [&](int band, const std::vector<SegmentEntry>& entries,
                       std::vector<index::KeyRow<uint32_t>>* rows) {
    AppendBandRows(inputs, kept, band, entries, rows);
  };
  // The inputs' pages WriteSegment has read (sets as they stream, each band's rows) need not stay
  // mapped: the merge of a whole store then holds ~0.1 GB of them, not all (~1.2 GB at 1M).
  auto release_inputs = [&inputs] {
    for (const std::shared_ptr<Segment>& input : inputs) input->ReleasePages();
  };
  const std::string path = store::JoinPath(dir_, store::SegmentFileName(number));
  if (Status written = store::WriteSegment(fs_, path, design_, std::move(entries), segment_rule(),
                                           band_rows, release_inputs);
      !written.ok()) {
    (void)fs_->Remove(path);
    return written;
  }
  Result<std::shared_ptr<Segment>> merged = Segment::Open(path, design_, segment_rule(), false);
  if (!merged.ok()) {
    (void)fs_->Remove(path);
    return merged.status();
  }
  {
    std::lock_guard<std::mutex> manifest_lock(manifest_mu_);
    std::vector<std::shared_ptr<Segment>> segments;
    std::vector<uint64_t> numbers;
    {
      std::shared_lock<std::shared_mutex> state(state_mu_);
      // Older segments stay before the merged one; segments flushed while merging come after it.
      segments.assign(segments_.begin(), segments_.begin() + first);
      numbers.assign(segment_numbers_.begin(), segment_numbers_.begin() + first);
      segments.push_back(*merged);
      numbers.push_back(number);
      for (size_t s = first + inputs.size(); s < segments_.size(); ++s) {
        segments.push_back(segments_[s]);
        numbers.push_back(segment_numbers_[s]);
      }
    }
    Status status = WriteManifestLocked(numbers);
    if (!status.ok()) {
      (void)fs_->Remove(path);
      return status;
    }
    std::unique_lock<std::shared_mutex> state(state_mu_);
    segments_ = std::move(segments);
    segment_numbers_ = std::move(numbers);
  }
  for (uint64_t old : input_numbers) {
    (void)fs_->Remove(store::JoinPath(dir_, store::SegmentFileName(old)));
  }
  compactions_.fetch_add(1, std::memory_order_relaxed);
  // A flush may have added segments meanwhile: look again.
  MaybeScheduleCompaction();
  return Status::Ok();
}

std::optional<StoredDocument> DocumentStoreImpl::LookupLocked(std::string_view id) const {
  for (const MemTable* mem : {mem_.get(), imm_.get()}) {
    if (mem == nullptr) continue;
    if (const MemTable::Entry* entry = mem->Find(id)) {
      if (entry->tombstone) return std::nullopt;
      return StoredDocument{std::string(id), entry->fingerprint, entry->metadata};
    }
  }
  for (size_t s = segments_.size(); s-- > 0;) {
    int64_t i = segments_[s]->Find(id);
    if (i < 0) continue;
    const auto entry = static_cast<uint32_t>(i);
    if (segments_[s]->tombstone(entry)) return std::nullopt;
    return StoredDocument{std::string(id), segments_[s]->fingerprint(entry),
                          std::string(segments_[s]->metadata(entry))};
  }
  return std::nullopt;
}

bool DocumentStoreImpl::ShadowedLocked(std::string_view id, size_t segment_index) const {
  if (mem_->Find(id) != nullptr || (imm_ && imm_->Find(id) != nullptr)) return true;
  for (size_t s = segment_index + 1; s < segments_.size(); ++s) {
    if (segments_[s]->Find(id) >= 0) return true;
  }
  return false;
}

Status DocumentStoreImpl::SearchLocked(const Fingerprint& query, int k,
                                       std::vector<StoredDocument>* out, size_t limit) const {
  // The hits first without their metadata (a wide search may match the whole store, and a
  // document's metadata can be 4 KB): where each one's metadata is, to copy only the kept ones'.
  struct Source {
    const std::string* memtable_metadata;  // or null: segment `segment`, entry `entry`
    size_t segment;
    uint64_t entry;
  };
  std::vector<StoredDocument> hits;
  std::vector<Source> sources;
  mem_->Search(query, k, [&](const MemTable::Entry& entry, int distance) {
    hits.push_back({*entry.id, entry.fingerprint, std::string(), distance});
    sources.push_back({&entry.metadata, 0, 0});
  });
  if (imm_) {
    imm_->Search(query, k, [&](const MemTable::Entry& entry, int distance) {
      if (mem_->Find(*entry.id) != nullptr) return;  // a newer version in the live memtable
      hits.push_back({*entry.id, entry.fingerprint, std::string(), distance});
      sources.push_back({&entry.metadata, 0, 0});
    });
  }
  std::vector<SegmentHit> segment_hits;
  for (size_t s = segments_.size(); s-- > 0;) {
    segment_hits.clear();
    segments_[s]->Search(query, k, &segment_hits);
    for (const SegmentHit& hit : segment_hits) {
      std::string_view id = segments_[s]->id(hit.entry);
      if (ShadowedLocked(id, s)) continue;
      hits.push_back(
          {std::string(id), segments_[s]->fingerprint(hit.entry), std::string(), hit.distance});
      sources.push_back({nullptr, s, hit.entry});
    }
  }
  std::vector<size_t> order(hits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const size_t keep = limit > 0 ? std::min(limit, hits.size()) : hits.size();
  auto better = [&](size_t a, size_t b) { return ByDistanceThenId(hits[a], hits[b]); };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    better);
  out->reserve(out->size() + keep);
  for (size_t i = 0; i < keep; ++i) {
    StoredDocument& doc = hits[order[i]];
    const Source& source = sources[order[i]];
    doc.metadata = source.memtable_metadata != nullptr
                       ? *source.memtable_metadata
                       : std::string(segments_[source.segment]->metadata(source.entry));
    out->push_back(std::move(doc));
  }
  return Status::Ok();
}

void DocumentStoreImpl::IndexPending(const Pending& pending) const {
  for (; pending.indexed < pending.ops.size(); ++pending.indexed) {
    const DocumentSketch* sketch = pending.sketches[pending.indexed];
    if (sketch == nullptr) continue;
    const uint32_t op = static_cast<uint32_t>(pending.indexed);
    pending.squeezed[sketch->squeezed_hash].push_back(op);
    if (static_cast<int>(sketch->band_keys.size()) != bands_) continue;
    for (int b = 0; b < bands_; ++b) {
      pending.bands[uint64_t(b) << 32 | sketch->band_keys[b]].push_back(op);
    }
  }
}

struct DocumentStoreImpl::CandidateSink {
  const DocumentStoreImpl& store;
  const DocumentInput& doc;
  const DocumentSketch& sketch;
  const Pending* pending;  // or null
  size_t window;
  size_t max_visits;
  std::vector<Candidate>* out;
  std::unordered_map<std::string_view, size_t> by_id{};  // candidate id -> index in *out

  bool Excluded(std::string_view id) const {
    return id == doc.id || (pending != nullptr && pending->Shadows(id));
  }
  void Add(const Candidate& candidate) {
    auto [it, inserted] = by_id.try_emplace(candidate.id, out->size());
    if (inserted) {
      out->push_back(candidate);
    } else {
      (*out)[it->second].lsh |= candidate.lsh;
    }
  }
  void FromMemtable(const MemTable::Entry& entry, bool lsh) {
    Add({*entry.id, entry.fingerprint, entry.metadata, entry.sketch.hashes, entry.sketch.set,
         nullptr, nullptr, lsh});
  }
  void FromSegment(size_t s, uint32_t entry, bool lsh) {
    const Segment& seg = *store.segments_[s];
    Add({seg.id(entry), seg.fingerprint(entry), seg.metadata(entry), seg.hashes(entry),
         seg.set_bytes(entry), nullptr, nullptr, lsh});
  }
  void FromPending(uint32_t op, bool lsh) {
    const WalOp& o = pending->ops[op];
    Add({o.id,
         o.fingerprint,
         o.metadata,
         o.sketch.hashes,
         {},
         &pending->sketches[op]->shingles,
         &pending->sketches[op]->units,
         lsh});
  }
  // Whether a pending op may be a candidate (live, another id).
  bool PendingLive(uint32_t op) const { return pending->Live(op) && pending->ops[op].id != doc.id; }
  // A stored entry of segment s is live when nothing newer holds its id.
  bool SegmentLive(size_t s, uint32_t entry) const {
    const Segment& seg = *store.segments_[s];
    if (entry >= seg.size() || seg.tombstone(entry) || !seg.has_sketch(entry)) return false;
    const std::string_view id = seg.id(entry);
    return !id.empty() && !Excluded(id) && !store.ShadowedLocked(id, s);
  }
};

void DocumentStoreImpl::DedupCandidatesLocked(const DocumentInput& doc, const Pending* pending,
                                              std::vector<Candidate>* out) const {
  if (pending != nullptr) IndexPending(*pending);
  const size_t window = lsh_.bucket_window;
  CandidateSink sink{*this, doc, *doc.sketch, pending, window, window * kMaxVisitsPerWindow, out};
  WhitespaceCandidatesLocked(sink);
  if (static_cast<int>(doc.sketch->band_keys.size()) != bands_) return;  // no shingles: no buckets
  BandCandidatesLocked(sink);
}

// The whitespace-free hash: the oldest `window` live documents with it (dedup pairs every document
// with the first one of its hash), oldest layer first.
void DocumentStoreImpl::WhitespaceCandidatesLocked(CandidateSink& sink) const {
  const uint64_t hash = sink.sketch.squeezed_hash;
  const size_t window = sink.window;
  size_t taken = 0, visits = 0;
  for (size_t s = 0; s < segments_.size() && taken < window && visits < sink.max_visits; ++s) {
    const index::KeyTable<uint64_t>& table = segments_[s]->squeezed_table();
    auto [begin, end] = table.Equal(hash);
    for (size_t i = begin; i < end && taken < window && ++visits <= sink.max_visits; ++i) {
      if (!sink.SegmentLive(s, table.row_at(i))) continue;
      sink.FromSegment(s, table.row_at(i), false);
      ++taken;
    }
  }
  if (taken < window && imm_) {
    imm_->ForEachWithSqueezed(hash, sink.max_visits, [&](const MemTable::Entry& e) {
      if (sink.Excluded(*e.id) || mem_->Find(*e.id) != nullptr) return true;
      sink.FromMemtable(e, false);
      return ++taken < window;
    });
  }
  if (taken < window) {
    mem_->ForEachWithSqueezed(hash, sink.max_visits, [&](const MemTable::Entry& e) {
      if (sink.Excluded(*e.id)) return true;
      sink.FromMemtable(e, false);
      return ++taken < window;
    });
  }
  if (sink.pending == nullptr || taken >= window) return;
  auto it = sink.pending->squeezed.find(hash);
  if (it == sink.pending->squeezed.end()) return;
  for (uint32_t op : it->second) {
    if (taken >= window) break;
    if (!sink.PendingLive(op)) continue;
    sink.FromPending(op, false);
    ++taken;
  }
}

// Each band's bucket: its newest `window` live documents (dedup's bucket rule pairs a document with
// the `window` before it in its bucket), newest layer first. Every segment's bucket of every band
// is looked up first, together (their cache misses overlap).
void DocumentStoreImpl::BandCandidatesLocked(CandidateSink& sink) const {
  const std::vector<uint32_t>& keys = sink.sketch.band_keys;
  const size_t bands = static_cast<size_t>(bands_);
  thread_local std::vector<const index::KeyTable<uint32_t>*> tables;
  thread_local std::vector<std::pair<size_t, size_t>> ranges;
  tables.resize(bands);
  ranges.resize(segments_.size() * bands);
  for (size_t s = 0; s < segments_.size(); ++s) {
    for (size_t b = 0; b < bands; ++b) tables[b] = &segments_[s]->band_table(static_cast<int>(b));
    index::KeyTable<uint32_t>::EqualMany(tables, keys, ranges.data() + s * bands);
  }
  const size_t window = sink.window;
  for (int b = 0; b < bands_; ++b) {
    const uint32_t key = keys[b];
    size_t taken = 0;
    if (sink.pending != nullptr) {
      auto it = sink.pending->bands.find(uint64_t(b) << 32 | key);
      if (it != sink.pending->bands.end()) {
        for (size_t i = it->second.size(); i-- > 0 && taken < window;) {
          if (!sink.PendingLive(it->second[i])) continue;
          sink.FromPending(it->second[i], true);
          ++taken;
        }
      }
    }
    if (taken < window) {
      mem_->ForEachInBucket(b, key, sink.max_visits, [&](const MemTable::Entry& e) {
        if (sink.Excluded(*e.id)) return true;
        sink.FromMemtable(e, true);
        return ++taken < window;
      });
    }
    if (taken < window && imm_) {
      imm_->ForEachInBucket(b, key, sink.max_visits, [&](const MemTable::Entry& e) {
        if (sink.Excluded(*e.id) || mem_->Find(*e.id) != nullptr) return true;
        sink.FromMemtable(e, true);
        return ++taken < window;
      });
    }
    size_t visits = 0;
    for (size_t s = segments_.size(); s-- > 0 && taken < window && visits < sink.max_visits;) {
      const index::KeyTable<uint32_t>& table = segments_[s]->band_table(b);
      const auto [begin, end] = ranges[s * bands + static_cast<size_t>(b)];
      for (size_t i = end; i-- > begin && taken < window && ++visits <= sink.max_visits;) {
        if (!sink.SegmentLive(s, table.row_at(i))) continue;
        sink.FromSegment(s, table.row_at(i), true);
        ++taken;
      }
    }
  }
}

void DocumentStoreImpl::FindDuplicatesLocked(const DocumentInput& doc, int k,
                                             const Pending* pending,
                                             std::vector<StoredDocument>* out) const {
  if (bands_ == 0) {
    // The SimHash rule: stored and pending documents within k.
    std::vector<StoredDocument> found;
    (void)SearchLocked(doc.fingerprint, k, &found);  // cannot fail
    for (StoredDocument& d : found) {
      if (d.id != doc.id && (pending == nullptr || !pending->Shadows(d.id))) {
        out->push_back(std::move(d));
      }
    }
    if (pending != nullptr) {
      for (size_t i = 0; i < pending->ops.size(); ++i) {
        const WalOp& op = pending->ops[i];
        if (!pending->Live(i) || op.id == doc.id) continue;
        const int d = HammingDistance(op.fingerprint, doc.fingerprint);
        if (d <= k) out->push_back({op.id, op.fingerprint, op.metadata, d});
      }
    }
    std::sort(out->begin(), out->end(), ByDistanceThenId);
    return;
  }
  std::vector<Candidate> candidates;
  DedupCandidatesLocked(doc, pending, &candidates);
  const DocumentSketch& sketch = *doc.sketch;
  PairDocument checked{
      sketch.content_hash, sketch.text_bytes, sketch.squeezed_hash, {}, std::nullopt};
  std::vector<uint32_t> decoded, decoded_units;
  for (const Candidate& c : candidates) {
    // The pair rule, as dedup's verification applies it to a candidate pair: exact and
    // whitespace-only copies by the hashes alone (a whitespace-table candidate that is neither is
    // no candidate), then a band candidate by its shingle sets.
    PairDocument stored{
        c.hashes.content_hash, c.hashes.text_bytes, c.hashes.squeezed_hash, {}, std::nullopt};
    checked.shingles = {};
    checked.units = {};
    PairDecision decision = pair_rule_->Decide(checked, stored);
    const bool by_hash = decision.reason == DuplicateReason::kExact ||
                         decision.reason == DuplicateReason::kWhitespace;
    if (!by_hash) {
      if (!c.lsh) continue;
      const std::vector<uint32_t>* set = c.set;
      const std::vector<uint32_t>* units = c.units;
      if (set == nullptr) {
        // Damage decodes to no set.
        (void)store::DecodeSketchSets(c.set_bytes, with_units(), &decoded, &decoded_units);
        set = &decoded;
        units = &decoded_units;
      }
      checked.shingles = sketch.shingles;
      stored.shingles = *set;
      if (with_units()) {
        checked.units = sketch.units;
        stored.units = *units;
      }
      decision = pair_rule_->DecideFast(checked, stored);
      if (!decision.duplicate()) continue;
    }
    out->push_back({std::string(c.id), c.fingerprint, std::string(c.metadata),
                    HammingDistance(c.fingerprint, doc.fingerprint), decision.similarity,
                    decision.reason});
  }
  std::sort(out->begin(), out->end(), BySimilarityThenId);
}

Result<std::vector<StoredDocument>> DocumentStoreImpl::Search(const Fingerprint& query, int k,
                                                              size_t limit) const {
  NEARDUP_RETURN_IF_ERROR(ValidateK(query, k));
  searches_.fetch_add(1, std::memory_order_relaxed);
  std::vector<StoredDocument> out;
  {
    std::shared_lock<std::shared_mutex> state(state_mu_);
    if (!mem_) return Status::InvalidArgument(dir_ + ": store is closed");
    NEARDUP_RETURN_IF_ERROR(SearchLocked(query, k, &out, limit));
  }
  return out;
}

Result<StoredDocument> DocumentStoreImpl::Get(std::string_view id) const {
  std::shared_lock<std::shared_mutex> state(state_mu_);
  if (!mem_) return Status::InvalidArgument(dir_ + ": store is closed");
  std::optional<StoredDocument> doc = LookupLocked(id);
  if (!doc) return Status::NotFound("id: no document \"" + std::string(id) + "\"");
  return std::move(*doc);
}

StoreStats DocumentStoreImpl::Stats() const {
  StoreStats stats;
  {
    std::shared_lock<std::shared_mutex> state(state_mu_);
    stats.documents = live_;
    stats.segments = segments_.size();
    uint64_t index_bytes = 0, index_rows = 0;
    for (const auto& seg : segments_) {
      stats.segment_entries += seg->size();
      stats.disk_bytes += seg->file_size();
      index_bytes += seg->index().image_size();
      index_rows += seg->index().size();
    }
    // Measured on the segments once there are any.
    if (index_rows > 0) stats.index_bytes_per_fingerprint = double(index_bytes) / index_rows;
    stats.memtable_entries = (mem_ ? mem_->size() : 0) + (imm_ ? imm_->size() : 0);
  }
  stats.wal_bytes = wal_bytes_.load();
  stats.wal_dropped_bytes = wal_dropped_bytes_;
  stats.wal_dropped = wal_dropped_;
  stats.wal_dropped_file = wal_dropped_file_;
  stats.disk_bytes += stats.wal_bytes;
  stats.compactions = compactions_.load();
  stats.flushes = flushes_.load();
  stats.flush_seconds = 1e-9 * static_cast<double>(flush_nanos_.load());
  stats.compaction_seconds = 1e-9 * static_cast<double>(compaction_nanos_.load());
  stats.searches = searches_.load();
  stats.wal_syncs = wal_syncs_.load();
  stats.writes = writes_.load();
  stats.open_seconds = open_seconds_;
  stats.bits = bits_;
  stats.indexed_k = indexed_k_;
  stats.index_design = design_->design.description;
  if (stats.index_bytes_per_fingerprint == 0)
    stats.index_bytes_per_fingerprint = planned_bytes_per_fingerprint_;
  stats.fingerprint_options = fingerprint_options_;
  stats.rule = bands_ > 0 ? StoreRule::kDedup : StoreRule::kSimHash;
  if (bands_ > 0) {
    stats.lsh = lsh_;
    stats.verification_form = unit_bits() == 32 ? kUnitsVerificationForm
                              : unit_bits() > 0 ? kUnits20VerificationForm
                                                : kVerificationForm;
    stats.pair_rule = pair_rule_options_;
  }
  stats.health = Health();
  return stats;
}

Status DocumentStoreImpl::Close() {
  {
    std::lock_guard<std::mutex> lock(writer_mu_);
    if (closed_ || options_.read_only) {
      closed_ = true;
      {
        std::lock_guard<std::mutex> health_lock(health_mu_);
        health_.state = StoreState::kClosed;
      }
      if (lock_fd_ >= 0) {
        ::close(lock_fd_);
        lock_fd_ = -1;
      }
      return Status::Ok();
    }
  }
  {
    std::lock_guard<std::mutex> lock(compaction_mu_);
    stopping_ = true;
    compaction_cv_.notify_one();
  }
  if (compaction_thread_.joinable()) compaction_thread_.join();
  Status status = Flush();
  {
    std::lock_guard<std::mutex> lock(writer_mu_);
    closed_ = true;
    if (status.ok() && wal_) status = wal_->Sync();
  }
  {
    std::lock_guard<std::mutex> health_lock(health_mu_);
    health_.state = StoreState::kClosed;
  }
  if (lock_fd_ >= 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
  return status;
}

}  // namespace

const char* StoreRuleName(StoreRule rule) {
  return rule == StoreRule::kDedup ? "dedup" : "simhash";
}

const char* StoreStateName(StoreState state) {
  switch (state) {
    case StoreState::kOk:
      return "ok";
    case StoreState::kDegraded:
      return "degraded";
    case StoreState::kClosed:
      return "closed";
  }
  return "unknown";
}

Result<std::unique_ptr<DocumentStore>> DocumentStore::Open(const std::string& dir,
                                                           const StoreOptions& options) {
  auto store = std::make_unique<DocumentStoreImpl>(dir, options);
  Status status = store->Init();
  // A read-only snapshot beside a writer may find a file the writer has just replaced: again.
  for (int attempt = 0; !status.ok() && store->reading_beside_writer() && attempt < 20; ++attempt) {
    if (status.code() != StatusCode::kNotFound && status.code() != StatusCode::kCorruption &&
        status.code() != StatusCode::kIoError) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * (attempt + 1)));
    store = std::make_unique<DocumentStoreImpl>(dir, options);
    status = store->Init();
  }
  if (!status.ok()) return status;
  return std::unique_ptr<DocumentStore>(std::move(store));
}

}  // namespace neardup
