// UTF-8 primitives shared by every stage: validation and code point decoding.
//
// Internal header. Validation follows RFC 3629: no overlong forms, no surrogates, nothing above
// U+10FFFF.
#ifndef NEARDUP_COMMON_UTF8_H_
#define NEARDUP_COMMON_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace neardup::utf8 {

// Length (1-4) of the valid UTF-8 sequence starting at s[i], or 0 if the bytes there are invalid.
inline size_t ValidSequenceLength(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  auto cont = [&](size_t j) {
    return j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80;
  };
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    if (b0 == 0xE0 && b1 < 0xA0) return 0;   // overlong
    if (b0 == 0xED && b1 >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    if (b0 == 0xF0 && b1 < 0x90) return 0;   // overlong
    if (b0 == 0xF4 && b1 >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

// Whether the 8 bytes at p are all ASCII.
inline bool AsciiWord(const char* p) {
  uint64_t word;
  std::memcpy(&word, p, 8);
  return (word & 0x8080808080808080ull) == 0;
}

// Byte offset of the first invalid sequence in `s`, or std::string_view::npos if `s` is valid.
inline size_t FindInvalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // Fast path over ASCII, eight bytes at a time.
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      while (i + 8 <= s.size() && AsciiWord(s.data() + i)) i += 8;
      continue;
    }
    size_t len = ValidSequenceLength(s, i);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

inline bool IsValid(std::string_view s) { return FindInvalid(s) == std::string_view::npos; }

// Number of bytes >= 0x80 in `s` (0: the text is ASCII).
inline size_t CountNonAscii(std::string_view s) {
  size_t count = 0;
  for (char c : s) count += static_cast<unsigned char>(c) >> 7;
  return count;
}

// The project's two whitespace definitions, both Python's (jieba is Python):
//  - IsPythonSpace: str.isspace(), the whitespace of text. Whitespace folding, jieba's keyword
//    filtering and str.strip() use it. Above ASCII it is Unicode White_Space (ICU's
//    u_isUWhiteSpace, checked in tests/text_test.cc); in ASCII it adds the separators 0x1C-0x1F.
//  - IsAsciiSpaceByte: bytes.isspace() (space \t \n \v \f \r), the whitespace of data files and
//    of Python source (jieba's dict.txt lines, finalseg/prob_*.py).
inline bool IsAsciiWhitespace(unsigned char c) {  // IsPythonSpace for one ASCII byte
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F);
}
inline bool IsPythonSpace(char32_t cp) {
  if (cp < 0x80) return IsAsciiWhitespace(static_cast<unsigned char>(cp));
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}
inline bool IsAsciiSpaceByte(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Decodes the code point at s[i] (which must start a valid sequence of `len` bytes).
inline char32_t Decode(std::string_view s, size_t i, size_t len) {
  const auto b = [&](size_t j) {
    return static_cast<char32_t>(static_cast<unsigned char>(s[i + j]));
  };
  switch (len) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

// Whether `cp` is a CJK ideograph: the unified block, extension A, the compatibility ideographs
// and planes 2 and 3 (extensions B and later).
inline bool IsHanIdeograph(char32_t cp) {
  return (cp >= 0x3400 && cp <= 0x9FFF) || (cp >= 0xF900 && cp <= 0xFAFF) ||
         (cp >= 0x20000 && cp <= 0x3FFFF);
}

// Calls visit(cp) for the code points of `text`, in order, until visit returns true; returns
// whether it did. Invalid bytes are skipped, and so are bytes below `min_lead_byte`, a fast filter
// for callers that look only at high code points (0x80 skips ASCII; 0xE3 skips all below U+3000).
template <typename Visit>
bool AnyCodePoint(std::string_view text, unsigned char min_lead_byte, Visit&& visit) {
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < min_lead_byte) {
      ++i;
#ifdef __SSE2__
      // Sixteen bytes at a time while none reaches min_lead_byte (unsigned compare via max).
      const __m128i floor = _mm_set1_epi8(static_cast<char>(min_lead_byte));
      while (i + 16 <= text.size()) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + i));
        if (_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(v, floor), v)) != 0) break;
        i += 16;
      }
#endif
      continue;
    }
    size_t len = ValidSequenceLength(text, i);
    if (len == 0) {
      ++i;
      continue;
    }
    if (visit(Decode(text, i, len))) return true;
    i += len;
  }
  return false;
}

