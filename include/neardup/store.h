// DocumentStore: a persistent, crash-safe directory of (external id, fingerprint, metadata)
// documents answering "which stored documents are duplicates of this text" with the rule of
// `neardup dedup` (StoreRule::kDedup, the default: exact copy, whitespace-only copy, or a MinHash
// LSH candidate whose verified shingle Jaccard reaches the threshold; each document then carries a
// DocumentSketch, neardup/sketch.h), and "which are within Hamming distance k of this fingerprint".
//
// A store lives in one directory: a write-ahead log (WAL) of recent adds and removes, immutable
// memory-mapped segment files holding everything older, and a MANIFEST naming the live files (see
// docs/storage_format.md). Once Add, Remove or CheckAndAdd returns OK the change survives a crash
// of the process (kill -9) and, with SyncMode::kEveryWrite or kGroupCommit, a power loss.
//
// Re-adding an existing external id REPLACES the stored document (fingerprint and metadata); the
// result says whether a document was replaced.
//
// Thread safety: a DocumentStore is safe for concurrent use by many threads. Searches and Gets run
// in parallel with each other and with writes and see a consistent snapshot; concurrent writers
// are batched into one log write and one fsync (group commit). Only one process may open a
// directory at a time (enforced with a lock file).
#ifndef NEARDUP_STORE_H_
#define NEARDUP_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/env.h"
#include "neardup/export.h"
#include "neardup/fingerprint.h"
#include "neardup/index_planner.h"
#include "neardup/minhash_lsh.h"
#include "neardup/pair_rule.h"
#include "neardup/sketch.h"
#include "neardup/status.h"

namespace neardup {

// When acknowledged writes reach stable storage.
enum class SyncMode {
  // Every write batch is fdatasync'ed before it is acknowledged. Concurrent writers share one
  // fsync (group commit). Survives kill -9 and power loss.
  kEveryWrite,
  // Like kEveryWrite, but a writer that leads a batch alone first waits group_commit_interval_ms
  // for more writers to join, trading latency for fewer fsyncs (writers that queued up during the
  // previous batch's fsync are committed at once). Survives kill -9 and power loss.
  kGroupCommit,
  // Written to the OS but never fsync'ed by a write (only by Flush/Close). Survives kill -9 but NOT
  // power loss. For bulk loading.
  kNone,
};

// What makes a stored document a duplicate of a new one; chosen when a store is created.
enum class StoreRule {
  // neardup dedup's rule, applied by the same code: candidates are the stored documents with the
  // same whitespace-free text hash and those sharing a MinHash LSH band key (at most
  // bucket_window per band: the newest ones, dedup's bucket rule), and a candidate is a duplicate
  // when it is an exact copy, a whitespace-only copy, or its verified shingle Jaccard reaches the
  // threshold. Every added document carries a DocumentSketch. Stores of format version 3.
  kDedup,
  // SimHash only: duplicates are the stored fingerprints within Hamming distance k. The rule of
  // stores of format version 2 (before the dedup rule), which keep working unchanged.
  kSimHash,
};
// "dedup" or "simhash".
NEARDUP_EXPORT const char* StoreRuleName(StoreRule rule);

struct NEARDUP_EXPORT StoreOptions {
  // Create the directory/store if it does not exist. If false, Open fails with NotFound.
  bool create_if_missing = true;
  // Fail with AlreadyExists if a store is already there.
  bool error_if_exists = false;

