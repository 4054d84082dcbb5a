// HTML/XML markup stripping and entity decoding, and whitespace folding; see neardup/text.h.
#include <unicode/uchar.h>
#ifdef __SSSE3__
#include <tmmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "neardup/text.h"

namespace neardup {
namespace {

struct NamedEntity {
  const char* name;
  char32_t code_point;
};

// The entities that occur in real web text; numeric references cover the rest.
constexpr NamedEntity kNamedEntities[] = {
    {"amp", '&'},       {"lt", '<'},        {"gt", '>'},       {"quot", '"'},     {"apos", '\''},
    {"nbsp", 0xA0},     {"copy", 0xA9},     {"reg", 0xAE},     {"trade", 0x2122}, {"mdash", 0x2014},
    {"ndash", 0x2013},  {"hellip", 0x2026}, {"lsquo", 0x2018}, {"rsquo", 0x2019}, {"ldquo", 0x201C},
    {"rdquo", 0x201D},  {"sbquo", 0x201A},  {"bdquo", 0x201E}, {"laquo", 0xAB},   {"raquo", 0xBB},
    {"middot", 0xB7},   {"bull", 0x2022},   {"euro", 0x20AC},  {"pound", 0xA3},   {"yen", 0xA5},
    {"cent", 0xA2},     {"sect", 0xA7},     {"para", 0xB6},    {"deg", 0xB0},     {"plusmn", 0xB1},
    {"times", 0xD7},    {"divide", 0xF7},   {"shy", 0xAD},     {"ensp", 0x2002},  {"emsp", 0x2003},
    {"thinsp", 0x2009}, {"zwnj", 0x200C},   {"zwj", 0x200D},   {"iexcl", 0xA1},   {"iquest", 0xBF},
    {"auml", 0xE4},     {"ouml", 0xF6},     {"uuml", 0xFC},    {"Auml", 0xC4},    {"Ouml", 0xD6},
    {"Uuml", 0xDC},     {"szlig", 0xDF},    {"eacute", 0xE9},  {"egrave", 0xE8},  {"agrave", 0xE0},
    {"aacute", 0xE1},   {"ccedil", 0xE7},   {"ntilde", 0xF1},  {"oacute", 0xF3},  {"iacute", 0xED},
    {"uacute", 0xFA},   {"Eacute", 0xC9},   {"larr", 0x2190},  {"rarr", 0x2192},  {"uarr", 0x2191},
    {"darr", 0x2193},   {"hArr", 0x21D4},   {"rArr", 0x21D2},  {"le", 0x2264},    {"ge", 0x2265},
    {"ne", 0x2260},     {"infin", 0x221E},  {"micro", 0xB5},
};

// Tags whose boundaries separate words (a line break is emitted for them).
constexpr std::string_view kBlockTags[] = {
    "address", "article", "aside",      "blockquote", "br",     "caption", "dd",    "div",
    "dl",      "dt",      "figcaption", "figure",     "footer", "form",    "h1",    "h2",
    "h3",      "h4",      "h5",         "h6",         "header", "hr",      "li",    "main",
    "nav",     "ol",      "option",     "p",          "pre",    "section", "table", "td",
    "th",      "title",   "tr",         "ul",         "body",   "head",    "html"};

// A '<' whose '>' is further away than this is text, not a tag.
constexpr size_t kMaxTagBytes = 4096;

bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Case-insensitive search for `needle` (lowercase ASCII) in html from `from`.
size_t FindCaseless(std::string_view html, std::string_view needle, size_t from) {
  for (size_t i = from; i + needle.size() <= html.size(); ++i) {
    size_t j = 0;
    while (j < needle.size() && AsciiLower(html[i + j]) == needle[j]) ++j;
    if (j == needle.size()) return i;
  }
  return std::string_view::npos;
}

bool IsValidScalar(uint64_t cp) {
  return cp > 0 && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
}

// Decodes the entity starting at html[i] == '&'. On success appends it and returns its length.
size_t DecodeEntity(std::string_view html, size_t i, std::string* out) {
  size_t semicolon = html.find(';', i + 1);
  if (semicolon == std::string_view::npos || semicolon - i > 12) return 0;
  std::string_view body = html.substr(i + 1, semicolon - i - 1);
  if (body.empty()) return 0;
  if (body[0] == '#') {
    uint64_t cp = 0;
    bool hex = body.size() > 1 && (body[1] == 'x' || body[1] == 'X');
    std::string_view digits = body.substr(hex ? 2 : 1);
    if (digits.empty()) return 0;
    for (char c : digits) {
      int v;
      if (c >= '0' && c <= '9') {
        v = c - '0';
      } else if (hex && c >= 'a' && c <= 'f') {
        v = c - 'a' + 10;
      } else if (hex && c >= 'A' && c <= 'F') {
        v = c - 'A' + 10;
      } else {
        return 0;
      }
      cp = cp * (hex ? 16 : 10) + static_cast<uint64_t>(v);
      if (cp > 0x10FFFF) cp = 0x110000;  // saturate; reported as U+FFFD below
    }
    utf8::Append(IsValidScalar(cp) ? static_cast<char32_t>(cp) : U'\uFFFD', out);
    return semicolon - i + 1;
  }
  for (const NamedEntity& entity : kNamedEntities) {
    if (body == entity.name) {
      utf8::Append(entity.code_point, out);
      return semicolon - i + 1;
    }
  }
  return 0;
}

// The offset of the first '<' or '&' in html at or after `from`, or html.size().
size_t FindTagOrEntity(std::string_view html, size_t from) {
  size_t i = from;
#ifdef __SSSE3__
  const __m128i lt = _mm_set1_epi8('<'), amp = _mm_set1_epi8('&');
  while (i + 16 <= html.size()) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(html.data() + i));
    const auto hits = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, lt), _mm_cmpeq_epi8(v, amp))));
    if (hits != 0) return i + static_cast<size_t>(__builtin_ctz(hits));
    i += 16;
  }
