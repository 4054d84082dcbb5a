// Dedup: clusters the near-duplicate documents of a corpus and decides which one of each cluster
// to keep (the library behind `neardup dedup`).
//
// Flow: stream documents (neardup/document_reader.h) -> per document, on all cores: the SimHash
// fingerprint and the MinHash band keys of its verification shingles (neardup/minhash_lsh.h),
// the keys spilled band by band to a temporary file -> candidate pairs: documents sharing a band
// key (MinHash LSH, one band at a time, each band's sorted pairs spilled as a run), optionally
// plus fingerprints within a small Hamming distance k (the permuted-table index), plus identical
// texts -> the runs merged (k-way) into distinct pairs -> verification of each candidate pair by
// the exact shingle Jaccard (a second pass over the inputs computes the shingles of only the
// documents involved and spills them; standard input is spooled to a temporary file so it can be
// read twice) -> connected components (neardup/clusters.h) -> keep one document per component.
// DedupOptions::spill = false keeps all of it in memory instead, with the same result.
//
// What "duplicate" means does not depend on the corpus size: a pair is a duplicate when its texts
// are identical, identical but for whitespace, or their shingle Jaccard reaches the verification
// threshold (by default the LSH threshold, 0.5). The candidate stages only decide which pairs are
// looked at; the LSH stage finds a pair at Jaccard J with probability 1 - (1 - J^r)^b whatever N.
// JudgePair() applies the same rule to two texts.
//
// Chaining (A~B, B~C but A !~ C) is allowed: a cluster is a connected component. Each removed
// member records the neighbour that linked it to the cluster ("via", found breadth-first from the
// kept document) and its own Hamming distance to the kept document, so chained members are
// visible in the output.
//
// Determinism: documents are numbered in the reader's canonical order (sorted input paths, then
// line), the self-join is exact, and ties are broken by that number, so the same input gives the
// same clusters and kept documents whatever the thread count or the order inputs were named in.
//
// Thread safety: RunDedup() and WriteDedupOutputs() share no state between calls; a DedupReport is
// a plain value.
#ifndef NEARDUP_DEDUP_H_
#define NEARDUP_DEDUP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/document_reader.h"
#include "neardup/export.h"
#include "neardup/fingerprint.h"
#include "neardup/fingerprinter.h"
#include "neardup/hamming_index.h"
#include "neardup/minhash_lsh.h"
#include "neardup/pair_rule.h"
#include "neardup/status.h"

