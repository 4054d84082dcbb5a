// DocumentStore implementation: memtable + write-ahead log + memory-mapped segments, group
// commit, flush and background compaction; see include/neardup/store.h and
// docs/storage_format.md.
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

#include "common/string_hash.h"
#include "index/table_segment.h"
#include "neardup/permuted_index.h"
#include "neardup/store.h"
#include "store/manifest.h"
#include "store/segment.h"
#include "store/store_format.h"
#include "store/wal.h"

namespace neardup {
namespace {

using store::Manifest;
using store::Segment;
using store::SegmentEntry;
using store::SegmentHit;
using store::WalOp;
using store::WalOpType;
using store::WalWriter;

// Documents written since the last flush, newest version per id (tombstones included).
// The memtable's own design: planned for its size under PermutedIndex's default budget, so
// inserts stay cheap. Planning takes ~0.08 s of CPU (64 bits, indexed_k 3), so each distinct
// (bits, indexed_k, size) is planned once per process and reused by every later Open.
Result<IndexDesign> MemtableDesign(int bits, int indexed_k, size_t memtable_limit) {
  static std::mutex mu;
  static std::map<std::tuple<int, int, size_t>, IndexDesign> planned_designs;
  const auto key = std::make_tuple(bits, indexed_k, memtable_limit);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = planned_designs.find(key); it != planned_designs.end()) return it->second;
  }
  PlanRequest request;
  request.bits = bits;
  request.indexed_k = indexed_k;
  request.expected_size = static_cast<double>(std::max<size_t>(memtable_limit, 1024));
  request.memory_budget = PermutedIndexOptions{}.memory_budget;
  Result<IndexDesign> planned = PlanIndex(request);
  if (!planned.ok()) {
    request.memory_budget = {};
    planned = PlanIndex(request);
  }
  if (!planned.ok()) return planned.status();
  std::lock_guard<std::mutex> lock(mu);
  planned_designs.emplace(key, *planned);
  return planned;
}

class MemTable {
 public:
  struct Entry {
    Fingerprint fingerprint;
    std::string metadata;
    bool tombstone = false;
    uint64_t slot = 0;  // id in `index_` (live entries only)
  };

  // Searches with k <= indexed_k use a PermutedIndex (the same segments as the store's files,
  // planned for the memtable's size so inserts stay cheap) over the live entries; larger k scans
  // them. `design` (planned once per store by Init) is for `expected_size` entries.
  static Result<std::unique_ptr<MemTable>> Create(int bits, const IndexDesign& design,
                                                  size_t expected_size) {
    PermutedIndexOptions options;
    options.bits = bits;
    options.indexed_k = design.indexed_k;
    options.design = design;
    options.expected_size = static_cast<double>(std::max<size_t>(expected_size, 1024));
    options.threads = 1;
    Result<std::unique_ptr<PermutedIndex>> permuted = PermutedIndex::Create(options);
    if (!permuted.ok()) return permuted.status().WithContext("memtable index");
    return std::unique_ptr<MemTable>(new MemTable(std::move(*permuted)));
  }

  const Entry* Find(std::string_view id) const {
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : &it->second;
  }

  // Applies one logged operation. An error from the index (none is expected: the width was
  // checked and the memtable is far below the index's row limit) leaves the entry stored but
  // unsearchable by the tables, and is returned.
  Status Put(const WalOp& op) {
    auto it = entries_.find(std::string_view(op.id));
    if (it == entries_.end()) {
      it = entries_.emplace(op.id, Entry{}).first;
    } else if (!it->second.tombstone) {
      index_->Remove(it->second.slot, it->second.fingerprint);
      slot_ids_[it->second.slot] = nullptr;
    }
    Entry& entry = it->second;
    entry.tombstone = op.type == WalOpType::kRemove;
    entry.fingerprint = op.fingerprint;
    entry.metadata = op.metadata;
    if (!entry.tombstone) {
      entry.slot = slot_ids_.size();
      slot_ids_.push_back(&it->first);
      NEARDUP_RETURN_IF_ERROR(
          index_->Add(entry.slot, entry.fingerprint).WithContext("memtable index"));
    }
    return Status::Ok();
  }

