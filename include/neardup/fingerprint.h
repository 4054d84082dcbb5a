// Fingerprint: a 64- or 128-bit SimHash value, its Hamming distance, and its text forms.
//
// A Fingerprint is a plain value type. Bit 0 is the least significant bit of `lo`; for 128 bits,
// bits 64..127 live in `hi`. Text forms print the most significant bit first.
#ifndef NEARDUP_FINGERPRINT_H_
#define NEARDUP_FINGERPRINT_H_

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

#include "neardup/export.h"
#include "neardup/status.h"

namespace neardup {

struct Fingerprint {
  uint64_t hi = 0;  // bits 64..127; always 0 for a 64-bit fingerprint
  uint64_t lo = 0;  // bits 0..63
  int bits = 64;    // 64 or 128

  static Fingerprint From64(uint64_t value) { return Fingerprint{0, value, 64}; }
  static Fingerprint From128(uint64_t high, uint64_t low) { return Fingerprint{high, low, 128}; }

  // Bit i (0 = least significant), for i < bits.
  bool bit(int i) const { return i < 64 ? (lo >> i) & 1 : (hi >> (i - 64)) & 1; }

  friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
};

// Number of differing bits. Fingerprints of different widths compare on their common low bits
// plus every set bit of the wider one's high half (so they are never spuriously equal).
inline int HammingDistance(uint64_t a, uint64_t b) { return std::popcount(a ^ b); }
inline int HammingDistance(const Fingerprint& a, const Fingerprint& b) {
  return std::popcount(a.lo ^ b.lo) + std::popcount(a.hi ^ b.hi);
}

// 16 or 32 lowercase hex digits, most significant first.
NEARDUP_EXPORT std::string ToHex(const Fingerprint& fp);
// 64 or 128 characters of '0' and '1', most significant first.
NEARDUP_EXPORT std::string ToBinary(const Fingerprint& fp);
// The unsigned decimal value of a 64-bit fingerprint (the form some other libraries print).
NEARDUP_EXPORT std::string ToDecimal(const Fingerprint& fp);

// Parses any form printed above: 16 or 32 hex digits (an optional "0x" prefix, either case),
// 64 or 128 binary digits, or (64-bit only) a decimal number with a "d:" prefix.
// The width follows from the digit count.
NEARDUP_EXPORT Result<Fingerprint> ParseFingerprint(std::string_view text);

}  // namespace neardup

#endif  // NEARDUP_FINGERPRINT_H_