#endif
  while (i < html.size() && html[i] != '<' && html[i] != '&') ++i;
  return i;
}

}  // namespace

std::string StripMarkup(std::string_view html) {
  std::string out;
  StripMarkupTo(html, &out);
  return out;
}

void StripMarkupTo(std::string_view html, std::string* out_buffer) {
  std::string& out = *out_buffer;
  out.clear();
  out.reserve(html.size());
  size_t i = 0;
  while (i < html.size()) {
    // Text up to the next '<' or '&' is copied as it is.
    const size_t special = FindTagOrEntity(html, i);
    if (special > i) {
      out.append(html.substr(i, special - i));
      i = special;
      if (i == html.size()) break;
    }
    char c = html[i];
    if (c == '&') {
      size_t used = DecodeEntity(html, i, &out);
      if (used > 0) {
        i += used;
        continue;
      }
      out.push_back(c);
      ++i;
      continue;
    }
    if (c != '<' || i + 1 >= html.size()) {
      out.push_back(c);
      ++i;
      continue;
    }
    char next = html[i + 1];
    if (html.substr(i, 4) == "<!--") {
      size_t end = html.find("-->", i + 4);
      i = end == std::string_view::npos ? html.size() : end + 3;
      out.push_back(' ');
      continue;
    }
    if (html.substr(i, 9) == "<![CDATA[") {
      size_t end = html.find("]]>", i + 9);
      size_t stop = end == std::string_view::npos ? html.size() : end;
      out.append(html.substr(i + 9, stop - i - 9));
      i = end == std::string_view::npos ? html.size() : end + 3;
      continue;
    }
    if (!(IsAsciiAlpha(next) || next == '/' || next == '!' || next == '?')) {
      out.push_back(c);  // a literal '<' as in "a < b"
      ++i;
      continue;
    }
    // A tag: find its end, honouring quoted attribute values.
    size_t j = i + 1;
    char quote = 0;
    while (j < html.size()) {
      char d = html[j];
      if (quote != 0) {
        if (d == quote) quote = 0;
      } else if (d == '"' || d == '\'') {
        quote = d;
      } else if (d == '>') {
        break;
      }
      ++j;
    }
    if (j >= html.size() || j - i > kMaxTagBytes) {
      out.push_back(c);  // no closing '>': a literal '<' as in "if a<b", not a tag
      ++i;
      continue;
    }
    size_t name_begin = i + 1 + (next == '/' ? 1 : 0);
    size_t name_end = name_begin;
    while (name_end < j &&
           (IsAsciiAlpha(html[name_end]) || (html[name_end] >= '0' && html[name_end] <= '9'))) {
      ++name_end;
    }
    std::string name;
    for (size_t k = name_begin; k < name_end; ++k) name.push_back(AsciiLower(html[k]));
    i = j + 1;
    if (next != '/' && (name == "script" || name == "style")) {
      size_t end = FindCaseless(html, "</" + name, i);
      if (end == std::string_view::npos) {
        i = html.size();
      } else {
        size_t close = html.find('>', end);
        i = close == std::string_view::npos ? html.size() : close + 1;
      }
      out.push_back('\n');
      continue;
    }
    bool block =
        std::find(std::begin(kBlockTags), std::end(kBlockTags), name) != std::end(kBlockTags);
    if (block) out.push_back('\n');
  }
}