// Whether `text` holds a Han ideograph (IsHanIdeograph) and no kana (U+3040-U+30FF, U+31F0-U+31FF,
// U+FF66-U+FF9F): the choice of jieba for Chinese. Same answer as visiting the valid sequences
// with AnyCodePoint, but from the bytes, without decoding: both scripts start with lead byte 0xE3
// to 0xE9, 0xEF or 0xF0, lead bytes are never continuation bytes, and once Han is seen only kana's
// lead bytes 0xE3 and 0xEF before kana's second bytes matter (skipped sixteen at a time).
inline bool HanWithoutKana(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  const auto cont = [p, n](size_t j) { return j < n && (p[j] & 0xC0) == 0x80; };
  bool han = false;
  size_t i = 0;
  while (i < n) {
#ifdef __SSE2__
    if (han) {
      // Stops only at E3 81-83, E3 87, EF BD or EF BE (a byte and the next one).
      const auto eq = [](__m128i v, int c) {
        return _mm_cmpeq_epi8(v, _mm_set1_epi8(static_cast<char>(c)));
      };
      while (i + 17 <= n) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
        const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 1));
        const __m128i after_e3 = _mm_or_si128(_mm_or_si128(eq(w, 0x81), eq(w, 0x82)),
                                              _mm_or_si128(eq(w, 0x83), eq(w, 0x87)));
        const __m128i after_ef = _mm_or_si128(eq(w, 0xBD), eq(w, 0xBE));
        const __m128i hit = _mm_or_si128(_mm_and_si128(eq(v, 0xE3), after_e3),
                                         _mm_and_si128(eq(v, 0xEF), after_ef));
        if (_mm_movemask_epi8(hit) != 0) break;
        i += 16;
      }
    } else {
      const __m128i floor = _mm_set1_epi8(static_cast<char>(0xE3));
      while (i + 16 <= n) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
        if (_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(v, floor), v)) != 0) break;
        i += 16;
      }
    }
    if (i >= n) break;
#endif
    const unsigned char b = p[i];
    if (b >= 0xE3 && b <= 0xE9) {
      if (cont(i + 1) && cont(i + 2)) {
        const unsigned char b1 = p[i + 1];
        if (b > 0xE3 || b1 >= 0x90) {
          han = true;  // U+3400-U+9FFF
        } else if ((b1 >= 0x81 && b1 <= 0x83) || (b1 == 0x87 && p[i + 2] >= 0xB0)) {
          return false;  // U+3040-U+30FF, U+31F0-U+31FF
        }
      }
    } else if (b == 0xEF) {
      if (cont(i + 1) && cont(i + 2)) {
        const unsigned char b1 = p[i + 1], b2 = p[i + 2];
        if (b1 >= 0xA4 && b1 <= 0xAB) {
          han = true;  // U+F900-U+FAFF
        } else if ((b1 == 0xBD && b2 >= 0xA6) || (b1 == 0xBE && b2 <= 0x9F)) {
          return false;  // U+FF66-U+FF9F
        }
      }
    } else if (b == 0xF0) {
      if (cont(i + 1) && p[i + 1] >= 0xA0 && cont(i + 2) && cont(i + 3)) {
        han = true;  // U+20000-U+3FFFF
      }
    }
    ++i;
  }
  return han;
}

// Appends the UTF-8 encoding of `cp` (assumed a valid scalar value) to `out`.
inline void Append(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Replaces every invalid byte with U+FFFD.
inline std::string ReplaceInvalid(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t len = ValidSequenceLength(s, i);
    if (len == 0) {
      out.append("\xEF\xBF\xBD");
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

// Python str.strip() on valid UTF-8.
inline std::string_view StripPythonSpace(std::string_view s) {
  while (!s.empty()) {
    const size_t len = ValidSequenceLength(s, 0);
    if (len == 0 || !IsPythonSpace(Decode(s, 0, len))) break;
    s.remove_prefix(len);
  }
  while (!s.empty()) {
    size_t start = s.size() - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    const size_t len = ValidSequenceLength(s, start);
    if (len == 0 || !IsPythonSpace(Decode(s, start, len))) break;
    s.remove_suffix(s.size() - start);
  }
  return s;
}

}  // namespace neardup::utf8

#endif  // NEARDUP_COMMON_UTF8_H_
