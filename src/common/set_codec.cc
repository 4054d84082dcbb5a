// Elias-Fano coding of shingle sets; see set_codec.h.
#include "common/set_codec.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace neardup {
namespace {

void PutVarint(uint64_t v, std::string* out) {
  char buffer[10];
  size_t n = 0;
  while (v >= 0x80) {
    buffer[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  buffer[n++] = static_cast<char>(v);
  out->append(buffer, n);
}

// Reads a varint of at most 5 bytes (a value < 2^35) at *pos.
bool GetVarint(const uint8_t* p, size_t size, size_t* pos, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    if (*pos >= size) return false;
    const uint8_t byte = p[(*pos)++];
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (byte < 0x80) {
      *v = result;
      return true;
    }
  }
  return false;
}

// The number of low bits for n values below 2^universe: floor(log2(2^universe / n)), at least 0.
int LowBits(uint64_t n, int universe) {
  if (n == 0) return 0;
  const int log2n = 63 - std::countl_zero(n);
  return log2n >= universe ? 0 : universe - log2n - ((n & (n - 1)) != 0 ? 1 : 0);
}

// Little-endian bit reader over bytes.
// Reads `width` (<= 32) bits at bit position `bit` of `p` (which has at least 8 readable bytes
// from bit / 8, or the caller checked the exact end).
inline uint64_t GetBits(const uint8_t* p, size_t size, size_t bit, int width) {
  const size_t byte = bit / 8;
  uint64_t word = 0;
  if (byte + 8 <= size) {
    std::memcpy(&word, p + byte, 8);  // one unaligned load
  } else {
    std::memcpy(&word, p + byte, size - byte);
  }
  return (word >> (bit % 8)) & ((uint64_t{1} << width) - 1);
}

}  // namespace

int SetCodecLowBits(uint64_t n, int universe_bits) {
  return LowBits(n, std::clamp(universe_bits, 1, 32));
}

int EncodedLowBits(std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t pos = 0;
  uint64_t n = 0;
  if (!GetVarint(p, bytes.size(), &pos, &n) || n == 0 || pos >= bytes.size()) return -1;
  return p[pos];
}

void EncodeShingleSet(std::span<const uint32_t> set, std::string* out, int universe_bits) {
  const uint64_t n = set.size();
  PutVarint(n, out);
  if (n == 0) return;
  // A value past the universe (misuse) still encodes exactly: only the upper part grows.
  const int low = LowBits(n, std::clamp(universe_bits, 1, 32));
  const uint64_t upper_bits = n + (uint64_t{set.back()} >> low) + 1;
  out->push_back(static_cast<char>(low));
  PutVarint(upper_bits, out);
  const size_t low_at = out->size();
  const size_t low_bytes = (n * low + 7) / 8;
  const size_t upper_at = low_at + low_bytes;
  out->resize(upper_at + (upper_bits + 7) / 8, '\0');
  auto* bytes = reinterpret_cast<uint8_t*>(out->data());
  // The low parts through a 64-bit accumulator, flushed a byte at a time.
  const uint64_t low_mask = low == 0 ? 0 : (uint64_t{1} << low) - 1;
  uint64_t pending = 0;
  int pending_bits = 0;
  size_t at = low_at;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t v = set[i];
    if (low > 0) {
      pending |= (v & low_mask) << pending_bits;
      pending_bits += low;
      while (pending_bits >= 8) {
        bytes[at++] = static_cast<uint8_t>(pending);
        pending >>= 8;
        pending_bits -= 8;
      }
    }
    const uint64_t position = (v >> low) + i;
    bytes[upper_at + position / 8] |= static_cast<uint8_t>(1u << (position % 8));
  }
  if (pending_bits > 0) bytes[at] = static_cast<uint8_t>(pending);
}

bool DecodeShingleSet(std::string_view bytes, std::vector<uint32_t>* set, size_t* used) {
  set->clear();
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t size = bytes.size();
  size_t pos = 0;
  uint64_t n = 0;
  if (!GetVarint(p, size, &pos, &n)) return false;
  if (n == 0) {
    if (used != nullptr) *used = pos;
    return true;
  }
  uint64_t upper_bits = 0;
  if (pos >= size) return false;
  const int low = p[pos++];
  if (low > 32 || !GetVarint(p, size, &pos, &upper_bits)) return false;
  const uint64_t low_bytes = (n * low + 7) / 8;
  // Every value takes a bit of the upper part, so n <= upper_bits <= 8 x what is left.
  if (n > upper_bits || upper_bits > uint64_t{1} << 34 || low_bytes > size - pos ||
      (upper_bits + 7) / 8 > size - pos - low_bytes) {
    return false;
  }
  const uint8_t* lows = p + pos;
  const uint8_t* upper = lows + low_bytes;
  const size_t upper_size = (upper_bits + 7) / 8;
  set->resize(n);
  uint64_t i = 0;
  uint64_t previous = 0;
  // The low parts are read past their end into the upper part (still inside `bytes`), so the
  // common case is one unaligned load each.
  const size_t readable = size - pos;
  for (size_t word_at = 0; word_at < upper_size && i < n; word_at += 8) {
    uint64_t word = 0;
    if (word_at + 8 <= upper_size) {
      std::memcpy(&word, upper + word_at, 8);
    } else {
      std::memcpy(&word, upper + word_at, upper_size - word_at);
    }
    while (word != 0 && i < n) {
      const uint64_t position = word_at * 8 + std::countr_zero(word);
      word &= word - 1;
      const uint64_t high = position - i;
      const uint64_t low_part = low == 0 ? 0 : GetBits(lows, readable, i * low, low);
      const uint64_t value = high << low | low_part;
      if (value > UINT32_MAX || (i > 0 && value <= previous)) {
        set->clear();
        return false;  // damage: not a sorted set of distinct 32-bit values
      }
      (*set)[i++] = static_cast<uint32_t>(value);
      previous = value;
    }
  }
  if (i != n) {
    set->clear();
    return false;
  }
  if (used != nullptr) *used = pos + low_bytes + upper_size;
  return true;
}

}  // namespace neardup