  // Calls fn(id, entry, distance) for the live entries within k.
  template <typename Fn>
  Status Search(const Fingerprint& query, int k, Fn&& fn) const {
    if (entries_.empty()) return Status::Ok();
    if (k > index_->max_search_k()) {
      for (const auto& [id, entry] : entries_) {
        if (entry.tombstone) continue;
        const int distance = HammingDistance(entry.fingerprint, query);
        if (distance <= k) fn(id, entry, distance);
      }
      return Status::Ok();
    }
    Result<std::vector<Neighbor>> hits = index_->Search(query, k);
    if (!hits.ok()) return hits.status().WithContext("memtable index");
    for (const Neighbor& hit : *hits) {
      const std::string* id = slot_ids_[hit.id];
      if (id != nullptr) fn(*id, entries_.find(std::string_view(*id))->second, hit.distance);
    }
    return Status::Ok();
  }

  size_t size() const { return entries_.size(); }
  const std::unordered_map<std::string, Entry, StringHash, std::equal_to<>>& entries() const {
    return entries_;
  }

 private:
  std::unordered_map<std::string, Entry, StringHash, std::equal_to<>> entries_;
  explicit MemTable(std::unique_ptr<PermutedIndex> index) : index_(std::move(index)) {}

  std::vector<const std::string*> slot_ids_;  // slot -> key in entries_ (null once replaced)
  std::unique_ptr<PermutedIndex> index_;
};

bool ByDistanceThenId(const StoredDocument& a, const StoredDocument& b) {
  return a.distance != b.distance ? a.distance < b.distance : a.id < b.id;
}

class DocumentStoreImpl : public DocumentStore {
 public:
  DocumentStoreImpl(std::string dir, const StoreOptions& options)
      : dir_(std::move(dir)), options_(options) {}
  ~DocumentStoreImpl() override { (void)Close(); }

  Status Init();

  Status Add(const DocumentInput& doc, bool* replaced) override;
  Status AddBatch(std::span<const DocumentInput> docs) override;
  Result<CheckResult> CheckAndAdd(const DocumentInput& doc, int k, bool always_add) override;
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
    enum Kind { kAdd, kRemove, kCheckAndAdd, kFlush } kind = kAdd;
    std::span<const DocumentInput> docs;
    std::string_view remove_id;
    int k = 0;
    bool always_add = false;
    Status status;
    bool replaced = false;
    CheckResult* check = nullptr;
    bool done = false;
    std::condition_variable cv;
  };

  // The design of a new store: options_.design, or planned within the budget.
  Result<IndexDesign> PlanStoreDesign(int bits, int indexed_k) const;
  // Refuses explicit options that differ from what the store was created with; sets design_.
  Status CheckCompatible(const Manifest& manifest);
  Status ValidateDoc(const DocumentInput& doc) const;
  Status ValidateK(const Fingerprint& fp, int k) const;
  Status Commit(Writer* writer);
  Status CommitGroup(std::vector<Writer*>& group, bool force_flush);
  Status FlushMemTableLocked();                                      // caller is the commit leader
  Status WriteManifestLocked(const std::vector<uint64_t>& numbers);  // manifest_mu_ held
  void CompactionLoop();
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

  const std::string dir_;
  StoreOptions options_;
  Env* fs_ = Env::Default();
  int bits_ = 64;
  int indexed_k_ = 3;
  std::shared_ptr<const index::CompiledDesign> design_;  // the store's index design
  std::string fingerprint_options_;
  double planned_bytes_per_fingerprint_ = 0;
  IndexDesign memtable_design_;  // the planner's figure, for a store created now
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
  uint64_t live_ = 0;

  std::mutex manifest_mu_;  // guards the fields below and MANIFEST writes
  uint64_t next_file_number_ = 1;
  uint64_t wal_number_ = 0;
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
  bool stopping_ = false;
  std::thread compaction_thread_;
  std::mutex compact_run_mu_;  // one compaction at a time

  mutable std::atomic<uint64_t> searches_{0};
  std::atomic<uint64_t> wal_bytes_{0};  // size of the current log
  std::atomic<uint64_t> wal_syncs_{0}, writes_{0}, flushes_{0}, compactions_{0};
  double open_seconds_ = 0;
  // The log tail dropped at open (see StoreStats::wal_dropped*); written once, in Open.
  uint64_t wal_dropped_bytes_ = 0;
  std::string wal_dropped_;
  std::string wal_dropped_file_;
  Status KeepDroppedTail(const std::string& wal_path, const store::WalReadResult& replay);
};

