// MinHash LSH: the candidate stage of dedup, a second index kind beside the Hamming index. It finds
// the pairs of documents whose verification shingles (neardup/shingles.h) are likely to reach a
// Jaccard similarity threshold, with a recall at the threshold that does not depend on the number
// of documents and a cost near-linear in it.
//
// The steps, each usable on its own so a distributed run (one partition at a time) can compose
// them and get exactly the same pairs as one process:
//
//   text --ShingleSimilarity::Shingles--> sorted distinct 64-bit shingle hashes
//        --MinHashLsh::Signature--------> bands*rows 32-bit values (one-permutation hashing with
//                                         optimal densification: O(shingles + signature), not one
//                                         hash permutation per value)
//        --MinHashLsh::BandKeys---------> `bands` 32-bit keys (band b hashes rows b*r .. b*r+r-1
//                                         with the band number as seed)
//   (band, key, document) records, grouped by (band, key) into buckets
//        --BucketPairs------------------> candidate pairs of a bucket (the bucket rule below)
//   union of all buckets' pairs, distinct --> candidate pairs (then verified by exact Jaccard).
//
// The bucket rule (defined by the bucket's contents only, so it is independent of thread count,
// partitioning and record order): sort the bucket's document numbers ascending, d_0 < d_1 < ...;
// the pairs are (d_i, d_j) with 0 < j - i <= window. A bucket of at most window + 1 documents
// therefore yields all its pairs; a larger one (thousands of copies of one text, a shared
// boilerplate) yields at most window pairs per member instead of a quadratic number, and its
// members still end up linked through chains when they are duplicates of each other.
//
// A pair of Jaccard similarity J shares a given band with probability J^rows (up to 2^-32 key
// collisions), so it becomes a candidate with probability 1 - (1 - J^rows)^bands: the S-curve,
// the same at any corpus size. ChooseLshParameters picks (bands, rows) from the threshold.
//
// Thread safety: the free functions are pure; a MinHashLsh is immutable after Create() and may be
// used from any number of threads at once; a BandKeyTable is not thread-safe while being filled.
#ifndef NEARDUP_MINHASH_LSH_H_
#define NEARDUP_MINHASH_LSH_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "neardup/export.h"
#include "neardup/status.h"

namespace neardup {

// b bands of r rows: the signature has b*r values.
struct LshParameters {
  int bands = 0;
  int rows = 0;
  int signature_size() const { return bands * rows; }
  friend bool operator==(const LshParameters&, const LshParameters&) = default;
};

// Probability that a pair of Jaccard similarity `jaccard` shares at least one band:
// 1 - (1 - jaccard^rows)^bands (ignoring 32-bit key collisions). `jaccard` is clamped to [0, 1].
NEARDUP_EXPORT double LshCandidateProbability(double jaccard, const LshParameters& parameters);

struct LshPlanOptions {
  // P(candidate) at the threshold must reach this.
  double recall_at_threshold = 0.98;
  // bands * rows at most this (the signature size; also bounds the work per document).
  int max_signature = 128;
};

// Chooses (bands, rows) for a Jaccard threshold in (0, 1): the largest `rows` (fewest chance
// candidates among dissimilar documents) for which some `bands` with bands*rows <= max_signature
// gives LshCandidateProbability(threshold) >= recall_at_threshold, with the fewest such bands.
// If no rows >= 1 reaches it, rows = 1 and the most bands that fit. InvalidArgument for a
// threshold outside (0, 1) or max_signature < 1.
// Example: threshold 0.5 -> 30 bands of 3 rows (P(0.5) = 0.982).
NEARDUP_EXPORT Result<LshParameters> ChooseLshParameters(double threshold,
                                                         const LshPlanOptions& options = {});

// Expected number of candidate pairs among n documents when every pair of distinct documents has
// Jaccard similarity `background_jaccard`: C(n, 2) * (1 - (1 - p)^bands) with
// p = J^rows + (1 - J^rows) * 2^-32 (a band-key collision). Ignores the bucket window, so it is an
// upper bound when buckets overflow. Add the duplicates' own pairs on top.
NEARDUP_EXPORT double ExpectedCandidatePairs(double n, const LshParameters& parameters,
                                             double background_jaccard);

struct NEARDUP_EXPORT MinHashLshOptions {
  // Jaccard similarity of the verification shingles a duplicate pair must reach; (0, 1).
  double threshold = 0.5;
  // Bands and rows: ChooseLshParameters(threshold) when unset (the default); otherwise used as
  // given (bands in [1, 1024], rows in [1, 64]).
  std::optional<LshParameters> parameters;
  // The bucket rule's window (see the top of this file); >= 1.
  uint32_t bucket_window = 64;
  // Seed of the hash functions. Documents must use the same seed to be comparable.
  uint64_t seed = 0x6e6561726475701dULL;
};

// The (bands, rows) `options` stand for; InvalidArgument naming the option when invalid.
NEARDUP_EXPORT Result<LshParameters> ResolveLshParameters(const MinHashLshOptions& options);

// A tag for (bands, rows, seed): band keys made under different tags are incomparable.
NEARDUP_EXPORT uint64_t LshTag(const LshParameters& parameters, uint64_t seed);

// Signatures and band keys of shingle sets. A copy shares the same immutable state.
class NEARDUP_EXPORT MinHashLsh {
 public:
  // InvalidArgument (naming the option) for a bad threshold, bands/rows or window.
  static Result<MinHashLsh> Create(const MinHashLshOptions& options);