  // The following apply when a store is created and are recorded in its MANIFEST. Opening an
  // existing store with a different value set here (bits, indexed_k, design, a non-empty
  // fingerprint_options) fails with InvalidArgument naming both values; unset means "the store's".
  std::optional<int> bits;  // fingerprint width: 64 or 128 (64 for a new store when unset)
  // Searches with k <= indexed_k use the index tables (exact, pigeonhole); larger k (up to bits)
  // scans every fingerprint. 0..15 (3 for a new store when unset).
  std::optional<int> indexed_k;
  // The index design of a new store is planned (neardup/index_planner.h) for `expected_size`
  // documents within this budget for the index (ids, fingerprints, tables, directories).
  // Stats().index_design says what was chosen.
  MemoryBudget memory_budget{0, 128};
  double expected_size = 1e7;
  std::optional<IndexDesign> design;  // overrides the planner
  // What the fingerprints mean: FingerprintOptionsToString of the options that made them
  // (neardup/fingerprinter.h), recorded at creation. A store created with it checks it at every
  // open: it must parse, and a different non-empty value is refused.
  std::string fingerprint_options;
  // The duplicate rule; nullopt: the store's (kDedup for a new store).
  std::optional<StoreRule> rule;
  // kDedup: the Jaccard threshold (also the verification threshold), bands and rows (unset:
  // chosen from the threshold by ChooseLshParameters), bucket window and seed. nullopt: the store's
  // (MinHashLshOptions{} for a new store: threshold 0.5, as `neardup dedup`).
  std::optional<MinHashLshOptions> lsh;
  // kDedup: the `contained` reason of the store's pair rule (PairRuleOptions: a pair whose smaller
  // document lies at least containment_threshold inside the larger, holding at least
  // containment_min_shingles shingles and containment_min_ratio of the larger's; 0 turns it off).
  // Recorded at creation, so a later change of the defaults does not change a store's answers.
  // Each nullopt: the store's (PairRuleOptions{}'s, `neardup dedup`'s defaults, for a new store).
  // They also take part in choosing bands and rows, as in dedup (ResolveDedupLsh).
  std::optional<double> containment_threshold;
  std::optional<double> containment_min_shingles;
  std::optional<double> containment_min_ratio;
  // kDedup: the `edited` reason of the store's pair rule (PairRuleOptions::edited_threshold, 0 =
  // off, and edited_min_jaccard). Recorded at creation like the containment options; a store
  // created before the reason existed answers with it off, and asking such a store for another
  // value is an error. Each nullopt: the store's (PairRuleOptions{}'s for a new store).
  std::optional<double> edited_threshold;
  std::optional<double> edited_min_jaccard;

  SyncMode sync_mode = SyncMode::kEveryWrite;
  int group_commit_interval_ms = 2;  // for SyncMode::kGroupCommit

  // When the in-memory part (documents not yet in a segment) holds this many entries it is written
  // to a new segment and the log is started afresh.
  size_t memtable_limit = 65536;
  // ... and so it is when the log reaches this many bytes (rewrites of the same ids, removes and
  // re-adds grow the log but not the memtable). Bounds the log, hence the replay at the next open
  // (docs/storage_format.md, "Reopen time"). 0 = no bound.
  uint64_t wal_flush_bytes = uint64_t(64) << 20;
  // A background thread merges all segments into one when there are more than this many.
  // 0 disables automatic compaction (Compact() still works).
  size_t compaction_trigger = 8;

  // Limits on what a document may carry.
  size_t max_id_bytes = 2048;
  size_t max_metadata_bytes = 4096;

  // Verify every segment's whole-file checksum when opening (reads every byte once). Without it,
  // damage goes undetected until read, but every offset read from a file is still bounds-checked:
  // a damaged file gives wrong answers or an error, never a crash.
  bool verify_checksums_on_open = true;

  // Open without writing anything to the directory (no log truncation, no clean-up, no flush at
  // Close); writes fail with InvalidArgument. Takes a shared lock when it can; while another
  // process has the store open for writing (`neardup serve`), it reads a snapshot of what that
  // writer had made durable at the time of the open instead. For `neardup index stats`, `get`,
  // `query` and inspection.
  bool read_only = false;

