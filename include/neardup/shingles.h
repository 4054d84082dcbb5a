// Shingle sets and their Jaccard similarity: what "duplicate" means for dedup. The candidate stage
// (neardup/minhash_lsh.h) hashes these shingles, the verification compares them exactly, and the
// evaluation uses them as its reference.
//
// The text is normalised first (markup stripped, NFKC, case folded, whitespace
// folded, optionally Traditional -> Simplified Chinese), then cut into units: each Han / kana /
// Thai / Lao / Khmer / Myanmar character is one unit, every other run of letters, digits and marks
// is one word unit. A shingle starting at a character unit spans 5 units (character 5-grams in
// Chinese or Japanese text), one starting at a word unit 3 (word 3-grams), following the devpairs
// reference similarity; the size is chosen where each shingle starts, not per document, so a
// passage has the same shingles whatever text surrounds it (a Chinese article in an English page).
//
// The units themselves form a second set (Units): the pair rule's `edited` reason compares it,
// since a word edit breaks up to three shingles but only one unit. It is the units' multiset, one
// element per occurrence (the k-th repeat of a unit is an element of its own), so its Jaccard is
// the multiset Jaccard of the units, sum of the smaller counts over sum of the larger: two pages
// that merely use the same words or characters (a set Jaccard of 0.75 is common between distinct
// Chinese or Japanese pages in one template) score lower than an edited copy, which keeps its
// counts. Unit hashes are mixed with a domain constant of their own, apart from the shingle
// hashes.
//
// Thread safety: a ShingleSimilarity is immutable after Create(); Shingles() may run on any number
// of threads at once.
#ifndef NEARDUP_SHINGLES_H_
#define NEARDUP_SHINGLES_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "neardup/export.h"
#include "neardup/status.h"
#include "neardup/text.h"

namespace neardup {

class NEARDUP_EXPORT ShingleSimilarity {
 public:
  // traditional_to_simplified: fold Chinese script variants before shingling.
  static Result<std::unique_ptr<ShingleSimilarity>> Create(bool traditional_to_simplified);
  ~ShingleSimilarity();
  ShingleSimilarity(const ShingleSimilarity&) = delete;
  ShingleSimilarity& operator=(const ShingleSimilarity&) = delete;

  // Sorted, distinct 64-bit shingle hashes of `text` (valid UTF-8). A text too short for any
  // shingle yields one shingle of all its units; a text without units yields none.
  Status Shingles(std::string_view text, std::vector<uint64_t>* shingles) const;
  // The same from a text already normalised with normalize_options() (e.g. the Fingerprinter's
  // normalised text when its options are the same): Shingles(t) == ShinglesOfNormalized(N(t)).
  static void ShinglesOfNormalized(std::string_view normalized, std::vector<uint64_t>* shingles);
  // The unit multiset of `text` (valid UTF-8) as sorted, distinct 64-bit hashes, one per
  // occurrence of a unit (above); the units are cut exactly as for the shingles: each Han / kana
  // / Thai / ... character one unit, every other run of letters, digits and marks one word unit.
  // A text without units yields none.
  Status Units(std::string_view text, std::vector<uint64_t>* units) const;
  // The same from a normalised text: Units(t) == UnitsOfNormalized(N(t)).
  static void UnitsOfNormalized(std::string_view normalized, std::vector<uint64_t>* units);
  // Both sets from one cut of the text (what dedup uses when it needs both):
  // ShinglesOfNormalized(n) and UnitsOfNormalized(n).
  static void ShinglesAndUnitsOfNormalized(std::string_view normalized,
                                           std::vector<uint64_t>* shingles,
                                           std::vector<uint64_t>* units);
  Status ShinglesAndUnits(std::string_view text, std::vector<uint64_t>* shingles,
                          std::vector<uint64_t>* units) const;
  // The normalisation applied before shingling.
  const NormalizeOptions& normalize_options() const;

  // |a ∩ b| / |a ∪ b| of two sorted distinct sets; 1 when both are empty.
  static double Jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);
  // Jaccard of sorted distinct 32-bit sets (dedup's compact form of the shingle sets).
  static double Jaccard32(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b);
  // The compact form dedup verifies with: each hash folded to 32 bits (h ^ h >> 32), sorted and
  // distinct. A collision among a few thousand shingles is rare enough (p ~ 1e-6 per document
  // pair) not to move a Jaccard value measurably, and it halves the memory.
  static void Narrow(const std::vector<uint64_t>& shingles, std::vector<uint32_t>* narrow);
  // The width of the `edited` reason's unit elements: every front end (dedup, explain, eval,
  // Python, Dask, stores of verification form 3) compares unit sets of kUnitBits-bit values.
  // Collisions inflate a unit Jaccard by at most about |A\B| |B\A| / 2^bits / |A u B|: for
  // pairs the rule can accept (shingle Jaccard >= 0.45) about n x 6.6e-8 at 20 bits (0.001 at
  // 15,000 units), and the store keeps ~14.5 bits a unit instead of ~26.5.
  static constexpr int kUnitBits = 20;
  // The unit set the `edited` reason compares, from Units()' 64-bit multiset: each value
  // narrowed as Narrow() does (h ^ h >> 32), then its top `bits` bits kept (bits = 32: Narrow()
  // itself, what stores of verification form 2 hold), sorted and distinct. Keeping the top bits
  // of a well-mixed value keeps them uniform, and the fold is monotone, so the narrower set is
  // the wider one shifted with neighbours merged. `bits` is 1..32.
  static void NarrowUnits(const std::vector<uint64_t>& units, std::vector<uint32_t>* narrow,
                          int bits = kUnitBits);
  // The verification similarity of two texts, exactly as dedup computes it: Jaccard32 of the
  // narrowed shingle sets.
  Result<double> VerifiedJaccard(std::string_view a, std::string_view b) const;
  // |a ∩ b| / min(|a|, |b|); 1 when either is empty and both are.
  static double Containment(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);

 private:
  struct NEARDUP_HIDDEN Impl;
  explicit ShingleSimilarity(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace neardup

#endif  // NEARDUP_SHINGLES_H_
