// Golomb-Rice coding of ascending 32-bit sequences: the compact form in which neardup.dask stores
// and moves the narrowed shingle sets (sorted hash values) and the band keys of its shuffle.
//
// A sequence of n ascending values over [0, 2^32) is coded as n (LEB128), then, when n > 0, the
// first value (LEB128), the Rice parameter k (one byte) and each later gap (value - previous) as
// gap >> k in unary (that many 1 bits, then a 0) followed by its k low bits, bits filled from the
// least significant end of each byte. k is chosen from the mean gap, so random hash values cost
// about log2(range / n) + 1.6 bits each: 3.1 bytes for a set of 270 hash values instead of 4
// (LEB128 varints of the gaps need 3.9). Optional fixed-width payloads (a row number per value)
// follow the codes; the code ends at a byte boundary.
//
// Decoding checks every bound: damaged or truncated bytes give false, never an out-of-bounds read.
//
// Internal header. Pure functions; thread-safe.
#ifndef NEARDUP_COMMON_RICE_CODEC_H_
#define NEARDUP_COMMON_RICE_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace neardup {

// Appends the code of `values` (ascending; equal neighbours allowed) to `out`. With
// payload_bits > 0 (<= 32), payload[i] (< 2^payload_bits) is stored with values[i].
void RiceEncode(std::span<const uint32_t> values, std::string* out,
                std::span<const uint32_t> payload = {}, int payload_bits = 0);

// Decodes one sequence from the start of `bytes`, appending its values to `values` and, when
// `payload` is given, their payloads (zeros when payload_bits is 0) to `payload`. *used (if given)
// gets the bytes read. False on damaged or truncated input (what was appended is then undefined).
bool RiceDecode(std::string_view bytes, std::vector<uint32_t>* values, size_t* used = nullptr,
                std::vector<uint32_t>* payload = nullptr, int payload_bits = 0);

// The number of bits needed for values up to `max_value` (0 for 0).
int BitsFor(uint64_t max_value);

}  // namespace neardup

#endif  // NEARDUP_COMMON_RICE_CODEC_H_