std::string FoldWhitespace(std::string_view text) {
  std::string out;
  FoldWhitespaceTo(text, &out);
  return out;
}

namespace {

#ifdef __SSSE3__
// kLeftPack.shuffle[m]: the pshufb control that moves the bytes of an 8-byte group whose bit is
// set in m to the front, in order.
struct LeftPack {
  alignas(16) uint8_t shuffle[256][8];
  constexpr LeftPack() : shuffle() {
    for (int m = 0; m < 256; ++m) {
      int at = 0;
      for (int i = 0; i < 8; ++i) {
        if ((m >> i) & 1) shuffle[m][at++] = static_cast<uint8_t>(i);
      }
      for (; at < 8; ++at) shuffle[m][at] = 0x80;
    }
  }
};
constexpr LeftPack kLeftPack;

inline __m128i Bytes(int c) { return _mm_set1_epi8(static_cast<char>(c)); }
// Lanes where v is in [lo, lo + span] (unsigned).
inline __m128i InRange(__m128i v, int lo, int span) {
  const __m128i d = _mm_sub_epi8(v, Bytes(lo));
  return _mm_cmpeq_epi8(_mm_min_epu8(d, Bytes(span)), d);
}

// Bit k set when byte k of v starts a non-ASCII White_Space character (v1, v2: the bytes one and
// two further on): C2 85, C2 A0, E1 9A 80, E2 80 80-8A, E2 80 A8, E2 80 A9, E2 80 AF, E2 81 9F,
// E3 80 80.
inline unsigned NonAsciiSpaceStarts(__m128i v, __m128i v1, __m128i v2) {
  const auto eq = [](__m128i a, int c) { return _mm_cmpeq_epi8(a, Bytes(c)); };
  const __m128i c2 = _mm_and_si128(eq(v, 0xC2), _mm_or_si128(eq(v1, 0x85), eq(v1, 0xA0)));
  const __m128i e1 = _mm_and_si128(eq(v, 0xE1), _mm_and_si128(eq(v1, 0x9A), eq(v2, 0x80)));
  const __m128i e2_80 = _mm_and_si128(
      eq(v1, 0x80),
      _mm_or_si128(_mm_or_si128(InRange(v2, 0x80, 0x0A), InRange(v2, 0xA8, 1)), eq(v2, 0xAF)));
  const __m128i e2_81 = _mm_and_si128(eq(v1, 0x81), eq(v2, 0x9F));
  const __m128i e2 = _mm_and_si128(eq(v, 0xE2), _mm_or_si128(e2_80, e2_81));
  const __m128i e3 = _mm_and_si128(eq(v, 0xE3), _mm_and_si128(eq(v1, 0x80), eq(v2, 0x80)));
  return static_cast<unsigned>(
      _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(c2, e1), _mm_or_si128(e2, e3))));
}
#endif

}  // namespace

