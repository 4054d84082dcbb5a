// The stages of a dedup run as pure functions over arrays: what RunDedup (neardup/dedup.h) is made
// of, and what the Python package and neardup.dask call, so that every front end finds the same
// duplicates by the same code. In order:
//
//   1. document facts   DocumentPass: per text, from ONE normalisation, the fingerprint, lengths,
//                       content and whitespace-free hashes, MinHash band keys and the narrowed
//                       shingle set; ComputeDocumentColumns for a batch.
//   2. candidates       LSH buckets (LshBucketRecordPairs and the bucket rule of
//                       neardup/minhash_lsh.h), fingerprints within k (HammingJoin,
//                       neardup/hamming_join.h), the whitespace rule (FirstOfEqualHashPairs), and
//                       the distinct merge of all of them with their sources (MergeCandidatePairs).
//   3. verification     which candidates need shingle sets (PairNeedsShingles); the accept
//                       predicate, the pair rule (neardup/pair_rule.h), over arrays of pairs
//                       (DecidePairs).
//   4. clusters         components of the accepted pairs and the kept document of each
//                       (BuildClusters).
//   5. outputs          clusters.jsonl lines and summary.json (neardup/dedup.h's writers).
//
// Documents are numbered 0, 1, ... in canonical order; every function's result depends only on its
// arguments (never on thread count, partitioning or the order records come in), so a distributed
// run that applies them partition by partition and merges gets what one process gets.
//
// Thread safety: a DocumentPass is immutable after Create() and may be used from any number of
// threads at once, each with a Scratch of its own; the free functions are pure.
#ifndef NEARDUP_DEDUP_STAGES_H_
#define NEARDUP_DEDUP_STAGES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/dedup.h"
#include "neardup/export.h"
#include "neardup/fingerprinter.h"
#include "neardup/hamming_join.h"
#include "neardup/minhash_lsh.h"
#include "neardup/pair_rule.h"
#include "neardup/shingles.h"
#include "neardup/status.h"

namespace neardup {

// ---- 1. document facts ------------------------------------------------------------------------

// The per-document pass of a dedup run with given options.
class NEARDUP_EXPORT DocumentPass {
 public:
  // Builds the engines (fingerprinter, shingler, MinHash with ResolveDedupLsh's bands and rows)
  // of `options` (ValidateDedupOptions first). Errors name the option or file.
  static Result<std::unique_ptr<DocumentPass>> Create(const DedupOptions& options);
  ~DocumentPass();
  DocumentPass(const DocumentPass&) = delete;
  DocumentPass& operator=(const DocumentPass&) = delete;

  // Buffers of one thread, reused from document to document.
  struct Scratch {
    std::string normalized;  // the normalised text of the last Fingerprint (when needed)
    std::vector<uint64_t> units, shingles;
    std::vector<uint32_t> set;  // the narrowed shingle set of the last Sketch(want_set)
    // The narrowed unit set of the last Sketch(want_set, want_units) when the pair rule's
    // `edited` reason is on (DedupOptions::edited_threshold > 0; else empty).
    std::vector<uint32_t> unit_set;
    bool shingled = false;  // the last Sketch could cut the text into shingles
  };

  // Step 1: sets facts->fingerprint, text_bytes, content_hash (XXH3-64 of the text),
  // squeezed_hash (the whitespace rule's hash) and, when the options need the normalised text
  // (keep longest, or the shingles cut from it), normalized_bytes (else 0). Leaves the other
  // fields alone. The fingerprinter's error for a text it rejects (invalid UTF-8, too long).
  Status Fingerprint(std::string_view text, Scratch* scratch, DedupDocument* facts) const;

  // Step 2, with the LSH stage (uses_lsh()): after an OK Fingerprint of the same text with the
  // same scratch, the text's band keys into keys[0, bands()) and, when `want_set`, its narrowed
  // shingle set into scratch->set (ShingleSimilarity::Narrow; empty when it has no shingles)
  // and, with `edited` on and `want_units`, its narrowed unit set into scratch->unit_set (from
  // the same cut; `neardup dedup` builds unit sets later, only for the pairs that need them).
  // False for a text without shingles: it has no band keys (`keys` is then unspecified).
  bool Sketch(std::string_view text, Scratch* scratch, std::span<uint32_t> keys, bool want_set,
              bool want_units = true) const;

  bool uses_lsh() const;
  int bands() const;  // the LSH stage's bands (0 when it is off)
  const DedupOptions& options() const;
  const Fingerprinter& fingerprinter() const;
  const ShingleSimilarity& shingler() const;
  const MinHashLsh& lsh() const;

