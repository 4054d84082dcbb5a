// Dedup: clusters the near-duplicate documents of a corpus and decides which one of each cluster
// to keep (the library behind `neardup dedup`).
//
// Flow: stream documents (neardup/document_reader.h) -> fingerprint them on all cores -> self-join
// the fingerprints within Hamming distance k -> optionally verify each candidate pair with the
// exact shingle Jaccard (re-reading only the documents involved) -> connected components
// (union-find) -> keep one document per component.
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
#include <vector>

#include "neardup/document_reader.h"
#include "neardup/fingerprint.h"
#include "neardup/fingerprinter.h"
#include "neardup/hamming_index.h"
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
  // Pairs of fingerprints within this Hamming distance are candidate duplicates.
  // kAutoDistance (the default) picks k from the number of documents, see ResolveMaxDistance:
  // k = 16, tuned on devpairs (docs/quality.md) for recall with verification on, needs a join close
  // to all pairs, so corpora of more than kAutoDistanceLimit documents get k = 6, which the
  // permuted-table index joins in near-linear time (docs/dedup.md).
  static constexpr int kAutoDistance = -1;
  static constexpr int kAutoDistanceSmallCorpus = 16;
  static constexpr int kAutoDistanceLargeCorpus = 6;
  static constexpr size_t kAutoDistanceLimit = 200000;
  int max_distance = kAutoDistance;
  KeepPolicy keep = KeepPolicy::kFirst;
  std::string keep_field;  // for KeepPolicy::kField
  // Candidate pairs whose shingle Jaccard is below this are dropped; <= 0 disables verification.
  // Tuned on devpairs (docs/quality.md).
  double verify_threshold = 0.4;
  // Threads for fingerprinting, joining and verifying; <= 0 means DefaultThreadCount().
  int threads = 0;
  // How the fingerprints are self-joined: kAuto uses the permuted-table index
  // (neardup/permuted_index.h) for k <= 8 and the block join (k+1 pigeonhole blocks, or all pairs
  // when blocks get narrower than 6 bits) above; both are exact, so results are identical.
  enum class Join { kAuto, kPermutedIndex, kBlocks };
  Join join = Join::kAuto;
  // Documents fingerprinted per parallel batch.
  size_t batch_size = 4096;
  DocumentReaderOptions reader;
};

// The k a run over `document_count` documents uses: options.max_distance, or for kAutoDistance
// kAutoDistanceSmallCorpus up to kAutoDistanceLimit documents and kAutoDistanceLargeCorpus above.
int ResolveMaxDistance(const DedupOptions& options, size_t document_count);

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
  int distance = 0;
  double similarity = -1;  // shingle Jaccard when verified (or 1 for exact duplicates), else -1
};

struct ClusterMember {
  uint32_t document = 0;
  int distance_to_kept = 0;  // Hamming distance of fingerprints
  uint32_t via = 0;          // the member that linked this one (the kept one when direct)
  int distance_to_via = 0;
  double similarity_to_via = -1;
  std::string reason;  // "exact_duplicate", "near_duplicate" or "chained" (not within k of kept)
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
};

struct DedupReport {
  std::vector<DedupDocument> documents;     // canonical order
  std::vector<std::string> input_files;     // DocumentReader::files()
  std::vector<DuplicatePair> pairs;         // accepted pairs, sorted by (a, b)
  uint64_t candidate_pairs = 0;             // pairs within k before verification
  int max_distance = 0;                     // the k used (see ResolveMaxDistance)
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
  uint64_t removed_count() const;
};

// Progress of a running dedup: the stage name, units done (input bytes while reading, documents
// while verifying), the total of those units (0 when unknown) and the documents handled so far.
using DedupProgress = std::function<void(const std::string& stage, uint64_t done, uint64_t total,
                                         uint64_t documents)>;

// Runs the whole flow over `inputs`. Errors: unreadable inputs, bad options (InvalidArgument naming
// the option), or, when reader.strict, the first malformed record.
Result<DedupReport> RunDedup(const std::vector<std::string>& inputs, const DedupOptions& options,
                             const DedupProgress& progress = nullptr);

// Clusters `pair_count` pairs over `document_count` documents and picks the kept one of each
// component (exposed for tests). `documents` supplies lengths, scores and fingerprints.
void BuildClusters(const std::vector<DedupDocument>& documents,
                   const std::vector<DuplicatePair>& pairs, KeepPolicy keep,
                   std::vector<DedupCluster>* clusters, std::vector<bool>* removed);

struct DedupOutputOptions {
  // Directory for clusters.jsonl, keep.txt, remove.txt and summary.json; empty writes only the
  // clusters (JSONL) to standard output.
  std::string directory;
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
Status WriteDedupOutputs(const DedupReport& report, const DedupOutputOptions& output);

// The summary.json text of a report.
std::string DedupSummaryJson(const DedupReport& report, const DedupOptions* options);

// Parses "first", "longest" or "field:NAME".
Status ParseKeepPolicy(const std::string& text, KeepPolicy* policy, std::string* field);

}  // namespace neardup

#endif  // NEARDUP_DEDUP_H_
