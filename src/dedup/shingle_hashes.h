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

#include "dedup/pair_rule.h"  // Jaccard32, ReachesJaccard
#include "neardup/fingerprinter.h"
#include "neardup/text.h"

namespace neardup {

// True when `fingerprint` normalises text exactly as `shingles` does (invalid UTF-8 aside: the
// Fingerprinter rejects it, so such a document never reaches the shingles): the shingles can then
// be cut from the Fingerprinter's normalised text instead of normalising the text twice.
bool SameNormalization(const FingerprintOptions& fingerprint, const NormalizeOptions& shingles);

// The 64-bit shingle hashes of a normalised text in text order, repeats kept: as a set, exactly
// ShingleSimilarity::ShinglesOfNormalized(normalized). `units` is scratch (the unit hashes).
// Clears `shingles` first.
void ShingleHashesInOrder(std::string_view normalized, std::vector<uint64_t>* units,
                          std::vector<uint64_t>* shingles);

// The narrowed set of any shingle hashes (order and repeats do not matter): exactly
// ShingleSimilarity::Narrow() of their sorted distinct set. Clears `narrow` first.
void NarrowedSet(std::span<const uint64_t> shingles, std::vector<uint32_t>* narrow);

}  // namespace neardup

#endif  // NEARDUP_DEDUP_SHINGLE_HASHES_H_