  // The file layer the store writes through (neardup/env.h); null = Env::Default(), the
  // operating system's. Must outlive the store. A fault-injection Env plugs in here.
  Env* env = nullptr;
};

// One stored document as returned by Get, Search and the checks.
struct StoredDocument {
  std::string id;  // the caller's external id (e.g. a URL)
  Fingerprint fingerprint;
  std::string metadata;  // opaque caller bytes (e.g. a JSON object), may be empty
  int distance = 0;      // Hamming distance to the query's fingerprint (Search and checks only)
  // Checks only: the reason's similarity (PairDecision::similarity: the verified shingle Jaccard,
  // the containment for kContained, the unit-set Jaccard for kEdited; 1 for exact and
  // whitespace-only copies); unset when not computed (a kSimHash store, Get and Search).
  std::optional<double> similarity = std::nullopt;
  // Checks only: why it is a duplicate (neardup/pair_rule.h; DuplicateReasonName gives the API's
  // string). kNearDuplicate in a kSimHash store (within distance k).
  DuplicateReason reason = DuplicateReason::kNearDuplicate;
};

// What a check did for one document.
struct CheckResult {
  // The stored (or earlier in the same batch) documents it duplicates: kDedup stores sorted by
  // (similarity descending, id), kSimHash stores by (distance, id).
  std::vector<StoredDocument> duplicates;
  bool added = false;     // the document was written
  bool replaced = false;  // ... and it replaced a document with the same id
  // More duplicates were found than CheckOptions::limit: `duplicates` holds the first `limit`.
  bool truncated = false;
};

// Whether a check adds the document.
enum class AddMode {
  kIfNew,   // only when it duplicates nothing (the crawler's "have I seen this?")
  kAlways,  // always (a duplicate is reported and stored too)
  kNever,   // a pure lookup: nothing is written (e.g. benchmark decontamination)
};

struct CheckOptions {
  AddMode add = AddMode::kIfNew;
  int k = 3;  // kSimHash stores: the Hamming radius, 0..bits (ignored by kDedup stores)
  // Duplicates reported per document, the best first (0 = all). Whether a document is added does
  // not depend on it.
  size_t limit = 0;
};

// Whether the store takes writes (what the server reports in /healthz and /metrics).
enum class StoreState {
  kOk,        // reads and writes work
  kDegraded,  // the last write failed (disk full, I/O error); reads work, every later write first
              // repairs the log (truncates the failed record, reopens) and retries, so writes
              // work again once the cause is gone (space freed) and the state returns to kOk
  kClosed,    // Close() was called
};
// "ok", "degraded" or "closed".
NEARDUP_EXPORT const char* StoreStateName(StoreState state);

struct NEARDUP_EXPORT StoreHealth {
  StoreState state = StoreState::kOk;
  std::string reason;  // the error that made the store degraded (names the file); empty if ok
  uint64_t write_errors = 0;  // failed log/segment/MANIFEST writes since open
  uint64_t recoveries = 0;    // times writes worked again after a failure, since open
};

struct StoreStats {
  uint64_t documents = 0;         // live documents
  uint64_t segments = 0;          // segment files
  uint64_t segment_entries = 0;   // entries in segments (including replaced/removed ones)
  uint64_t memtable_entries = 0;  // entries not yet in a segment
  uint64_t wal_bytes = 0;         // size of the current log
  uint64_t disk_bytes = 0;        // total size of segment files and the log
  uint64_t compactions = 0;       // compactions finished since open
  uint64_t flushes = 0;           // memtable flushes since open
  double flush_seconds = 0;       // time spent flushing since open (writers wait meanwhile)
  double compaction_seconds = 0;  // time spent compacting since open (in the background)
  uint64_t searches = 0;          // searches since open
  uint64_t wal_syncs = 0;         // fdatasync calls on the log since open
  uint64_t writes = 0;            // adds and removes acknowledged since open
  double open_seconds = 0;        // time Open took
  int bits = 64;
  int indexed_k = 3;         // searches with k <= indexed_k use the tables, larger k scan
  std::string index_design;  // the design's description, e.g. "5 blocks ..., choose 2"
  // Index bytes per fingerprint: measured over the segment files' index sections, or the
  // planner's figure for a store just created (0 when unknown).
  double index_bytes_per_fingerprint = 0;
  std::string fingerprint_options;  // as recorded at creation
  StoreRule rule = StoreRule::kSimHash;
  // kDedup stores: the LSH options recorded at creation (bands and rows resolved), and the
  // verification form of the shingle sets (e.g. "narrowed32-elias-fano"; with the edited reason
  // on, "narrowed32-elias-fano+units20": the 20-bit unit sets are kept too, or
  // "narrowed32-elias-fano+units" in a store made with 32-bit unit sets, verification form 2).
  MinHashLshOptions lsh;
  std::string verification_form;
  // kDedup stores: the pair rule the store answers with (jaccard_threshold = lsh.threshold, and the
  // containment and edited options recorded at creation).
  PairRuleOptions pair_rule;
  StoreHealth health;  // same as Health()
  // A damaged or torn last log record found at open: its bytes were dropped from the log (an
  // acknowledged write may be among them) and kept in `wal_dropped_file` (*.corrupt, never
  // deleted); `wal_dropped` says where and why. 0 / empty when the log ended cleanly.
  uint64_t wal_dropped_bytes = 0;
  std::string wal_dropped;
  std::string wal_dropped_file;
};

// One document to add or check.
struct DocumentInput {
  std::string_view id;
  Fingerprint fingerprint;
  std::string_view metadata;
  // Required by kDedup stores for every add and check (DocumentSketcher::Sketch, with the store's
  // LshOptions(): the tag must match); ignored by kSimHash stores. Not owned.
  const DocumentSketch* sketch = nullptr;
};

class NEARDUP_EXPORT DocumentStore {
 public:
  // Opens (or creates, per options) the store in directory `dir`. Replays the log; a torn final
  // log record (from a crash mid-write) is detected by its checksum and truncated. Any other
  // damage (bad checksum in a segment, MANIFEST or mid-log) fails with Corruption naming the file;
  // RecoverStore salvages what is intact.
  static Result<std::unique_ptr<DocumentStore>> Open(const std::string& dir,
                                                     const StoreOptions& options);

