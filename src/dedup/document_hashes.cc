// SqueezedHash; see dedup/document_hashes.h.
#include "dedup/document_hashes.h"

#include <xxhash.h>

#include <array>
#include <bit>
#include <string>

#ifdef __SSSE3__
#include <tmmintrin.h>
#endif

namespace neardup {

namespace {

// What each byte is to SqueezedHash: kept, removed (ASCII whitespace), or the lead byte of
// U+00A0 (C2 A0) or U+3000 (E3 80 80), removed with its sequence.
enum ByteKind : uint8_t { kKeep = 0, kRemove = 1, kLead = 2 };
constexpr std::array<uint8_t, 256> kKind = [] {
  std::array<uint8_t, 256> table{};
  for (unsigned char c : {' ', '\t', '\n', '\r', '\f', '\v'}) table[c] = kRemove;
  table[0xC2] = kLead;
  table[0xE3] = kLead;
  return table;
}();

// The per-thread buffer the squeezed text is built in (reached through a call that is not
// inlined, so the thread-local address is computed once per document).
[[gnu::noinline]] std::string& SqueezeBuffer() {
  thread_local std::string buffer;
  return buffer;
}

// Appends the kept bytes of text[begin, end) to out + *length. The removed sequences (C2 A0,
// E3 80 80) cannot overlap one another (their later bytes are never a lead byte or whitespace),
// so every occurrence in the bytes is removed whatever precedes it, and a range may start or end
// inside one: the bytes before `begin` and from `end` on are looked at, not written.
void SqueezeRange(const unsigned char* bytes, size_t size, size_t begin, size_t end, char* out,
                  size_t* length) {
  size_t n = *length;
  for (size_t i = begin; i < end; ++i) {
    const unsigned char c = bytes[i];
    bool remove = kKind[c] == kRemove;
    if (c == 0xC2) {
      remove = i + 1 < size && bytes[i + 1] == 0xA0;
    } else if (c == 0xE3) {
      remove = i + 2 < size && bytes[i + 1] == 0x80 && bytes[i + 2] == 0x80;
    } else if (c == 0xA0) {
      remove = i >= 1 && bytes[i - 1] == 0xC2;
    } else if (c == 0x80) {
      remove = (i >= 1 && bytes[i - 1] == 0xE3 && i + 1 < size && bytes[i + 1] == 0x80) ||
               (i >= 2 && bytes[i - 2] == 0xE3 && bytes[i - 1] == 0x80);
    }
    out[n] = static_cast<char>(c);  // written always, counted only when kept (no branch)
    n += !remove;
  }
  *length = n;
}

#ifdef __SSSE3__
// For each 8-bit keep mask, the shuffle that moves the kept bytes of 8 to the front.
struct CompactTable {
  alignas(16) uint64_t shuffle[256];
  constexpr CompactTable() : shuffle() {
    for (int mask = 0; mask < 256; ++mask) {
      uint64_t indices = 0;
      int k = 0;
      for (int bit = 0; bit < 8; ++bit) {
        if (mask & (1 << bit)) indices |= static_cast<uint64_t>(bit) << (8 * k++);
      }
      for (; k < 8; ++k) indices |= uint64_t{0x80} << (8 * k);  // zero fill
      shuffle[mask] = indices;
    }
  }
};
constexpr CompactTable kCompact;

// Bytes equal to `value`, as a vector of 0xFF/0x00.
inline __m128i Equal(__m128i v, char value) { return _mm_cmpeq_epi8(v, _mm_set1_epi8(value)); }
#endif

}  // namespace

uint64_t SqueezedHash(std::string_view text) {
  std::string& squeezed = SqueezeBuffer();
  if (squeezed.capacity() > (size_t{64} << 20) && squeezed.capacity() > 8 * text.size()) {
    std::string().swap(squeezed);  // a huge earlier text: give its memory back
  }
  squeezed.resize(text.size() + 16);  // 16 bytes of room for whole-vector stores
  char* out = squeezed.data();
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  size_t length = 0;
  size_t i = 0;
#ifdef __SSSE3__
  // 16 bytes at a time, looking 2 bytes back and 2 ahead: the blocks from byte 2 while 2 bytes
  // follow the block.
  if (size >= 20) {
    SqueezeRange(bytes, size, 0, 2, out, &length);
    i = 2;
    for (; i + 18 <= size; i += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + i));
      // ASCII whitespace: ' ' or 0x09..0x0D.
      const __m128i shifted = _mm_sub_epi8(v, _mm_set1_epi8(0x09));
      __m128i remove = _mm_or_si128(
          Equal(v, ' '), _mm_cmpeq_epi8(_mm_min_epu8(shifted, _mm_set1_epi8(4)), shifted));
      const __m128i high = _mm_cmplt_epi8(v, _mm_setzero_si128());  // bytes >= 0x80
      if (_mm_movemask_epi8(high) != 0) {
        const auto at = [&](int offset) {
          return _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + i + offset));
        };
        const __m128i p2 = at(-2), p1 = at(-1), n1 = at(1), n2 = at(2);
        const __m128i c2 = Equal(v, '\xC2'), a0 = Equal(v, '\xA0'), b80 = Equal(v, '\x80');
        const __m128i nbsp = _mm_or_si128(_mm_and_si128(c2, Equal(n1, '\xA0')),
                                          _mm_and_si128(a0, Equal(p1, '\xC2')));
        const __m128i ideo_first =
            _mm_and_si128(Equal(v, '\xE3'), _mm_and_si128(Equal(n1, '\x80'), Equal(n2, '\x80')));
        const __m128i ideo_second =
            _mm_and_si128(b80, _mm_and_si128(Equal(p1, '\xE3'), Equal(n1, '\x80')));
        const __m128i ideo_third =
            _mm_and_si128(b80, _mm_and_si128(Equal(p2, '\xE3'), Equal(p1, '\x80')));
        remove = _mm_or_si128(
            remove,
            _mm_or_si128(nbsp, _mm_or_si128(ideo_first, _mm_or_si128(ideo_second, ideo_third))));
      }
      const unsigned keep = ~static_cast<unsigned>(_mm_movemask_epi8(remove)) & 0xFFFF;
      if (keep == 0xFFFF) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + length), v);
        length += 16;
        continue;
      }
      const unsigned low = keep & 0xFF, upper = keep >> 8;
      const __m128i order =
          _mm_set_epi64x(static_cast<int64_t>(kCompact.shuffle[upper] + 0x0808080808080808ULL),
                         static_cast<int64_t>(kCompact.shuffle[low]));
      // Bytes whose index has the top bit set become zero; the high half's fill (0x80 + 8) keeps
      // it set, so both halves compact within themselves.
      const __m128i packed = _mm_shuffle_epi8(v, order);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + length), packed);
      length += static_cast<size_t>(std::popcount(low));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + length), _mm_srli_si128(packed, 8));
      length += static_cast<size_t>(std::popcount(upper));
    }
  }
#endif
  SqueezeRange(bytes, size, i, size, out, &length);
  return XXH3_64bits(out, length);
}

}  // namespace neardup
