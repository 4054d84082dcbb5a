// SimHashAccumulator: the per-bit weighted vote counter behind SimHash64, SimHashFeatures and the
// Fingerprinter (internal; the public face is neardup/simhash.h). A plain value of 1 KB kept on the
// stack, one per fingerprint being computed, so it is not behind a pointer.
#ifndef NEARDUP_FINGERPRINT_SIMHASH_ACCUMULATOR_H_
#define NEARDUP_FINGERPRINT_SIMHASH_ACCUMULATOR_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>

#include "neardup/fingerprint.h"
#include "neardup/simhash.h"

namespace neardup {

// Per-bit weighted vote counter. Add() is a branch-free loop the compiler vectorises.
class SimHashAccumulator {
 public:
  // `bits` is 64 or 128: callers check the width first (the public entry points return
  // InvalidArgument for any other).
  explicit SimHashAccumulator(int bits = 64) : bits_(bits) { assert(bits == 64 || bits == 128); }
  // Adds one feature hash with weight `weight` (a hash's bits beyond `bits` are ignored).
  void Add(const FeatureHashValue& hash, double weight);
  void Add64(uint64_t hash, double weight);
  // The fingerprint: bit j set when its vote sum is > 0.
  Fingerprint Finish() const;
  int bits() const { return bits_; }
  // The vote sums so far: bits() values, sums()[j] for bit j of the low 64 bits, sums()[64 + j]
  // for bit j of the high 64 bits.
  std::span<const double> sums() const { return {sums_, static_cast<size_t>(bits_)}; }

 private:
  int bits_;
  alignas(64) double sums_[128] = {};
};

}  // namespace neardup

#endif  // NEARDUP_FINGERPRINT_SIMHASH_ACCUMULATOR_H_
