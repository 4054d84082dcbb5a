// SimHash (Charikar 2002): folds weighted feature hashes into a 64- or 128-bit fingerprint whose
// Hamming distance tracks the cosine distance of the feature vectors.
//
// Every bit j is a weighted vote: sum over features of (+w if bit j of the feature hash is 1,
// else -w); bit j is set only when that sum is > 0 (ties give 0, as in yanyiwu/simhash).
//
// Thread safety: free functions without shared state. (The per-bit vote counter behind them is
// internal: src/fingerprint/simhash_accumulator.h.)
#ifndef NEARDUP_SIMHASH_H_
#define NEARDUP_SIMHASH_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "neardup/export.h"
#include "neardup/features.h"
#include "neardup/fingerprint.h"
#include "neardup/status.h"

namespace neardup {

enum class FeatureHash {
  kXxh3,            // XXH3_64bits / XXH3_128bits (seed 0): the default, fast and well mixed
  kJenkinsLookup3,  // Jenkins lookup3 hashlittle2 seed 0, (c << 32) | b (yanyiwu/simhash); 64 bits
};

// A 128-bit feature hash (for 64-bit SimHash only `lo` is used).
struct FeatureHashValue {
  uint64_t hi = 0;
  uint64_t lo = 0;
};

// Hashes one feature for a `bits`-wide SimHash (128 fills `hi` too; any other width only `lo`).
// kXxh3: XXH3_64bits in lo for 64 bits,
// XXH3_128bits for 128. kJenkinsLookup3: lo = (c << 32) | b of hashlittle2 with seeds 0, 0; for
// 128 bits hi is the same with seeds 0x9e3779b9, 0x7f4a7c15.
NEARDUP_EXPORT FeatureHashValue HashFeature(std::string_view feature, FeatureHash hash,
                                            int bits = 64);

// SimHash of already-hashed 64-bit features: hashes[i] weighs weights[i]. Sizes must match
// (kInvalidArgument otherwise).
NEARDUP_EXPORT Result<Fingerprint> SimHash64(std::span<const uint64_t> hashes,
                                             std::span<const double> weights);

// SimHash of weighted features, `bits` 64 or 128 (kInvalidArgument otherwise).
NEARDUP_EXPORT Result<Fingerprint> SimHashFeatures(std::span<const WeightedFeature> features,
                                                   int bits, FeatureHash hash = FeatureHash::kXxh3);

}  // namespace neardup

#endif  // NEARDUP_SIMHASH_H_