  virtual ~DocumentStore() = default;  // Close()s if still open

  // Adds (or replaces) one document. Durable when OK is returned (per SyncMode).
  // InvalidArgument for an empty/oversized id, oversized metadata or a fingerprint of the wrong
  // width. `replaced` (if non-null) is set to whether a document with this id existed.
  virtual Status Add(const DocumentInput& doc, bool* replaced = nullptr) = 0;
  // Adds many documents as one atomic log write (all or none are applied).
  virtual Status AddBatch(std::span<const DocumentInput> docs) = 0;

  // Checks each document, in order, against the store and against the earlier documents of the
  // batch that are added, with the store's rule, and adds it per options.add. The whole batch is
  // one atomic step (one log record): no concurrent check can slip a duplicate in between a check
  // and its add, so two writers racing with near-identical pages cannot both be admitted. A stored
  // document with the same id as the checked one is never its duplicate (re-adding replaces it).
  // InvalidArgument (naming the document) for a bad document, a missing sketch or one made with
  // other LSH parameters (kDedup), or k outside [0, bits] (kSimHash); nothing is written then.
  virtual Result<std::vector<CheckResult>> CheckBatch(std::span<const DocumentInput> docs,
                                                      const CheckOptions& options) = 0;
  // One document: CheckBatch of {doc} with add = always_add ? kAlways : kIfNew, and k.
  virtual Result<CheckResult> CheckAndAdd(const DocumentInput& doc, int k, bool always_add) = 0;

  // Every live document within distance k of `query`, sorted by (distance, id), at most `limit`
  // (0 = no limit). InvalidArgument if k is outside [0, bits] or the width differs.
  virtual Result<std::vector<StoredDocument>> Search(const Fingerprint& query, int k,
                                                     size_t limit = 0) const = 0;

  // The document with this id, or NotFound.
  virtual Result<StoredDocument> Get(std::string_view id) const = 0;

  // Removes the document with this id. NotFound if there is none (nothing is logged then).
  virtual Status Remove(std::string_view id) = 0;

  // kDedup stores: the LSH options sketches must be made with (DocumentSketcher::Create); a
  // kSimHash store: nullopt.
  virtual std::optional<MinHashLshOptions> LshOptions() const = 0;
  // kDedup stores whose pair rule has the `edited` reason on: sketches must carry the unit set
  // (DocumentSketcher::Create with with_units), else an add or check is refused.
  virtual bool SketchesNeedUnits() const = 0;
  // ... and the width of their unit elements (DocumentSketcher::Create's unit_bits):
  // ShingleSimilarity::kUnitBits (20), or 32 in a store created with 32-bit unit sets
  // (verification form 2), which keeps answering with them; a sketch of another width is
  // refused. 0 when SketchesNeedUnits() is false.
  virtual int SketchUnitBits() const = 0;

  virtual StoreStats Stats() const = 0;
  // Cheap (one mutex); safe to call from a health check at any rate.
  virtual StoreHealth Health() const = 0;

  // Writes the in-memory part to a segment and fsyncs everything.
  virtual Status Flush() = 0;
  // Merges all segments into one (dropping replaced and removed entries). Queries and writes keep
  // running meanwhile and see a consistent snapshot.
  virtual Status Compact() = 0;
  // Flushes, stops background work and releases the directory. Later calls fail.
  virtual Status Close() = 0;
};

// What RecoverStore salvaged.
struct RecoveryReport {
  uint64_t documents = 0;          // live documents in the recovered store
  uint64_t segments_kept = 0;      // segment files kept whole
  uint64_t segments_salvaged = 0;  // damaged segment files from which entries were salvaged
  uint64_t entries_lost = 0;       // entries that could not be read back
  uint64_t wal_records_kept = 0;
  uint64_t wal_bytes_dropped = 0;  // log bytes after the first bad record
  // Documents of a dedup-rule store kept without their sketch (a damaged sketch section): found
  // by fingerprint queries, not by the rule, until their texts are added again.
  uint64_t sketches_lost = 0;
  std::vector<std::string> messages;  // one line per problem found, naming the file
};

// Salvages what is intact in a damaged store directory: keeps every segment whose checksum holds,
// salvages the readable entries of damaged segments, replays the log up to its first bad record,
// and writes a fresh MANIFEST and segment. Damaged files are renamed to *.corrupt, never deleted.
NEARDUP_EXPORT Result<RecoveryReport> RecoverStore(const std::string& dir);

}  // namespace neardup

#endif  // NEARDUP_STORE_H_