namespace neardup {

enum class KeepPolicy {
  kFirst,    // the first document in canonical order
  kLongest,  // the longest normalised text (bytes after markup stripping, NFKC, whitespace
             // folding), so markup does not count; ties go to the first
  kField,  // the highest numeric value of DedupOptions::keep_field; missing values lose; ties first
};

struct DedupOptions {
  // How texts become fingerprints (normalisation, tokenizer, top-k, bits).
  // The Fingerprinter defaults strip markup too, so HTML-wrapped copies match the bare text.
  FingerprintOptions fingerprint;
  // The MinHash LSH candidate stage: the Jaccard threshold (which also sets the verification
  // threshold by default), bands and rows (chosen from the threshold unless given), bucket window.
  MinHashLshOptions lsh;
  // Which candidate stages run: kLsh (the default) the MinHash LSH stage; kLshAndSimHash adds the
  // pairs within distance k of the SimHash join; kSimHash the join alone. All candidates are
  // verified the same way. On devpairs, alone and among a million distractors, the SimHash join at
  // k = 3 added no accepted pair to the LSH stage (docs/quality.md), so it is off by default.
  enum class Candidates { kLshAndSimHash, kLsh, kSimHash };
  Candidates candidates = Candidates::kLsh;
  // Pairs of fingerprints within Hamming distance k are candidates (when the SimHash join runs);
  // 0..bits/8. The permuted-table index joins small k in near-linear time; the same k at any
  // corpus size. (`k` is the radius of a search or join everywhere in the API; `indexed_k` the
  // largest radius an index's tables answer exactly, `max_search_k()` the largest k an index
  // accepts, `max_query_k` the largest k a server request may ask for.)
  static constexpr int kDefaultK = 3;
  int k = kDefaultK;
  KeepPolicy keep = KeepPolicy::kFirst;
  std::string keep_field;  // for KeepPolicy::kField
  // Candidate pairs whose shingle Jaccard is below this are dropped; unset (the default) uses
  // lsh.threshold; 0 disables verification (every candidate is accepted).
  std::optional<double> verify_threshold;
  // The pair rule's `contained` reason (neardup/pair_rule.h): a pair whose smaller shingle set
  // lies at least containment_threshold inside the larger one is a duplicate when the smaller
  // holds at least containment_min_shingles shingles and containment_min_ratio of the larger's;
  // containment_threshold 0 turns the reason off.
  double containment_threshold = PairRuleOptions().containment_threshold;
  double containment_min_shingles = PairRuleOptions().containment_min_shingles;
  double containment_min_ratio = PairRuleOptions().containment_min_ratio;
  // The pair rule's `edited` reason: a pair of plain shingle Jaccard >= edited_min_jaccard whose
  // unit (word / Han character) sets reach a Jaccard of edited_threshold; on by default (0.8, from
  // PairRuleOptions), 0 turns it off.
  // Verification then judges every candidate by its shingle sets first (PairRule::DeferredUnits)
  // and builds unit sets only for the documents of the pairs that reach the unit comparison, in
  // one more walk over the inputs for those documents (none when no pair reaches it).
  double edited_threshold = PairRuleOptions().edited_threshold;
  double edited_min_jaccard = PairRuleOptions().edited_min_jaccard;
  // Boilerplate weights (neardup/pair_rule.h): the per-document pass counts every shingle's
  // document frequency in a count-min sketch of at most boilerplate_sketch_bytes (the input's
  // size rounded up to a power of two when smaller), and verification weighs a shingle found in
  // F or more documents F / df (F: BoilerplateOptions; PairRule::boilerplate_documents()), so a
  // copy wrapped in boilerplate is judged by its content and pages that share only a template
  // score low. Needs the LSH stage and verification (the sets are cut there). Off by default:
  // with it, whether two documents are duplicates depends on the rest of the corpus (and on its
  // size, through the sketch's resolution), which the online store cannot reproduce
  // (docs/quality.md, "Defaults and why").
  bool boilerplate = false;
  BoilerplateOptions boilerplate_options;
  // The sketch's largest size (option boilerplate_sketch_mb; FrequencySketchFor in
  // neardup/dedup_stages.h): 512 MiB keeps F at min_documents up to about 3 GB of input.
  size_t boilerplate_sketch_bytes = size_t{512} << 20;
  // Threads for fingerprinting, joining and verifying; <= 0 means DefaultThreadCount(). With more
  // than one, the calling thread reads the next batch of documents while that many fingerprint
  // the current one.
  int threads = 0;
  // Where the run keeps its intermediate data. true (the default): the band keys, each band's
  // candidate pairs (sorted runs, merged on the fly) and the shingle sets of the documents to
  // verify go to unlinked temporary files in temp_directory (they vanish when the run ends, even
  // if it is killed), so memory holds about sizeof(DedupDocument) per document plus the accepted
  // pairs whatever the signature size or the number of candidate pairs. false: all in memory
  // (band keys 4 bytes per document and band, 8 bytes per candidate pair and band that found it,
  // the shingle sets of every document to verify). Both give the same pairs and clusters.
  bool spill = true;
  std::string temp_directory;  // empty: $TMPDIR, else /tmp
  // With the LSH stage and verification, the per-document pass that computes the MinHash
  // signatures also keeps every document's narrowed shingle set (in temp_directory when spilling,
  // else in memory) while they fit in this many bytes, so verification reads them instead of
  // reading and normalising the documents in its pairs a second time. The documents after the
  // first one that does not fit go through that second pass. The same pairs and clusters at any
  // value; 0 always uses the second pass. Unit sets (edited_threshold > 0) are not kept here: they
  // are built later, for the few pairs that need them.
  uint64_t first_pass_set_bytes = uint64_t{256} << 20;
  // Documents in memory in the fingerprinting stage: two batches of half this size alternate (one
  // fingerprinted while the next is read).
  size_t batch_size = 4096;
  // Record each stage's peak resident memory (Linux: resets the process's peak counter through
  // /proc/self/clear_refs at each stage, so only for a process of its own, like the CLI).
  bool measure_stage_memory = false;
  DocumentReaderOptions reader;
};

// The verification threshold a run uses: options.verify_threshold, or lsh.threshold when it is
// unset (0 = no verification).
NEARDUP_EXPORT double ResolveVerifyThreshold(const DedupOptions& options);

// The pair rule a run applies: the verification threshold (ResolveVerifyThreshold) and the
// containment options.
NEARDUP_EXPORT PairRuleOptions ResolvePairRule(const DedupOptions& options);

// The MinHash LSH options a run uses: options.lsh, with bands and rows (when not given) chosen
// for the lowest plain Jaccard the pair rule accepts (LowestAcceptedJaccard: below the threshold
// when `contained` is on), so the LSH stage finds contained pairs too. Errors as
// ResolveLshParameters.
NEARDUP_EXPORT Result<MinHashLshOptions> ResolveDedupLsh(const DedupOptions& options);

// The checks RunDedup and JudgePair make before any work: InvalidArgument naming the option (k,
// verify_threshold, keep_field, the LSH threshold, bands and rows, the fingerprint width).
NEARDUP_EXPORT Status ValidateDedupOptions(const DedupOptions& options);

// Per-document facts kept in memory (tens of bytes plus the id).
struct DedupDocument {
  std::string id;
  Fingerprint fingerprint;
  uint64_t text_bytes = 0;
  uint64_t normalized_bytes = 0;  // bytes of the normalised text (computed for kLongest only)
  uint64_t content_hash = 0;  // XXH3 of the raw text: equal hashes and lengths = exact duplicates
  // XXH3 of the text without any whitespace: equal values are duplicates that differ only in
  // whitespace (including whitespace inserted inside words, a spam trick), paired even when
  // their fingerprints are farther apart than k.
  uint64_t squeezed_hash = 0;
  std::optional<double> score;
  uint32_t file_index = 0;
  uint64_t line = 0;
};

// A pair of documents (indices into DedupReport::documents, a < b) accepted as duplicates.
struct DuplicatePair {
  uint32_t a = 0;
  uint32_t b = 0;
  int distance = 0;  // Hamming distance of the fingerprints
  // The pair rule's similarity for `reason` (Jaccard, containment for kContained, unit Jaccard for
  // kEdited; 1 for exact and whitespace duplicates); unset when verification was off.
  std::optional<double> similarity = std::nullopt;
  DuplicateReason reason = DuplicateReason::kNearDuplicate;
};

struct ClusterMember {
  uint32_t document = 0;
  int distance_to_kept = 0;  // Hamming distance of fingerprints
  uint32_t via = 0;          // the member that linked this one (the kept one when direct)
  int distance_to_via = 0;
  // The pair (via, this member)'s DuplicatePair::similarity (unset when verification was off).
  std::optional<double> similarity_to_via = std::nullopt;
  // "exact_duplicate" (byte-identical to the kept one), "near_duplicate" or "contained" (paired
  // directly with the kept one, for that reason of the pair rule), or "chained" (linked through
  // another member).
  std::string reason;
  // The pair rule's reason for the pair (via, this member): DuplicateReasonName().
  DuplicateReason via_reason = DuplicateReason::kNearDuplicate;
};

struct DedupCluster {
  uint64_t cluster_id = 0;  // 0, 1, ... in order of the kept document
  uint32_t kept = 0;
  std::vector<ClusterMember> removed;  // in canonical document order
};

struct StageTiming {
  std::string stage;
  double seconds = 0;
  uint64_t items = 0;  // documents or pairs handled
  uint64_t bytes = 0;  // text bytes handled (0 when not meaningful)
  // Peak resident memory of the process during the stage (DedupOptions::measure_stage_memory;
  // read, fingerprint and minhash share one figure as they run interleaved), else 0.
  uint64_t peak_memory_bytes = 0;
};

// How close verification's decisions were: candidate pairs by similarity in kBins bins of width
// 1 / kBins (bin i holds [i / kBins, (i + 1) / kBins); 1.0 falls in the last bin).
struct SimilarityHistogram {
  static constexpr int kBins = 100;
  // Accepted pairs by their verified similarity (exact and whitespace-only copies count as 1).
  std::vector<uint64_t> accepted;
  // Rejected candidates by their exact shingle Jaccard. Verification stops comparing a pair once
  // it cannot reach the threshold, so the exact value is computed again for these: for every
  // rejected pair when the run has at most kMeasureAll candidate pairs, else for a deterministic
  // sample of 1 in rejected_sample_every (chosen by a hash of the pair).
  std::vector<uint64_t> rejected;
  static constexpr uint64_t kMeasureAll = uint64_t{1} << 16;
  uint64_t rejected_pairs = 0;         // candidate pairs verification rejected
  uint64_t rejected_measured = 0;      // of which counted in `rejected`
  uint64_t rejected_sample_every = 1;  // 1: all of them
};

struct NEARDUP_EXPORT DedupReport {
  std::vector<DedupDocument> documents;  // canonical order
  std::vector<std::string> input_files;  // DocumentReader::files()
  std::vector<DuplicatePair> pairs;      // accepted pairs, sorted by (a, b)
  uint64_t candidate_pairs = 0;          // distinct candidate pairs before verification
  uint64_t lsh_candidate_pairs = 0;      // of which found by the LSH stage
  uint64_t simhash_candidate_pairs = 0;  // of which found by the SimHash join (0 when off)
  // With both stages on: SimHash-join pairs neither the LSH stage nor the whitespace-free hash
  // found, before and after verification (what combining the two adds).
  uint64_t simhash_only_candidate_pairs = 0;
  uint64_t simhash_only_accepted_pairs = 0;
  LshJoinStats lsh_stats;            // buckets of the LSH stage
  bool spilled = false;              // DedupOptions::spill
  uint64_t spill_peak_bytes = 0;     // most bytes held in temporary files at once
  std::optional<LshParameters> lsh;  // bands and rows used (unset when the stage was off)
  std::optional<int> k;              // the k of the SimHash join (unset when it was off)
  double verify_threshold = 0;       // the threshold used (0 = off)
  PairRuleOptions rule;              // the pair rule applied (ResolvePairRule)
  // Accepted pairs by the pair rule's reason (DuplicateReasonName), for every reason.
  std::map<std::string, uint64_t> pairs_by_reason;
  // Boilerplate weights: whether they were on, F (the document count from which a shingle is
  // boilerplate; 0 when off), the frequency sketch's size and the one document in s it counted.
  bool boilerplate = false;
  uint32_t boilerplate_documents = 0;
  uint64_t boilerplate_sketch_bytes = 0;
  uint32_t boilerplate_counted_every = 0;   // the sketch counted one document in this many
  std::vector<DedupCluster> clusters;       // clusters of 2+ documents, by cluster_id
  std::vector<bool> removed;                // per document
  std::map<std::string, uint64_t> skipped;  // reader skip counts by reason
  std::map<std::string, uint64_t> failed;   // documents that could not be fingerprinted, by code
  // Records read with a fallback (DocumentReader::fallbacks(): missing id, missing score, ...).
  std::map<std::string, uint64_t> fallbacks;
  // Documents whose id is shared with another document. Each of them is renamed "id@file:line"
  // (its location) in `documents`, so the outputs never name one id twice; with
  // DocumentReaderOptions::strict a shared id is an error instead.
  uint64_t duplicate_ids = 0;
  uint64_t text_bytes = 0;
  std::vector<StageTiming> stages;
  double total_seconds = 0;
  // Candidate pairs by similarity (empty, no bins, when verification is off).
  SimilarityHistogram similarity_histogram;
  uint64_t removed_count() const;
};

// Progress of a running dedup: the stage name, units done (input bytes while reading, documents
// while verifying), the total of those units (0 when unknown) and the documents handled so far.
using DedupProgress = std::function<void(const std::string& stage, uint64_t done, uint64_t total,
                                         uint64_t documents)>;

// Runs the whole flow over `inputs`. Errors: unreadable inputs, bad options (InvalidArgument naming
// the option), or, when reader.strict, the first malformed record.
NEARDUP_EXPORT Result<DedupReport> RunDedup(const std::vector<std::string>& inputs,
                                            const DedupOptions& options,
                                            const DedupProgress& progress = nullptr);

struct DedupOutputOptions {
  // Directory for clusters.jsonl, keep.txt, remove.txt and summary.json; empty writes only the
  // clusters (JSONL) to standard output (unless !clusters_to_stdout).
  std::string directory;
  bool clusters_to_stdout = true;
  // When set, the inputs are read again and every kept document is written here as JSONL (the
  // original line for JSONL inputs, {"id","text"} for plain text files). Skipped (malformed)
  // records are not written.
  std::string write_kept_path;
  // Replace existing output files. Outputs are never written over an input (device + inode), and
  // each is written through a temporary file renamed into place (neardup/output_file.h).
  bool force = false;
  const std::vector<std::string>* inputs = nullptr;  // needed for write_kept_path
  const DedupOptions* options = nullptr;             // recorded in summary.json
};

// Writes the outputs of `report`. Every output path is checked first (AlreadyExists without
// force, InvalidArgument for an input), so a refused run writes nothing. Errors name the file.
NEARDUP_EXPORT Status WriteDedupOutputs(const DedupReport& report,
                                        const DedupOutputOptions& output);

// Appends `id` as one line of keep.txt / remove.txt (newline included): as it is, unless it holds
// a control character (U+0000..U+001F, U+007F) or starts with a double quote; then as a JSON string
// ("a\nb"), so every id takes exactly one line and `jq -R 'fromjson? // .'` gives the ids back.
NEARDUP_EXPORT void AppendIdLine(std::string_view id, std::string* out);

// The summary.json text of a report.
NEARDUP_EXPORT std::string DedupSummaryJson(const DedupReport& report, const DedupOptions* options);

// The clusters.jsonl lines of report.clusters (what WriteDedupOutputs writes), for a caller that
// writes that file in pieces (neardup.dask: one piece per partition). A document's location is
// input_files[file_index], followed by ":line" when line > 0.
NEARDUP_EXPORT std::string DedupClusterLines(const DedupReport& report);

// How a dedup run with `options` judges one pair of texts (what `neardup explain` prints).
struct PairJudgement {
  bool exact = false;            // byte-identical texts
  bool whitespace_only = false;  // identical once whitespace is removed
  int distance = 0;              // Hamming distance of the fingerprints
  bool within_k = false;         // SimHash join candidate (false when that join is off)
  int shared_bands = 0;          // LSH band keys in common (of lsh.bands)
  bool lsh_candidate = false;    // shared_bands > 0 and the LSH stage is on
  // The pair rule's similarities (neardup/pair_rule.h): Jaccard and containment of the shingle
  // sets, with boilerplate weights when frequencies were given, and the plain (unweighted)
  // Jaccard the LSH stage sees.
  double jaccard = 0;
  double containment = 0;
  double plain_jaccard = 0;
  bool size_guard = false;  // the smaller document passes the containment size guard
  // The plain Jaccard of the two unit sets (words, Han characters), which `edited` compares
  // (measured whether or not that reason is on).
  double unit_jaccard = 0;
  // The pair rule's reason (kNone: not duplicates by the rule), whatever the candidate stages.
  DuplicateReason reason = DuplicateReason::kNone;
  bool verified = false;  // the rule accepts the pair by its sets (or verification is off)
  // exact || whitespace_only || ((lsh_candidate || within_k) && verified). In a corpus, a pair
  // only in oversized LSH buckets may not be paired directly (the bucket window) but is still
  // usually linked through its bucket's chain.
  bool duplicate = false;
  LshParameters lsh;
  std::optional<int> k;  // the SimHash join's k (unset when that join is off)
  double verify_threshold = 0;
  PairRuleOptions rule;
  uint32_t boilerplate_documents = 0;  // F of the boilerplate weights (0: no weights)
};

// Judges two texts with the rule of a dedup run under `options`. `frequencies` (optional): the
// shingle frequencies of the corpus the pair comes from (as a dedup run over it counts them),
// for the boilerplate weights; without them every shingle weighs 1. Errors: bad options, or a
// text that cannot be fingerprinted or shingled.
NEARDUP_EXPORT Result<PairJudgement> JudgePair(std::string_view a, std::string_view b,
                                               const DedupOptions& options,
                                               const ShingleFrequencies* frequencies = nullptr);

// The shingle frequencies a dedup run over `inputs` with `options` counts in its first pass (for
// the boilerplate weights; see DedupOptions::boilerplate): the same sketch size, sampling and
// documents, so JudgePair(a, b, options, frequencies) decides as that run does. Reads the inputs
// once. Errors: unreadable inputs, bad options.
NEARDUP_EXPORT Result<ShingleFrequencies> CountShingleFrequencies(
    const std::vector<std::string>& inputs, const DedupOptions& options);

// Parses "first", "longest" or "field:NAME".
NEARDUP_EXPORT Status ParseKeepPolicy(const std::string& text, KeepPolicy* policy,
                                      std::string* field);

}  // namespace neardup

#endif  // NEARDUP_DEDUP_H_