 private:
  struct NEARDUP_HIDDEN Impl;
  explicit DocumentPass(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The facts of a batch of documents, one column each, row i for texts[i].
struct DocumentColumns {
  int bands = 0;
  std::vector<Status> status;  // OK, or why the document has no facts (it is then skipped)
  std::vector<Fingerprint> fingerprints;
  std::vector<uint64_t> text_bytes, normalized_bytes, content_hashes, squeezed_hashes;
  std::vector<uint32_t> band_keys;  // size() * bands, row-major; 0 where has_keys is 0
  std::vector<uint8_t> has_keys;    // per document (0 without the LSH stage)
  // With sets: document i's narrowed shingle set is set_values[set_offsets[i], set_offsets[i+1]).
  std::vector<uint64_t> set_offsets;
  std::vector<uint32_t> set_values;
  // With sets and the pair rule's `edited` reason on (DedupOptions::edited_threshold > 0): its
  // narrowed unit set, unit_values[unit_offsets[i], unit_offsets[i+1]) (from the same cut).
  std::vector<uint64_t> unit_offsets;
  std::vector<uint32_t> unit_values;
  size_t size() const { return status.size(); }
};

// DocumentPass over every text (Fingerprint, then Sketch with the LSH stage) on up to `threads`
// threads (<= 0: all cores); the sets only when `with_sets` (and the LSH stage runs).
NEARDUP_EXPORT void ComputeDocumentColumns(const DocumentPass& pass,
                                           std::span<const std::string_view> texts, bool with_sets,
                                           int threads, DocumentColumns* columns);

// The boilerplate weights' frequency sketch of a run (DedupOptions::boilerplate, with the LSH
// stage and verification on) over `input_bytes` of input (DocumentReader::total_input_bytes():
// the on-disk sizes of the input files, or the bytes of in-memory inputs; 0: unknown): its size
// (a quarter of the input rounded up to a power of two, at most boilerplate_sketch_bytes) and
// sample_every() s (1 unless the input is more than four times that cap), empty. The run
// counts (AddDocument, the narrowed shingle set of the facts above) document number i (reading
// order, numbering every document the reader gives, those that cannot be fingerprinted
// included) when i % s == 0 and it has shingles; Merge() of sketches counted over parts of the
// input gives the sketch of the whole, and PairRule::Create(rule, &sketch,
// options.boilerplate_options) the run's weights.
NEARDUP_EXPORT ShingleFrequencies FrequencySketchFor(uint64_t input_bytes,
                                                     const DedupOptions& options);

// ---- 2. candidates ----------------------------------------------------------------------------

// The bucket of band `band`'s key `key`: records with equal values are one LSH bucket.
inline uint64_t LshBucketKey(int band, uint32_t key) {
  return static_cast<uint64_t>(band) << 32 | key;
}

// The LSH stage over (bucket, document) records in any order (the buckets of one shuffle
// partition, or of all documents): each bucket's distinct documents, sorted, yield BucketPairs
// (neardup/minhash_lsh.h) with `window`; the result is their distinct union, sorted. Adds to
// `stats` (may be null) as LshCandidatePairs counts (candidate_pairs included).
NEARDUP_EXPORT std::vector<LshPair> LshBucketRecordPairs(std::span<const uint64_t> buckets,
                                                         std::span<const uint64_t> documents,
                                                         uint32_t window, LshJoinStats* stats);

// The whitespace rule: among (hash, document) records in any order, every document is paired
// with the smallest document of equal hash, (first, document), sorted. With the documents'
// squeezed hashes these are the pairs that differ only in whitespace.
NEARDUP_EXPORT std::vector<LshPair> FirstOfEqualHashPairs(std::span<const uint64_t> hashes,
                                                          std::span<const uint64_t> documents);

// Where a candidate pair came from (bits of a source mask).
enum CandidateSource : uint8_t {
  kLshCandidate = 1,         // shares an LSH bucket
  kSimHashCandidate = 2,     // fingerprints within k
  kWhitespaceCandidate = 4,  // equal whitespace-free hash (a duplicate without verification)
};

// One sorted list of distinct candidate pairs, packed a << 32 | b (a < b), from one source.
struct CandidateRun {
  std::span<const uint64_t> pairs;
  uint8_t source = 0;
};

// The distinct merge: the union of the runs, sorted, each pair once with the OR of its sources.
NEARDUP_EXPORT void MergeCandidatePairs(std::span<const CandidateRun> runs,
                                        std::vector<uint64_t>* pairs,
                                        std::vector<uint8_t>* sources);

// ---- 3. verification --------------------------------------------------------------------------

// Whether the verification needs the shingle sets of a candidate pair: not for a pair found by
// the whitespace rule, nor for exact duplicates (equal content hash and length).
inline bool PairNeedsShingles(uint8_t sources, uint64_t content_hash_a, uint64_t text_bytes_a,
                              uint64_t content_hash_b, uint64_t text_bytes_b) {
  if (sources & kWhitespaceCandidate) return false;
  return content_hash_a != content_hash_b || text_bytes_a != text_bytes_b;
}

// How much DecidePairs measures of a pair.
enum class PairMeasure {
  kAll,   // PairRule::Decide: similarity, jaccard and containment of every pair
  kFast,  // PairRule::DecideFast: the same reasons and accepted similarities, but a pair that
          // cannot be accepted may stop early (measured = false), as dedup's verification does
};

// The accept predicate over candidate pairs: (*decisions)[i] = rule.Decide(left[i], right[i]) (the
// one pair rule; with PairMeasure::kFast, DecideFast), on `threads` threads (0 = all cores); the
// same whatever the thread count. `left` and `right` have the same length (else the shorter one's
// counts); *decisions gets one decision per pair.
NEARDUP_EXPORT void DecidePairs(const PairRule& rule, std::span<const PairDocument> left,
                                std::span<const PairDocument> right, int threads,
                                std::vector<PairDecision>* decisions,
                                PairMeasure measure = PairMeasure::kAll);

// ---- 4. clusters ------------------------------------------------------------------------------

// The clusters of `documents` (canonical order; their fingerprints, lengths, scores and content
// hashes are read) linked by the accepted `pairs` (a < b): connected components
// (neardup/clusters.h) of two or more documents, the kept one of each chosen by `keep`, the others
// removed, each with the member that linked it breadth-first from the kept one ("via") and its
// reason. Clusters are numbered in order of their kept document. removed[d] says whether document d
// goes.
NEARDUP_EXPORT void BuildClusters(const std::vector<DedupDocument>& documents,
                                  const std::vector<DuplicatePair>& pairs, KeepPolicy keep,
                                  std::vector<DedupCluster>* clusters, std::vector<bool>* removed);

}  // namespace neardup

#endif  // NEARDUP_DEDUP_STAGES_H_
