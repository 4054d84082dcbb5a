// SimHash bit voting and feature hashing (xxHash3, Jenkins lookup3); see neardup/simhash.h.
#include "neardup/simhash.h"

#include <xxhash.h>

#include <array>
#include <cmath>

#include "fingerprint/jenkins_lookup3.h"
#include "fingerprint/simhash_accumulator.h"

namespace neardup {
namespace {

// kSigns[b][i] is +1.0 if bit i of byte b is set, else -1.0: one byte of a hash votes on eight
// sums with one contiguous multiply-add the compiler vectorises, no branches.
struct SignTable {
  alignas(64) double signs[256][8];
  constexpr SignTable() : signs() {
    for (int b = 0; b < 256; ++b) {
      for (int i = 0; i < 8; ++i) signs[b][i] = ((b >> i) & 1) ? 1.0 : -1.0;
    }
  }
};
constexpr SignTable kSignTable;

inline void Vote64(uint64_t hash, double weight, double* sums) {
  for (int byte = 0; byte < 8; ++byte) {
    const double* signs = kSignTable.signs[(hash >> (8 * byte)) & 0xFF];
    double* out = sums + 8 * byte;
    for (int i = 0; i < 8; ++i) out[i] += weight * signs[i];
  }
}

inline uint64_t Positive64(const double* sums) {
  uint64_t value = 0;
  for (int j = 0; j < 64; ++j) value |= static_cast<uint64_t>(sums[j] > 0.0) << j;
  return value;
}

}  // namespace

FeatureHashValue HashFeature(std::string_view feature, FeatureHash hash, int bits) {
  FeatureHashValue value;
  if (hash == FeatureHash::kJenkinsLookup3) {
    value.lo = JenkinsLookup3Hash64(feature);
    if (bits > 64) {
      uint32_t c = 0x9e3779b9u, b = 0x7f4a7c15u;
      JenkinsHashLittle2(feature, &c, &b);
      value.hi = (static_cast<uint64_t>(c) << 32) | b;
    }
    return value;
  }
  if (bits > 64) {
    XXH128_hash_t h = XXH3_128bits(feature.data(), feature.size());
    value.hi = h.high64;
    value.lo = h.low64;
  } else {
    value.lo = XXH3_64bits(feature.data(), feature.size());
  }
  return value;
}

void SimHashAccumulator::Add64(uint64_t hash, double weight) { Vote64(hash, weight, sums_); }

void SimHashAccumulator::Add(const FeatureHashValue& hash, double weight) {
  Vote64(hash.lo, weight, sums_);
  if (bits_ == 128) Vote64(hash.hi, weight, sums_ + 64);
}

Fingerprint SimHashAccumulator::Finish() const {
  if (bits_ == 128) return Fingerprint::From128(Positive64(sums_ + 64), Positive64(sums_));
  return Fingerprint::From64(Positive64(sums_));
}

Result<Fingerprint> SimHash64(std::span<const uint64_t> hashes, std::span<const double> weights) {
  if (hashes.size() != weights.size()) {
    return Status::InvalidArgument("SimHash64: " + std::to_string(hashes.size()) + " hashes but " +
                                   std::to_string(weights.size()) + " weights");
  }
  SimHashAccumulator accumulator(64);
  for (size_t i = 0; i < hashes.size(); ++i) {
    if (!std::isfinite(weights[i])) {
      return Status::InvalidArgument("SimHash64: weight " + std::to_string(i) + " is not finite");
    }
    accumulator.Add64(hashes[i], weights[i]);
  }
  return accumulator.Finish();
}

Result<Fingerprint> SimHashFeatures(std::span<const WeightedFeature> features, int bits,
                                    FeatureHash hash) {
  if (bits != 64 && bits != 128) {
    return Status::InvalidArgument("SimHash width must be 64 or 128, got " + std::to_string(bits));
  }
  SimHashAccumulator accumulator(bits);
  for (size_t i = 0; i < features.size(); ++i) {
    if (!std::isfinite(features[i].weight)) {
      return Status::InvalidArgument("weight of feature " + std::to_string(i) + " (\"" +
                                     features[i].text.substr(0, 40) + "\") is not finite");
    }
    accumulator.Add(HashFeature(features[i].text, hash, bits), features[i].weight);
  }
  return accumulator.Finish();
}

}  // namespace neardup