void FoldWhitespaceTo(std::string_view text, std::string* out) {
  // Writes through a raw pointer into a buffer sized for the worst case (the output is never
  // longer than the input), then trims. ASCII goes through a branch-free step: a whitespace byte
  // is written as ' ' but the pointer only advances if the previous byte was not whitespace (and
  // not the start of the text).
  out->resize(text.size());
  char* const begin = out->data();
  char* dest = begin;
  const char* src = text.data();
  const char* const end = src + text.size();
  bool after_space = true;  // at the start: leading whitespace is dropped
  while (src < end) {
    const char* scalar_end = src + 1;  // the byte-wise step below runs up to here
#ifdef __SSSE3__
    // Sixteen bytes at once when no non-ASCII White_Space character starts among them: ASCII
    // whitespace becomes ' ', and a whitespace byte after whitespace is dropped by packing the
    // kept bytes of each 8-byte half to the front. Other bytes (non-ASCII ones included) are
    // copied unchanged. The output never outruns the input, so 16-byte stores stay in *out.
    if (end - src >= 18) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
      unsigned special = 0;
      if (_mm_movemask_epi8(v) != 0) {
        special = NonAsciiSpaceStarts(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 1)),
                                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2)));
      }
      if (special == 0) {
        const __m128i space_lanes = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, Bytes(' ')), InRange(v, '\t', 4)), InRange(v, 0x1C, 3));
        const auto spaces = static_cast<unsigned>(_mm_movemask_epi8(space_lanes));
        const unsigned drop = spaces & ((spaces << 1) | (after_space ? 1u : 0u));
        const __m128i w =
            _mm_or_si128(_mm_andnot_si128(space_lanes, v), _mm_and_si128(space_lanes, Bytes(' ')));
        if (drop == 0) {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dest), w);
          dest += 16;
        } else {
          const unsigned keep = ~drop & 0xFFFF;
          const unsigned low = keep & 0xFF, high = keep >> 8;
          const __m128i low_control =
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(kLeftPack.shuffle[low]));
          const __m128i high_control =
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(kLeftPack.shuffle[high]));
          _mm_storel_epi64(reinterpret_cast<__m128i*>(dest), _mm_shuffle_epi8(w, low_control));
          dest += __builtin_popcount(low);
          _mm_storel_epi64(reinterpret_cast<__m128i*>(dest),
                           _mm_shuffle_epi8(_mm_srli_si128(w, 8), high_control));
          dest += __builtin_popcount(high);
        }
        after_space = (spaces >> 15) & 1;
        src += 16;
        continue;
      }
      // Byte by byte up to and including the first non-ASCII White_Space character.
      scalar_end = src + __builtin_ctz(special) + 1;
    }
#endif
    while (src < scalar_end) {
      auto byte = static_cast<unsigned char>(*src);
      if (byte < 0x80) {
        const bool space = utf8::IsAsciiWhitespace(byte);
        *dest = space ? ' ' : static_cast<char>(byte);
        dest += !(space && after_space);
        after_space = space;
        ++src;
        continue;
      }
      size_t i = static_cast<size_t>(src - text.data());
      size_t len = utf8::ValidSequenceLength(text, i);
      if (len == 0) len = 1;  // caller promised valid UTF-8; copy a stray byte unchanged
      if (len > 1 && utf8::IsPythonSpace(utf8::Decode(text, i, len))) {
        if (!after_space) *dest++ = ' ';
        after_space = true;
      } else {
        std::memcpy(dest, src, len);
        dest += len;
        after_space = false;
      }
      src += len;
    }
  }
  if (dest != begin && after_space) --dest;  // a trailing space
  out->resize(static_cast<size_t>(dest - begin));
}

}  // namespace neardup