Status DocumentStoreImpl::Init() {
  const auto start = std::chrono::steady_clock::now();
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

  Result<Manifest> manifest = store::ReadManifest(dir_);
  bool fresh = false;
  if (!manifest.ok()) {
    if (manifest.status().code() != StatusCode::kNotFound) return manifest.status();
    // No MANIFEST: a new store, unless data files are lying around.
    Result<std::vector<std::string>> files = store::ListDataFiles(dir_);
    if (!files.ok()) return files.status();
    if (!files->empty()) {
      return Status::Corruption(store::JoinPath(dir_, store::kManifestName) +
                                ": missing although data files exist; run `neardup index recover " +
                                dir_ + "`");
    }
    if (!options_.create_if_missing)
      return Status::NotFound(dir_ + ": no store here (no MANIFEST)");
    fresh = true;
    Manifest m;
    m.bits = options_.bits.value_or(64);
    m.indexed_k = options_.indexed_k.value_or(3);
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
    manifest = m;
  } else if (options_.error_if_exists) {
    return Status::AlreadyExists(dir_ + ": a store exists already");
  }
  (void)fresh;
  NEARDUP_RETURN_IF_ERROR(CheckCompatible(*manifest));
  bits_ = manifest->bits;
  indexed_k_ = manifest->indexed_k;
  options_.bits = bits_;
  options_.indexed_k = indexed_k_;
  fingerprint_options_ = manifest->fingerprint_options;
  next_file_number_ = manifest->next_file_number;
  wal_number_ = manifest->wal_number;
  segments_live_ = manifest->segments_live;
  segment_numbers_ = manifest->segments;
  for (uint64_t number : segment_numbers_) {
    Result<std::shared_ptr<Segment>> seg =
        Segment::Open(store::JoinPath(dir_, store::SegmentFileName(number)), design_,
                      options_.verify_checksums_on_open);
    if (!seg.ok()) return seg.status();
    segments_.push_back(*seg);
  }
  {
    Result<IndexDesign> planned = MemtableDesign(bits_, indexed_k_, options_.memtable_limit);
    if (!planned.ok()) return planned.status().WithContext("memtable index");
    memtable_design_ = std::move(*planned);
  }
  Result<std::unique_ptr<MemTable>> mem =
      MemTable::Create(bits_, memtable_design_, options_.memtable_limit);
  if (!mem.ok()) return mem.status();
  mem_ = std::move(*mem);
  live_ = segments_live_;
  const std::string wal_path = store::JoinPath(dir_, store::WalFileName(wal_number_));
  Result<store::WalReadResult> replay =
      store::ReadWal(wal_path, bits_, [&](std::vector<WalOp>& ops) {
        for (const WalOp& op : ops) {
          const bool exists = LookupLocked(op.id).has_value();
          if (op.type == WalOpType::kAdd && !exists) ++live_;
          if (op.type == WalOpType::kRemove && exists) --live_;
          NEARDUP_RETURN_IF_ERROR(mem_->Put(op));
        }
        return Status::Ok();
      });
  if (!replay.ok()) {
    if (replay.status().code() == StatusCode::kNotFound) {
      return Status::Corruption(wal_path + ": log named by MANIFEST is missing");
    }
    return replay.status();
  }
  if (replay->dropped_bytes > 0) {
    wal_dropped_bytes_ = replay->dropped_bytes;
    wal_dropped_ = wal_path + ": " + std::to_string(replay->dropped_bytes) +
                   " bytes dropped at offset " + std::to_string(replay->valid_bytes) + ": " +
                   replay->dropped_reason;
    if (options_.read_only) wal_dropped_ += " (read-only open: the log is left as it is)";
  }
  if (options_.read_only) {
    wal_bytes_.store(replay->valid_bytes);
    closed_ = false;
    open_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return Status::Ok();
  }
  if (replay->dropped_bytes > 0) NEARDUP_RETURN_IF_ERROR(KeepDroppedTail(wal_path, *replay));
  Result<std::unique_ptr<WalWriter>> wal =
      WalWriter::OpenForAppend(fs_, wal_path, replay->valid_bytes);
  if (!wal.ok()) return wal.status();
  wal_ = std::move(*wal);
  wal_bytes_.store(wal_->size());
  // Files not named by the MANIFEST are leftovers of an interrupted flush or compaction.
  Result<std::vector<std::string>> files = store::ListDataFiles(dir_);
  if (files.ok()) {
    for (const std::string& name : *files) {
      bool is_segment;
      uint64_t number;
      if (!store::ParseFileName(name, &is_segment, &number)) continue;
      bool referenced = is_segment ? std::find(segment_numbers_.begin(), segment_numbers_.end(),
                                               number) != segment_numbers_.end()
                                   : number == wal_number_;
      if (!referenced && number >= 1) (void)fs_->Remove(store::JoinPath(dir_, name));
    }
  }
  closed_ = false;
  if (options_.compaction_trigger > 0) {
    compaction_thread_ = std::thread([this] { CompactionLoop(); });
  }
  open_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
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

Status DocumentStoreImpl::ValidateDoc(const DocumentInput& doc) const {
  if (doc.id.empty()) return Status::InvalidArgument("id: must not be empty");
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
  NEARDUP_RETURN_IF_ERROR(ValidateDoc(doc));
  Writer w;
  w.kind = Writer::kAdd;
  w.docs = std::span<const DocumentInput>(&doc, 1);
  Status status = Commit(&w);
  if (replaced != nullptr) *replaced = w.replaced;
  return status;
}

Status DocumentStoreImpl::AddBatch(std::span<const DocumentInput> docs) {
  for (size_t i = 0; i < docs.size(); ++i) {
    Status status = ValidateDoc(docs[i]);
    if (!status.ok()) return status.WithContext("document " + std::to_string(i));
  }
  if (docs.empty()) return Status::Ok();
  Writer w;
  w.kind = Writer::kAdd;
  w.docs = docs;
  return Commit(&w);
}

Result<CheckResult> DocumentStoreImpl::CheckAndAdd(const DocumentInput& doc, int k,
                                                   bool always_add) {
  NEARDUP_RETURN_IF_ERROR(ValidateDoc(doc));
  NEARDUP_RETURN_IF_ERROR(ValidateK(doc.fingerprint, k));
  CheckResult result;
  Writer w;
  w.kind = Writer::kCheckAndAdd;
  w.docs = std::span<const DocumentInput>(&doc, 1);
  w.k = k;
  w.always_add = always_add;
  w.check = &result;
  Status status = Commit(&w);
  if (!status.ok()) return status;
  return result;
}

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
  // This writer leads a group.
  if (options_.sync_mode == SyncMode::kGroupCommit && options_.group_commit_interval_ms > 0 &&
      writer->kind != Writer::kFlush) {
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

Status DocumentStoreImpl::CommitGroup(std::vector<Writer*>& group, bool force_flush) {
  // Decide every writer's operations in queue order. Earlier writers of the group are not yet
  // applied, so their latest op per id is kept in `pending`.
  std::vector<WalOp> ops;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> pending;  // id -> ops index
  int64_t live_delta = 0;
  {
    std::shared_lock<std::shared_mutex> state(state_mu_);
    auto exists = [&](std::string_view id) {
      auto it = pending.find(id);
      if (it != pending.end()) return ops[it->second].type == WalOpType::kAdd;
      return LookupLocked(id).has_value();
    };
    auto add_op = [&](const DocumentInput& doc) {
      bool existed = exists(doc.id);
      if (!existed) ++live_delta;
      WalOp op;
      op.type = WalOpType::kAdd;
      op.id.assign(doc.id);
      op.fingerprint = doc.fingerprint;
      op.metadata.assign(doc.metadata);
      pending[op.id] = ops.size();
      ops.push_back(std::move(op));
      return existed;
    };
    for (Writer* w : group) {
      w->status = Status::Ok();
      switch (w->kind) {
        case Writer::kFlush:
          break;
        case Writer::kAdd:
          for (const DocumentInput& doc : w->docs) w->replaced = add_op(doc);
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
          pending[op.id] = ops.size();
          ops.push_back(std::move(op));
          break;
        }
        case Writer::kCheckAndAdd: {
          const DocumentInput& doc = w->docs[0];
          std::vector<StoredDocument> found;
          if (Status searched = SearchLocked(doc.fingerprint, w->k, &found); !searched.ok()) {
            w->status = searched;
            break;
          }
          std::vector<StoredDocument>& dups = w->check->duplicates;
          for (StoredDocument& d : found) {
            if (d.id != doc.id && pending.find(std::string_view(d.id)) == pending.end()) {
              dups.push_back(std::move(d));
            }
          }
          for (const auto& [id, index] : pending) {
            const WalOp& op = ops[index];
            if (op.type != WalOpType::kAdd || id == doc.id) continue;
            int d = HammingDistance(op.fingerprint, doc.fingerprint);
            if (d <= w->k) dups.push_back({op.id, op.fingerprint, op.metadata, d});
          }
          std::sort(dups.begin(), dups.end(), ByDistanceThenId);
          if (w->always_add || dups.empty()) {
            w->check->added = true;
            w->check->replaced = add_op(doc);
          }
          break;
        }
      }
    }
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
    Status applied;
    {
      std::unique_lock<std::shared_mutex> state(state_mu_);
      for (const WalOp& op : ops) {
        if (Status put = mem_->Put(op); !put.ok() && applied.ok()) applied = put;
      }
      live_ = static_cast<uint64_t>(static_cast<int64_t>(live_) + live_delta);
    }
    if (!applied.ok()) {
      // Logged (it comes back at the next open) but not searchable in this process.
      NoteWriteError(applied);
      for (Writer* w : group) w->status = applied;
      return applied;
    }
    writes_.fetch_add(ops.size(), std::memory_order_relaxed);
    wal_bytes_.store(wal_->size());
  }
  if (force_flush || mem_->size() >= options_.memtable_limit ||
      (options_.wal_flush_bytes > 0 && wal_->size() >= options_.wal_flush_bytes)) {
    if (force_flush) NEARDUP_RETURN_IF_ERROR(RepairLog());
    Status status = FlushMemTableLocked();
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
  return store::WriteManifest(fs_, dir_, m);
}

Status DocumentStoreImpl::FlushMemTableLocked() {
  if (mem_->size() == 0) {
    if (options_.sync_mode == SyncMode::kNone) return wal_->Sync();
    return Status::Ok();
  }
  std::vector<SegmentEntry> entries;
  entries.reserve(mem_->size());
  for (const auto& [id, entry] : mem_->entries()) {
    entries.push_back({id, entry.fingerprint, entry.metadata, entry.tombstone});
  }
  std::lock_guard<std::mutex> manifest_lock(manifest_mu_);
  const uint64_t segment_number = next_file_number_++;
  const uint64_t new_wal_number = next_file_number_++;
  const std::string segment_path = store::JoinPath(dir_, store::SegmentFileName(segment_number));
  const std::string new_wal_path = store::JoinPath(dir_, store::WalFileName(new_wal_number));
  // On failure (e.g. disk full) the half-written files go; the old log stays the live one.
  auto fail = [&](const Status& status) {
    (void)fs_->Remove(segment_path);
    (void)fs_->Remove(new_wal_path);
    return status;
  };
  Status written = store::WriteSegment(fs_, segment_path, design_, std::move(entries));
  if (!written.ok()) return fail(written);
  Result<std::shared_ptr<Segment>> segment = Segment::Open(segment_path, design_, false);
  if (!segment.ok()) return fail(segment.status());
  Result<std::unique_ptr<WalWriter>> new_wal = WalWriter::Create(fs_, dir_, new_wal_number, bits_);
  if (!new_wal.ok()) return fail(new_wal.status());
  std::vector<uint64_t> numbers;
  uint64_t live_now;
  {
    std::shared_lock<std::shared_mutex> state(state_mu_);
    numbers = segment_numbers_;
    live_now = live_;
  }
  numbers.push_back(segment_number);
  const uint64_t old_wal_number = wal_number_;
  const uint64_t old_segments_live = segments_live_;
  wal_number_ = new_wal_number;
  segments_live_ = live_now;
  Result<std::unique_ptr<MemTable>> fresh_mem =
      MemTable::Create(bits_, memtable_design_, options_.memtable_limit);
  if (!fresh_mem.ok()) return fail(fresh_mem.status());
  Status status = WriteManifestLocked(numbers);
  if (!status.ok()) {
    wal_number_ = old_wal_number;
    segments_live_ = old_segments_live;
    new_wal->reset();
    return fail(status);
  }
  {
    std::unique_lock<std::shared_mutex> state(state_mu_);
    segments_.push_back(*segment);
    segment_numbers_ = numbers;
    mem_ = std::move(*fresh_mem);
  }
  const std::string old_wal_path = wal_->path();
  wal_ = std::move(*new_wal);
  wal_bytes_.store(wal_->size());
  (void)fs_->Remove(old_wal_path);
  flushes_.fetch_add(1, std::memory_order_relaxed);
  MaybeScheduleCompaction();
  return Status::Ok();
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

void DocumentStoreImpl::CompactionLoop() {
  std::unique_lock<std::mutex> lock(compaction_mu_);
  while (true) {
    compaction_cv_.wait(lock, [&] { return compaction_requested_ || stopping_; });
    if (stopping_) return;
    compaction_requested_ = false;
    lock.unlock();
    // An error leaves the old segments in place; the next flush retries.
    if (Status status = Compact(); !status.ok()) NoteWriteError(status.WithContext("compaction"));
    lock.lock();
  }
}

Status DocumentStoreImpl::Compact() {
  if (options_.read_only) return Status::InvalidArgument(dir_ + ": store is open read-only");
  std::lock_guard<std::mutex> run_lock(compact_run_mu_);
  std::vector<std::shared_ptr<Segment>> inputs;
  std::vector<uint64_t> input_numbers;
  uint64_t number;
  {
    // The output's file number is taken together with the snapshot, so file numbers keep the
    // order of content age (RecoverStore relies on it).
    std::lock_guard<std::mutex> manifest_lock(manifest_mu_);
    std::shared_lock<std::shared_mutex> state(state_mu_);
    inputs = segments_;
    input_numbers = segment_numbers_;
    if (inputs.empty()) return Status::Ok();
    if (inputs.size() == 1 && inputs[0]->live() == inputs[0]->size()) return Status::Ok();
    number = next_file_number_++;
  }
  // Newest version of every id wins; the inputs start at the oldest segment, so removed ids
  // (tombstones) can be dropped.
  std::vector<SegmentEntry> entries;
  std::unordered_set<std::string_view> seen;
  for (size_t s = inputs.size(); s-- > 0;) {
    const Segment& seg = *inputs[s];
    for (uint32_t i = 0; i < seg.size(); ++i) {
      std::string_view id = seg.id(i);
      if (!seen.insert(id).second) continue;
      if (seg.tombstone(i)) continue;
      entries.push_back({id, seg.fingerprint(i), seg.metadata(i), false});
    }
  }
  const std::string path = store::JoinPath(dir_, store::SegmentFileName(number));
  if (Status written = store::WriteSegment(fs_, path, design_, std::move(entries)); !written.ok()) {
    (void)fs_->Remove(path);
    return written;
  }
  Result<std::shared_ptr<Segment>> merged = Segment::Open(path, design_, false);
  if (!merged.ok()) {
    (void)fs_->Remove(path);
    return merged.status();
  }
  {
    std::lock_guard<std::mutex> manifest_lock(manifest_mu_);
    std::vector<std::shared_ptr<Segment>> segments{*merged};
    std::vector<uint64_t> numbers{number};
    {
      std::shared_lock<std::shared_mutex> state(state_mu_);
      // Segments flushed while merging come after the inputs.
      for (size_t s = inputs.size(); s < segments_.size(); ++s) {
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
  return Status::Ok();
}

std::optional<StoredDocument> DocumentStoreImpl::LookupLocked(std::string_view id) const {
  if (const MemTable::Entry* entry = mem_->Find(id)) {
    if (entry->tombstone) return std::nullopt;
    return StoredDocument{std::string(id), entry->fingerprint, entry->metadata, 0};
  }
  for (size_t s = segments_.size(); s-- > 0;) {
    int64_t i = segments_[s]->Find(id);
    if (i < 0) continue;
    const auto entry = static_cast<uint32_t>(i);
    if (segments_[s]->tombstone(entry)) return std::nullopt;
    return StoredDocument{std::string(id), segments_[s]->fingerprint(entry),
                          std::string(segments_[s]->metadata(entry)), 0};
  }
  return std::nullopt;
}

bool DocumentStoreImpl::ShadowedLocked(std::string_view id, size_t segment_index) const {
  if (mem_->Find(id) != nullptr) return true;
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
  NEARDUP_RETURN_IF_ERROR(mem_->Search(
      query, k, [&](const std::string& id, const MemTable::Entry& entry, int distance) {
        hits.push_back({id, entry.fingerprint, std::string(), distance});
        sources.push_back({&entry.metadata, 0, 0});
      }));
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
    stats.memtable_entries = mem_ ? mem_->size() : 0;
  }
  stats.wal_bytes = wal_bytes_.load();
  stats.wal_dropped_bytes = wal_dropped_bytes_;
  stats.wal_dropped = wal_dropped_;
  stats.wal_dropped_file = wal_dropped_file_;
  stats.disk_bytes += stats.wal_bytes;
  stats.compactions = compactions_.load();
  stats.flushes = flushes_.load();
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
