// The one codec of sorted distinct 32-bit sets (the store's verification form of a shingle set,
// and what dedup and Dask spill): the exact narrowed 32-bit set (sorted, distinct) in Elias-Fano
// coding (docs/storage_format.md "The verification form"): the count n (varint), the
// number L of low bits (a byte; floor(log2(2^U / n)) for values below 2^U, U = 32 for shingle
// sets, 20 for the `edited` reason's unit sets), the length of the upper part in bits
// (varint), then the n low parts of L bits, packed, then the upper part: value i sets bit
// (value_i >> L) + i. About n (L + 2.5) bits: 23 % less than the raw values on the dev corpus,
// 13 % less than delta + varint, decoded with one count-trailing-zeros per value. Chosen over a
// smaller sketch because it gives exactly dedup's Jaccard (bench/set_form_bench.cc measures the
// forms).
//
// Internal header. Pure functions; thread-safe.
#ifndef NEARDUP_COMMON_SET_CODEC_H_
#define NEARDUP_COMMON_SET_CODEC_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace neardup {

// Appends the encoding of `set` (sorted ascending, distinct, every value below 2^universe_bits)
// to `out`. `universe_bits` (1..32) only chooses L: a set of 20-bit values (unit sets,
// ShingleSimilarity::kUnitBits) takes about n (L + 2) bits with L ~ 12 instead of L ~ 24. The
// decoder reads L from the bytes, so every encoding decodes with DecodeShingleSet, and 32 (the
// default, the shingle sets') writes exactly the bytes written before the argument existed.
void EncodeShingleSet(std::span<const uint32_t> set, std::string* out, int universe_bits = 32);

// The number of low bits L the encoder chooses for n values in a universe of 2^universe_bits:
// floor(log2(2^universe_bits / n)), at least 0. With EncodedLowBits it tells which universe wrote
// a set (a store's recovery tells 20-bit unit sets from 32-bit ones so).
int SetCodecLowBits(uint64_t n, int universe_bits);
// The L byte of the encoding at the start of `bytes`; -1 for an empty set or damaged bytes.
int EncodedLowBits(std::string_view bytes);

// Decodes one set from the start of `bytes` into `set` (cleared first); *used (if given) gets the
// bytes read. False, with `set` cleared, when the bytes are not a valid encoding (truncated, a
// value past 32 bits, more values than bytes): damage, never an out-of-bounds read.
bool DecodeShingleSet(std::string_view bytes, std::vector<uint32_t>* set, size_t* used = nullptr);

}  // namespace neardup

#endif  // NEARDUP_COMMON_SET_CODEC_H_
