// The pair rule: whether two documents are duplicates, and why. This is the one definition of
// "duplicate"; dedup's verification, JudgePair (`neardup explain`), `neardup eval`, the Python
// package (and Dask through it) and the store's online check all call PairRule::Decide, and none
// keeps a copy of it.
//
// A pair is a duplicate for the first of these reasons that holds:
//
//   exact_duplicate       byte-identical texts (equal XXH3 and length);
//   whitespace_duplicate  identical once every whitespace character is removed;
//   near_duplicate        Jaccard(A, B) >= jaccard_threshold;
//   contained             Containment(A, B) >= containment_threshold, and the smaller document
//                         passes the size guard (below);
//   edited                (when edited_threshold > 0) the plain Jaccard of the shingle sets
//                         >= edited_min_jaccard and the plain Jaccard of the unit sets (UA, UB:
//                         the units' multisets, so this is the multiset Jaccard of the words and
//                         Han characters) >= edited_threshold: a lightly edited copy. A word edit
//                         breaks up to three shingles but only one unit, while text shared by a
//                         template weighs the same in both measures, so edited copies stand out by
//                         their units where their shingle Jaccard sits among template-sharing
//                         pages.
//
// A and B are the documents' verification shingle sets in dedup's compact form (sorted distinct
// 32-bit values, ShingleSimilarity::Narrow; see neardup/shingles.h). Each shingle weighs 1,
// except, when the rule is given corpus frequencies (ShingleFrequencies), the shingles of
// boilerplate: a shingle found in F or more documents weighs F / df (its estimated document
// frequency df), so navigation, licence footers and templates shared by many documents count
// little, and a copy wrapped in them is judged by its content. All sizes below are weighted:
//
//   Jaccard(A, B)     = w(A ∩ B) / w(A ∪ B)
//   Containment(A, B) = w(A ∩ B) / min(w(A), w(B))
//   size guard        min(w(A), w(B)) >= containment_min_shingles and
//                     min(w(A), w(B)) >= containment_min_ratio * max(w(A), w(B))
//
// so a one-line quote does not swallow an article. `edited` always uses the plain (unweighted)
// measures; UA and UB are the documents' unit sets (ShingleSimilarity::Units, NarrowUnits), and a
// document whose unit set is not given (empty) is never `edited`. With weights, a pair must also
// share a plain (unweighted) Jaccard of at least kPlainJaccardFloor = 0.2: below it two texts share
// too little to be copies whatever their weights (and the LSH stage would rarely propose them), and
// most candidate pairs are settled by counts before a weight is looked up. Without frequencies
// every weight is 1 and the rule depends on nothing but the two documents.
//
// Thread safety: a PairRule and a frozen ShingleFrequencies are immutable and may be used from any
// number of threads at once; ShingleFrequencies::AddDocument is not thread-safe.
#ifndef NEARDUP_PAIR_RULE_H_
#define NEARDUP_PAIR_RULE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/export.h"
#include "neardup/status.h"