  const LshParameters& parameters() const;
  const MinHashLshOptions& options() const;

  // The signature of a set of 64-bit shingle hashes (duplicates and order do not matter):
  // parameters().signature_size() values. Each shingle is hashed once with the seed; the hash
  // picks its bin and its 32-bit value, each bin keeps its smallest value, and an empty bin takes
  // the value of a non-empty donor bin chosen by a hash of (bin, attempt) that is the same for
  // every document (Shrivastava 2017, optimal densification), so that two signatures agree at a
  // position with probability close to the Jaccard similarity of the sets.
  // Returns false (and clears `signature`) for an empty set: such a document has no band keys
  // and is never a candidate of the LSH stage.
  bool Signature(std::span<const uint64_t> shingles, std::vector<uint32_t>* signature) const;

  // The `bands` band keys of a signature of signature_size() values into keys[0 .. bands).
  void BandKeys(std::span<const uint32_t> signature, std::span<uint32_t> keys) const;

  // Signature then band keys (keys must hold `bands` values); false for an empty set.
  bool BandKeysOf(std::span<const uint64_t> shingles, std::span<uint32_t> keys) const;

  // How many bands two documents' keys share.
  static int SharedBands(std::span<const uint32_t> keys_a, std::span<const uint32_t> keys_b);

 private:
  struct NEARDUP_HIDDEN Impl;
  explicit MinHashLsh(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

// A candidate pair of document numbers, a < b.
struct LshPair {
  uint64_t a = 0;
  uint64_t b = 0;
  friend bool operator==(const LshPair&, const LshPair&) = default;
  friend auto operator<=>(const LshPair&, const LshPair&) = default;
};

// The bucket rule: appends the pairs of one bucket whose document numbers are `members`, sorted
// ascending and distinct (see the top of this file).
NEARDUP_EXPORT void BucketPairs(std::span<const uint64_t> members, uint32_t window,
                                std::vector<LshPair>* pairs);

// Pairs the bucket rule yields for a bucket of m members: all m(m-1)/2 up to window + 1 members,
// then about m * window.
NEARDUP_EXPORT uint64_t BucketPairCount(uint64_t members, uint32_t window);

// The band keys of documents 0, 1, 2, ... kept band-major (4 bytes per document and band), for
// a single-process run of at most 2^32 documents.
class NEARDUP_EXPORT BandKeyTable {
 public:
  // An empty table of `bands` >= 0 bands (0: a run without the LSH stage). It cannot fail: a
  // negative count is a programming error (asserted; an empty table in release builds).
  explicit BandKeyTable(int bands);
  ~BandKeyTable();
  BandKeyTable(BandKeyTable&&) noexcept;
  BandKeyTable& operator=(BandKeyTable&&) noexcept;
  BandKeyTable(const BandKeyTable&) = delete;
  BandKeyTable& operator=(const BandKeyTable&) = delete;

  int bands() const;
  size_t size() const;
  // Appends the next document: `keys` holds `bands` values, or is empty for a document without
  // a signature (it is then in no bucket).
  void Append(std::span<const uint32_t> keys);
  bool has_keys(size_t document) const;
  const std::vector<bool>& has_keys_bits() const;
  // One band's keys of every document, keys[d] for document d (read this way in bulk).
  std::span<const uint32_t> band_keys(int band) const;
  uint32_t key(int band, size_t document) const { return band_keys(band)[document]; }
  void Reserve(size_t documents);
  // Memory held, in bytes.
  size_t MemoryBytes() const;

 private:
  struct NEARDUP_HIDDEN Impl;
  std::unique_ptr<Impl> impl_;
};

struct LshJoinStats {
  uint64_t records = 0;            // (band, key, document) records sorted
  uint64_t buckets = 0;            // buckets of 2+ documents
  uint64_t oversized_buckets = 0;  // buckets of more than window + 1 documents
  uint64_t largest_bucket = 0;     // documents in the largest bucket
  uint64_t bucket_pairs = 0;       // pairs yielded by all buckets, before removing repeats
  uint64_t candidate_pairs = 0;    // distinct pairs returned
};

// Candidate pairs of all documents of `table` (sorted by (a, b), distinct): for each band the
// (key, document) records are radix-sorted and each bucket of equal keys yields BucketPairs.
// Bands are processed on up to `threads` threads (<= 0: all cores), one band's records at a time
// per thread (8 bytes per document each). The result does not depend on `threads`.
NEARDUP_EXPORT std::vector<LshPair> LshCandidatePairs(const BandKeyTable& table, uint32_t window,
                                                      int threads, LshJoinStats* stats = nullptr);

}  // namespace neardup

#endif  // NEARDUP_MINHASH_LSH_H_
