// The verification shingles (neardup/shingles.h) in the forms dedup's per-document pass and its
// verification use without sorting 64-bit sets: the shingle hashes in text order, the narrowed
// 32-bit set made from them, and a Jaccard test with early exits.
//
// Internal header. Pure functions; thread-safe.
#ifndef NEARDUP_DEDUP_SHINGLE_HASHES_H_
#define NEARDUP_DEDUP_SHINGLE_HASHES_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "neardup/fingerprinter.h"
#include "neardup/shingles.h"
#include "neardup/text.h"

namespace neardup {

// True when `fingerprint` normalises text exactly as `shingles` does (invalid UTF-8 aside: the
// Fingerprinter rejects it, so such a document never reaches the shingles): the shingles can then
// be cut from the Fingerprinter's normalised text instead of normalising the text twice (dedup's
// per-document pass and DocumentSketcher).
bool SameNormalization(const FingerprintOptions& fingerprint, const NormalizeOptions& shingles);

// The 64-bit shingle hashes of a normalised text in text order, repeats kept: as a set, exactly
// ShingleSimilarity::ShinglesOfNormalized(normalized). `units` is scratch (the unit hashes).
// Clears `shingles` first.
void ShingleHashesInOrder(std::string_view normalized, std::vector<uint64_t>* units,
                          std::vector<uint64_t>* shingles);

// The unit set's hash of a unit hash from ShingleHashesInOrder (a domain apart from the
// shingles'): the first occurrence of a unit in ShingleSimilarity::Units is UnitSetHash(unit).
constexpr uint64_t kUnitDomain = 0x756e697473657431ULL;  // "unitset1"
uint64_t UnitSetHash(uint64_t unit);

// ShingleHashesInOrder's `units` (in place) -> the unit multiset as a sorted distinct set: one
// element per occurrence, the k-th repeat (k >= 1) of a unit's hash h = UnitSetHash(unit) being
// Mix(h, k), so the Jaccard of two such sets is the multiset Jaccard of the units, the sum of the
// smaller counts over the sum of the larger. Order does not matter; repeats do.
void UnitMultiset(std::vector<uint64_t>* units);

// The narrowed unit set from ShingleHashesInOrder's `units` (order does not matter, repeats do):
// exactly ShingleSimilarity::NarrowUnits(ShingleSimilarity::UnitsOfNormalized(), bits). Clears
// `narrow` first.
void NarrowedUnitSet(std::span<const uint64_t> units_in_order, std::vector<uint32_t>* narrow,
                     int bits = ShingleSimilarity::kUnitBits);

// A sorted distinct set of 32-bit narrowed unit values -> its `bits`-bit form (in place): each
// value's top `bits` bits (a monotone fold, so the order holds), neighbours merged. bits = 32:
// unchanged.
void FoldUnitSet(std::vector<uint32_t>* set, int bits);

// The narrowed set of any shingle hashes (order and repeats do not matter): exactly
// ShingleSimilarity::Narrow() of their sorted distinct set. Clears `narrow` first.
void NarrowedSet(std::span<const uint64_t> shingles, std::vector<uint32_t>* narrow);

// Jaccard of two sorted distinct 32-bit sets, exactly as ShingleSimilarity::Jaccard32.
double Jaccard32(std::span<const uint32_t> a, std::span<const uint32_t> b);

// Whether Jaccard32(a, b) >= threshold (threshold > 0), and then *similarity = Jaccard32(a, b).
// Stops early once the threshold can no longer be reached (sizes too different, or too few
// elements left to share), so a rejected pair costs less than a full intersection; the answer is
// always the same as comparing Jaccard32(a, b) with the threshold.
bool ReachesJaccard(std::span<const uint32_t> a, std::span<const uint32_t> b, double threshold,
                    double* similarity);

}  // namespace neardup

#endif  // NEARDUP_DEDUP_SHINGLE_HASHES_H_