namespace neardup {

class ShingleSimilarity;

enum class DuplicateReason : uint8_t {
  kNone = 0,       // not duplicates
  kExact,          // byte-identical
  kWhitespace,     // identical but for whitespace
  kNearDuplicate,  // Jaccard >= jaccard_threshold
  kContained,      // the smaller inside the larger, size guard met
  kEdited,         // shingle Jaccard >= edited_min_jaccard, unit Jaccard >= edited_threshold
};

// "none", "exact_duplicate", "whitespace_duplicate", "near_duplicate", "contained", "edited".
NEARDUP_EXPORT const char* DuplicateReasonName(DuplicateReason reason);

struct PairRuleOptions {
  // near_duplicate: Jaccard(A, B) >= this; in [0, 1]. 0 accepts every pair as near_duplicate
  // (verification off).
  double jaccard_threshold = 0.5;
  // contained: Containment(A, B) >= this; in [0, 1]; 0 turns the reason off.
  double containment_threshold = 0.9;
  // The size guard of `contained`: the smaller document holds at least this many (weighted)
  // shingles ...
  double containment_min_shingles = 30;
  // ... and at least this fraction of the larger one's; in [0, 1].
  double containment_min_ratio = 0.6;
  // edited: the plain Jaccard of the unit sets (the units' multiset Jaccard) >= this; in [0, 1];
  // 0 turns the reason off. The default, 0.8, was chosen on held-out data (docs/quality.md).
  double edited_threshold = 0.8;
  // ... and the plain shingle Jaccard >= this; in (0, 1] when the reason is on, so that a pair
  // sharing no shingle is never `edited`.
  double edited_min_jaccard = 0.45;
};

// InvalidArgument naming the option, or OK.
NEARDUP_EXPORT Status ValidatePairRuleOptions(const PairRuleOptions& options);

// The smallest plain Jaccard similarity (unweighted sets) a pair accepted by `options` can have,
// boilerplate aside: the candidate stage has to find pairs down to this. It is the smaller of
// jaccard_threshold and, with containment on, c * r / (1 + r - c * r) for c =
// containment_threshold and r = containment_min_ratio (a set of r times the other's size, a
// fraction c of it inside the other), and, with `edited` on, edited_min_jaccard.
NEARDUP_EXPORT double LowestAcceptedJaccard(const PairRuleOptions& options);

namespace internal {
// Memory for large tables touched at random (the frequency sketch): blocks of 2 MiB or more are
// 2 MiB-aligned and marked for transparent huge pages where the system has them, so that a
// count does not also miss the TLB; smaller ones come from operator new.
NEARDUP_EXPORT void* AllocateLargeTable(size_t bytes);
NEARDUP_EXPORT void FreeLargeTable(void* p, size_t bytes);
template <class T>
struct LargeTableAllocator {
  using value_type = T;
  LargeTableAllocator() = default;
  template <class U>
  LargeTableAllocator(const LargeTableAllocator<U>&) {}  // NOLINT: rebinding
  T* allocate(size_t n) { return static_cast<T*>(AllocateLargeTable(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { FreeLargeTable(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const LargeTableAllocator<U>&) const {
    return true;
  }
};
}  // namespace internal

// Document frequencies of shingles counted over a corpus in a bounded summary: a count-min sketch
// of 16-bit saturating counters, `depth` of them per shingle within one 64-byte block (one cache
// line a shingle). Estimate(s) is never below the number of documents holding s (up to 65535);
// it exceeds it by at most e * depth * total() / cells() with probability >= 1 - e^-depth
// (the count-min bound for cells() / depth counters a row; see docs/quality.md for the measured
// error). Counting is order-independent: the same documents give the same sketch in any order,
// and Merge() of partial sketches gives the sketch of all their documents.
//
// A large corpus may be counted from a sample: with sample_every = s the caller adds one
// document in s (dedup: those whose number is a multiple of s), and Estimate() and documents()
// scale the counts by s.
class NEARDUP_EXPORT ShingleFrequencies {
 public:
  static constexpr int kDepth = 4;
  static constexpr uint64_t kDefaultSeed = 0x626f696c65727031ULL;
  // A sketch of about `bytes` bytes (rounded down to a power of two of 64-byte blocks, at least
  // one block).
  explicit ShingleFrequencies(size_t bytes, uint32_t sample_every = 1,
                              uint64_t seed = kDefaultSeed);

  // Counts one document: `set` holds its distinct shingles (a narrowed set; repeats would count
  // twice).
  void AddDocument(std::span<const uint32_t> set);
  // Adds the counts of `other` (same size, sampling and seed, else InvalidArgument).
  Status Merge(const ShingleFrequencies& other);

  // The estimated number of documents holding `shingle` (the sampled count times
  // sample_every; a count saturates at 65535).
  uint64_t Estimate(uint32_t shingle) const;

  // A byte string holding the whole sketch (to persist it or ship it between processes), and
  // the sketch back from one; Corruption when `bytes` is not one.
  std::string Serialize() const;
  static Result<ShingleFrequencies> Deserialize(std::string_view bytes);

  uint64_t documents() const { return documents_ * sample_every_; }  // estimated
  uint64_t counted_documents() const { return documents_; }
  uint64_t total() const { return total_; }  // shingles counted (sum of the counted set sizes)
  uint32_t sample_every() const { return sample_every_; }
  uint64_t cells() const { return counters_.size(); }
  size_t memory_bytes() const { return counters_.size() * sizeof(uint16_t); }
  uint64_t seed() const { return seed_; }

  // The block a shingle is counted in and its counters there (bit l = counter l of the block's
  // 32), and the counters of a block holding at least `count` (for PairRule's filter).
  uint64_t Locate(uint32_t shingle, uint32_t* lane_bits) const;
  uint32_t LanesReaching(uint64_t block, uint32_t count) const;

 private:
  const uint16_t* Block(uint32_t shingle, uint32_t* lanes) const;

  uint64_t seed_;
  uint32_t sample_every_ = 1;
  uint64_t block_mask_ = 0;
  std::vector<uint16_t, internal::LargeTableAllocator<uint16_t>> counters_;  // 32 a block
  uint64_t documents_ = 0;
  uint64_t total_ = 0;
};

// When a shingle counts as boilerplate.
struct BoilerplateOptions {
  // A shingle in at least F documents is boilerplate and weighs F / df, where F is the larger of
  // min_documents (>= 2) and the sketch's resolution, 2 * depth * total() / cells() *
  // sample_every (twice the mean count of a counter: below it, estimates are mostly other
  // shingles' counts), so F grows with the corpus once the sketch is loaded.
  uint32_t min_documents = 20;
};

// One document as the rule sees it. `shingles` is a view: the caller keeps the set alive.
struct PairDocument {
  uint64_t content_hash = 0;   // XXH3-64 of the text
  uint64_t text_bytes = 0;     // its length
  uint64_t squeezed_hash = 0;  // XXH3-64 of the text without whitespace (WhitespaceFreeHash)
  std::span<const uint32_t> shingles;  // sorted distinct narrowed shingle hashes
  // The weighted size of `shingles` (PairRule::Weight); unset lets Decide compute it. Callers
  // that judge one document against many compute it once.
  std::optional<double> weight = std::nullopt;
  // Sorted distinct narrowed unit hashes (ShingleSimilarity::Units, NarrowUnits: 20-bit values,
  // kUnitBits; both documents' of one width), for `edited`; empty = unknown (the reason cannot
  // apply).
  std::span<const uint32_t> units = {};
};

// The facts of a document computed from its text, owning its set.
struct DocumentFacts {
  uint64_t content_hash = 0;
  uint64_t text_bytes = 0;
  uint64_t squeezed_hash = 0;
  std::vector<uint32_t> shingles;
  std::vector<uint32_t> units;
  PairDocument view() const {
    return {content_hash, text_bytes, squeezed_hash, shingles, std::nullopt, units};
  }
};

// XXH3-64 of `text` with ASCII whitespace, U+00A0 and U+3000 removed: the whitespace_duplicate
// test (the hash dedup computes per document).
NEARDUP_EXPORT uint64_t WhitespaceFreeHash(std::string_view text);

// The facts of `text` (valid UTF-8), its shingles and units cut by `shingler` and narrowed, as
// dedup does.
NEARDUP_EXPORT Status ComputeDocumentFacts(std::string_view text, const ShingleSimilarity& shingler,
                                           DocumentFacts* facts);

struct PairDecision {
  DuplicateReason reason = DuplicateReason::kNone;
  bool duplicate() const { return reason != DuplicateReason::kNone; }
  // The reason's similarity: 1 for exact and whitespace duplicates, the Jaccard for
  // near_duplicate and for a pair that is none, the containment for contained, the unit Jaccard
  // for edited.
  double similarity = 0;
  double jaccard = 0;       // weighted Jaccard (1 for exact and whitespace duplicates)
  double containment = 0;   // weighted containment of the smaller in the larger
  bool size_guard = false;  // the smaller document passes the containment size guard
  // The plain Jaccard of the unit sets, when the `edited` test measured it (the reason on, both
  // unit sets given, the plain shingle Jaccard at least edited_min_jaccard, and no earlier
  // reason held); DecideFast may leave it unset for a pair it rejects.
  std::optional<double> unit_jaccard;
  // False when DecideFast stopped early: the pair is not a duplicate, and jaccard / containment
  // are not computed (0).
  bool measured = true;
};

class NEARDUP_EXPORT PairRule {
 public:
  static constexpr double kPlainJaccardFloor = 0.2;

  // `frequencies` (optional, may be null) turns on boilerplate weights; it must outlive the rule
  // and not change while the rule is in use. InvalidArgument naming a bad option.
  static Result<PairRule> Create(const PairRuleOptions& options,
                                 const ShingleFrequencies* frequencies = nullptr,
                                 const BoilerplateOptions& boilerplate = {});

  // The decision with every similarity measured.
  PairDecision Decide(const PairDocument& a, const PairDocument& b) const;
  // The same decision (reason and, for a duplicate, every value), but a pair that cannot reach
  // either threshold is left as soon as that is certain (measured = false): what dedup's
  // verification uses.
  PairDecision DecideFast(const PairDocument& a, const PairDocument& b) const;

  // False when the pair cannot be a duplicate by its sets because its plain Jaccard is below
  // kPlainJaccardFloor and (with `edited` on and both unit sets given) below edited_min_jaccard
  // (with weights; always true without): a cheap test that needs no weight,
  // for callers that look weights up only for the pairs that pass it. Decide applies it too.
  bool PassesPlainFloor(const PairDocument& a, const PairDocument& b) const;

  // The size bound: false when a pair whose (plain) shingle sets hold size_a and size_b values
  // cannot be a near_duplicate or contained pair whatever the sets hold, because its plain Jaccard
  // is at most min / max and that is below LowestAcceptedJaccard(options()) (with weights: below
  // kPlainJaccardFloor and, with `edited` on, edited_min_jaccard), or because one set is empty.
  // Exact and whitespace duplicates are decided from hashes, not by this. It never rules out a pair
  // Decide accepts, so callers may skip reading the sets of a pair it rules out (Dask does); with
  // verification off (jaccard_threshold 0) it is always true.
  bool MayAcceptBySizes(uint64_t size_a, uint64_t size_b) const;

  // A stand-in unit set, for a caller that builds unit sets only for the pairs that need them:
  // with it as both documents' `units`, a pair is decided `edited` exactly when the rule would
  // compare their real unit sets (`edited` on, the plain shingle Jaccard at least
  // edited_min_jaccard, no other reason holds), and every other decision is the one the real
  // unit sets give, since nothing but that comparison reads them. Dedup judges its candidates
  // so, then only the pairs decided `edited` again with their real unit sets.
  static std::span<const uint32_t> DeferredUnits();

  // The weight of one shingle (1, or F / df for boilerplate) and of a set.
  double Weight(uint32_t shingle) const;
  double Weight(std::span<const uint32_t> set) const;
  // Whether weights come from frequencies (else every weight is 1).
  bool weighted() const { return frequencies_ != nullptr; }
  // F: the document count from which a shingle is boilerplate (0 without frequencies).
  uint32_t boilerplate_documents() const { return boilerplate_documents_; }

  const PairRuleOptions& options() const { return options_; }

 private:
  PairRule(const PairRuleOptions& options, const ShingleFrequencies* frequencies,
           uint32_t boilerplate_documents)
      : options_(options),
        frequencies_(frequencies),
        boilerplate_documents_(boilerplate_documents) {}
  PairDecision Measure(const PairDocument& a, const PairDocument& b, bool fast) const;
  // Whether `edited` is on and both documents give the sets it compares.
  bool EditedApplies(const PairDocument& a, const PairDocument& b) const;

  PairRuleOptions options_;
  const ShingleFrequencies* frequencies_ = nullptr;
  uint32_t boilerplate_documents_ = 0;
  // Per sketch block, the counters holding at least F: a shingle can weigh less than 1 only if
  // all of its counters are marked.
  std::shared_ptr<const std::vector<uint32_t>> heavy_lanes_;
};

}  // namespace neardup

#endif  // NEARDUP_PAIR_RULE_H_
