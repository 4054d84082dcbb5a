// Word segmentation for space-separated scripts without ICU's BreakIterator; see word_splitter.h.
//
// The rules are those of ICU 72's root word.txt: UAX #29 WB4-WB13b with '@' an ALetter and ':'
// not a MidLetter. Every code point is classified once from ICU's own properties, so the splitter
// follows the ICU data it is compared with; scripts that ICU segments with dictionaries are
// refused (the caller falls back to ICU), as are ZWJ and regional indicators.
#include "features/word_splitter.h"

#include <unicode/uchar.h>
#include <unicode/uscript.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/utf8.h"

namespace neardup {
namespace {

enum Class : uint8_t {
  kOther,         // breaks on both sides and is no word (punctuation, spaces, symbols, ...)
  kHardBreak,     // CR, LF, Newline: Extend/Format after them does not attach to them
  kExtend,        // Word_Break Extend or Format: attaches to the code point before it (WB4)
  kALetter,       // ALetter (minus dictionary scripts) and '@'
  kHebrewLetter,  // Hebrew_Letter
  kNumeric,       // Numeric
  kMidLetter,     // MidLetter minus ':' U+FE55 U+FF1A
  kMidNumLet,     // MidNumLet
  kMidNum,        // MidNum
  kSingleQuote,   // Single_Quote
  kDoubleQuote,   // Double_Quote
  kExtendNumLet,  // ExtendNumLet
  kRefuse,        // left to ICU
};

Class Classify(UChar32 c) {
  UErrorCode error = U_ZERO_ERROR;
  UScriptCode script = uscript_getScript(c, &error);
  if (script == USCRIPT_HAN || script == USCRIPT_HIRAGANA || script == USCRIPT_KATAKANA ||
      script == USCRIPT_HANGUL || u_hasBinaryProperty(c, UCHAR_IDEOGRAPHIC) ||
      u_getIntPropertyValue(c, UCHAR_LINE_BREAK) == U_LB_COMPLEX_CONTEXT) {
    return kRefuse;
  }
  if (c == '@') return kALetter;
  if (c == ':' || c == 0xFE55 || c == 0xFF1A) return kOther;
  switch (u_getIntPropertyValue(c, UCHAR_WORD_BREAK)) {
    case U_WB_CR:
    case U_WB_LF:
    case U_WB_NEWLINE:
      return kHardBreak;
    case U_WB_EXTEND:
    case U_WB_FORMAT:
      return kExtend;
    case U_WB_ALETTER:
      return kALetter;
    case U_WB_HEBREW_LETTER:
      return kHebrewLetter;
    case U_WB_NUMERIC:
      return kNumeric;
    case U_WB_MIDLETTER:
      return kMidLetter;
    case U_WB_MIDNUMLET:
      return kMidNumLet;
    case U_WB_MIDNUM:
      return kMidNum;
    case U_WB_SINGLE_QUOTE:
      return kSingleQuote;
    case U_WB_DOUBLE_QUOTE:
      return kDoubleQuote;
    case U_WB_EXTENDNUMLET:
      return kExtendNumLet;
    case U_WB_OTHER:
    case U_WB_WSEGSPACE:
      return kOther;
    default:  // Katakana, ZWJ, Regional_Indicator, the emoji classes of Unicode 9-10
      return kRefuse;
  }
}

// Bit 7 of a table entry: the code point is a letter, mark or number (IsLetterMarkOrNumber).
constexpr uint8_t kContent = 0x80;
constexpr uint8_t kClassMask = 0x7F;

bool ContentProperty(UChar32 c) {
  return (U_GET_GC_MASK(c) & (U_GC_L_MASK | U_GC_M_MASK | U_GC_N_MASK)) != 0;
}

// Classes of the Basic Multilingual Plane, with the kContent bit, built once; other planes are
// classified on the fly.
const std::array<uint8_t, 0x10000>& BmpClasses() {
  static const auto* table = [] {
    auto* t = new std::array<uint8_t, 0x10000>;
    for (UChar32 c = 0; c < 0x10000; ++c) {
      const bool surrogate = c >= 0xD800 && c <= 0xDFFF;
      (*t)[static_cast<size_t>(c)] = static_cast<uint8_t>(
          (surrogate ? kRefuse : Classify(c)) | (!surrogate && ContentProperty(c) ? kContent : 0));
    }
    return t;
  }();
  return *table;
}

bool IsWordClass(Class c) {
  return c == kALetter || c == kHebrewLetter || c == kNumeric || c == kExtendNumLet;
}
bool IsAHLetter(Class c) { return c == kALetter || c == kHebrewLetter; }
bool IsAsciiDigit(unsigned char c) { return c >= '0' && c <= '9'; }
bool IsAsciiAlnum(unsigned char c) {
  return IsAsciiDigit(c) || static_cast<unsigned char>((c | 0x20) - 'a') < 26;
}
// An ASCII byte that can start a word: a letter, a digit, '_' (ExtendNumLet) or '@' (ALetter).
bool IsAsciiStarter(unsigned char c) { return IsAsciiAlnum(c) || c == '_' || c == '@'; }
// An ASCII byte after which a word of ASCII letters and digits surely ends: not a word character
// and no MidLetter / MidNum / MidNumLet / quote that could join it to what follows.
bool EndsAsciiWord(unsigned char c) {
  return c < 0x80 && !IsAsciiStarter(c) && c != '\'' && c != '"' && c != ',' && c != '.' &&
         c != ';';
}

#ifdef __SSE2__
// Bit k set when byte k of v is an ASCII letter or digit.
inline unsigned AlnumMask(__m128i v) {
  const __m128i letter = _mm_sub_epi8(_mm_or_si128(v, _mm_set1_epi8(0x20)), _mm_set1_epi8('a'));
  const __m128i digit = _mm_sub_epi8(v, _mm_set1_epi8('0'));
  const __m128i is_letter = _mm_cmpeq_epi8(_mm_min_epu8(letter, _mm_set1_epi8(25)), letter);
  const __m128i is_digit = _mm_cmpeq_epi8(_mm_min_epu8(digit, _mm_set1_epi8(9)), digit);
  return static_cast<unsigned>(_mm_movemask_epi8(_mm_or_si128(is_letter, is_digit)));
}
// Bit k set when byte k of v can start a word or is not ASCII.
inline unsigned StarterMask(__m128i v) {
  const __m128i special =
      _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('_')), _mm_cmpeq_epi8(v, _mm_set1_epi8('@')));
  return AlnumMask(v) | static_cast<unsigned>(_mm_movemask_epi8(special)) |
         static_cast<unsigned>(_mm_movemask_epi8(v));
}
inline __m128i Load16(const char* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// Byte classes of a 64-byte window, one bit per byte: `alnum` ASCII letters and digits;
// `skip` ASCII bytes that start no word (everything but letters, digits, '_' and '@'); `ends`
// those of them after which a word of letters and digits surely ends (not ' " , . ; which may
// join it to what follows).
struct Window {
  uint64_t alnum = 0, skip = 0, ends = 0;
  Window() = default;
  explicit Window(const char* p) {
    for (int k = 0; k < 4; ++k) {
      const __m128i v = Load16(p + 16 * k);
      const auto eq = [&v](char c) { return _mm_cmpeq_epi8(v, _mm_set1_epi8(c)); };
      const uint64_t a = AlnumMask(v);
      const uint64_t starter =
          a | static_cast<unsigned>(_mm_movemask_epi8(_mm_or_si128(eq('_'), eq('@')))) |
          static_cast<unsigned>(_mm_movemask_epi8(v));
      const uint64_t joiners = static_cast<unsigned>(_mm_movemask_epi8(_mm_or_si128(
          _mm_or_si128(eq('\''), eq('"')), _mm_or_si128(_mm_or_si128(eq(','), eq('.')), eq(';')))));
      const uint64_t not_starter = ~starter & 0xFFFF;
      alnum |= a << (16 * k);
      skip |= not_starter << (16 * k);
      ends |= (not_starter & ~joiners) << (16 * k);
    }
  }
};
#endif

// A base code point with the Extend/Format code points attached to it (WB4).
struct Unit {
  Class cls = kOther;
  size_t end = 0;
};

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text), table_(BmpClasses()) {}

  // The table entry (class | kContent) of the code point at `i` and the offset after it.
  uint8_t EntryAt(size_t i, size_t* next) const {
    auto byte = static_cast<unsigned char>(text_[i]);
    if (byte < 0x80) {
      *next = i + 1;
      return table_[byte];
    }
    size_t len = utf8::ValidSequenceLength(text_, i);
    if (len == 0) {  // the caller promised valid UTF-8; a stray byte is a non-word character
      *next = i + 1;
      return kOther;
    }
    *next = i + len;
    char32_t cp = utf8::Decode(text_, i, len);
    if (cp < 0x10000) return table_[cp];
    return static_cast<uint8_t>(Classify(static_cast<UChar32>(cp)) |
                                (ContentProperty(static_cast<UChar32>(cp)) ? kContent : 0));
  }

  // The class of the code point at `i` and the offset after it.
  Class ClassAt(size_t i, size_t* next) const {
    return static_cast<Class>(EntryAt(i, next) & kClassMask);
  }

  // The unit starting at `i` (< size). Extend/Format with no base before it (at the start of the
  // text or after a hard break) forms a unit of its own that is no word (ICU's "^$ExFm+").
  Unit UnitAt(size_t i) const {
    size_t next = 0;
    Class cls = ClassAt(i, &next);
    Unit unit{cls == kExtend ? kOther : cls, next};
    if (cls == kHardBreak || cls == kRefuse) return unit;
    while (unit.end < text_.size()) {
      size_t after = 0;
      Class attached = ClassAt(unit.end, &after);
      if (attached != kExtend) break;
      unit.end = after;
    }
    return unit;
  }

  std::string_view text() const { return text_; }
  const std::array<uint8_t, 0x10000>& table() const { return table_; }
  size_t size() const { return text_.size(); }

 private:
  std::string_view text_;
  const std::array<uint8_t, 0x10000>& table_;
};

// Whether text[begin, end) holds a letter, mark or number (HasContent in feature_extractor.cc).
bool HasContent(const Scanner& scanner, size_t begin, size_t end) {
  size_t i = begin;
  while (i < end) {
    size_t next = 0;
    if ((scanner.EntryAt(i, &next) & kContent) != 0) return true;
    i = next;
  }
  return false;
}

// A word being scanned: the classes of its first and last base code points (those that are no
// Extend/Format), how many bases it has, and whether it holds a letter, mark or number.
struct Word {
  Class first = kOther;
  Class last = kOther;
  size_t bases = 0;
  bool content = false;
};

// The end of the run of ASCII letters and digits from `pos` on (sixteen bytes at a time).
size_t AsciiAlnumRunEnd(const char* data, size_t pos, size_t n) {
  size_t end = pos;
#ifdef __SSE2__
  while (true) {
    if (end + 16 > n) {
      while (end < n && IsAsciiAlnum(static_cast<unsigned char>(data[end]))) ++end;
      return end;
    }
    const unsigned others = ~AlnumMask(Load16(data + end)) & 0xFFFF;
    if (others != 0) return end + static_cast<size_t>(__builtin_ctz(others));
    end += 16;
  }
#else
  while (end < n && IsAsciiAlnum(static_cast<unsigned char>(data[end]))) ++end;
  return end;
#endif
}

#ifdef __SSE2__
// Appends the words of ASCII letters and digits that start in the 64-byte window at `window_at`,
// from *pos on, and that a byte which surely ends them follows inside the window. Returns true
// with *pos at the first word start left to the code point by code point step, or false with
// *pos at the window's end when no other word starts in it.
bool TakeWindowWords(std::string_view text, const Window& window, size_t window_at, size_t* pos,
                     std::vector<std::string_view>* words) {
  size_t b = *pos - window_at;
  while (true) {
    const uint64_t rest = ~window.skip & (~uint64_t{0} << b);
    if (rest == 0) {
      *pos = window_at + 64;
      return false;
    }
    const auto start = static_cast<size_t>(__builtin_ctzll(rest));
    const uint64_t after = ~window.alnum & (~uint64_t{0} << start);
    if (((window.alnum >> start) & 1) == 0 || after == 0) {
      *pos = window_at + start;
      return true;
    }
    const auto end = static_cast<size_t>(__builtin_ctzll(after));
    if (((window.ends >> end) & 1) == 0) {
      *pos = window_at + start;
      return true;
    }
    words->push_back(text.substr(window_at + start, end - start));
    b = end;
  }
}
#endif

// Two-byte letters and digits (Latin, Greek, Cyrillic, Armenian, Hebrew, Arabic, ...) from `pos`
// on join the word, and two-byte Extend/Format attaches (WB4); returns where they stop.
size_t TakeTwoByteWordChars(const std::array<uint8_t, 0x10000>& table, const char* data, size_t n,
                            size_t pos, Word* word) {
  while (pos + 1 < n) {
    const auto lead = static_cast<unsigned char>(data[pos]);
    const auto trail = static_cast<unsigned char>(data[pos + 1]);
    if (lead < 0xC2 || lead > 0xDF || (trail & 0xC0) != 0x80) break;
    const uint8_t entry = table[((lead & 0x1Fu) << 6) | (trail & 0x3Fu)];
    const auto cls = static_cast<Class>(entry & kClassMask);
    if (cls == kALetter || cls == kHebrewLetter || cls == kNumeric) {
      word->last = cls;
      ++word->bases;
    } else if (cls != kExtend) {
      break;
    }
    word->content = word->content || (entry & kContent) != 0;
    pos += 2;
  }
  return pos;
}

enum class MidJoin { kJoined, kEnded, kRefused };

// The word meets a MidLetter, MidNum, MidNumLet or quote at *pos: it goes on across it when the
// right kind of word character follows (WB6, WB7, WB7b, WB7c, WB11, WB12; *pos moves past that
// character), takes a Hebrew letter's apostrophe and ends (WB7a), or ends before it.
MidJoin JoinAcrossMid(const Scanner& scanner, bool content_only, size_t* pos, Word* word) {
  const size_t n = scanner.size();
  const Unit mid = scanner.UnitAt(*pos);
  const Class last = word->last;
  const bool letter_mid = IsAHLetter(last) && (mid.cls == kMidLetter || mid.cls == kMidNumLet ||
                                               mid.cls == kSingleQuote);
  const bool number_mid =
      last == kNumeric && (mid.cls == kMidNum || mid.cls == kMidNumLet || mid.cls == kSingleQuote);
  const bool hebrew_quote = last == kHebrewLetter && mid.cls == kDoubleQuote;
  if ((letter_mid || number_mid || hebrew_quote) && mid.end < n) {
    Unit after = scanner.UnitAt(mid.end);
    if (after.cls == kRefuse) return MidJoin::kRefused;
    const bool joins = (letter_mid && IsAHLetter(after.cls)) ||       // WB6, WB7
                       (number_mid && after.cls == kNumeric) ||       // WB11, WB12
                       (hebrew_quote && after.cls == kHebrewLetter);  // WB7b, WB7c
    if (joins) {
      if (content_only && !word->content) word->content = HasContent(scanner, *pos, after.end);
      word->last = after.cls;
      *pos = after.end;
      word->bases += 2;
      return MidJoin::kJoined;
    }
  }
  if (last == kHebrewLetter && mid.cls == kSingleQuote) {  // WB7a; nothing joins after it
    if (content_only && !word->content) word->content = HasContent(scanner, *pos, mid.end);
    *pos = mid.end;
    ++word->bases;
  }
  return MidJoin::kEnded;
}

// Extends the word before *pos over every code point that continues it (WB4-WB13b), moving *pos
// to its end. Returns false when it meets a code point left to ICU.
bool ExtendWord(const Scanner& scanner, bool content_only, size_t* pos, Word* word) {
  const std::array<uint8_t, 0x10000>& table = scanner.table();
  const char* const data = scanner.text().data();
  const size_t n = scanner.size();
  size_t p = *pos;
  while (p < n) {
    // Fast lane: ASCII letters and digits join whatever word they follow (WB5, WB8-WB10).
    size_t run = p;
    while (run < n && IsAsciiAlnum(static_cast<unsigned char>(data[run]))) ++run;
    if (run > p) {
      word->last = IsAsciiDigit(static_cast<unsigned char>(data[run - 1])) ? kNumeric : kALetter;
      word->bases += run - p;
      word->content = true;
      p = run;
      continue;
    }
    p = TakeTwoByteWordChars(table, data, n, p, word);
    if (p >= n) break;
    // Any word character joins too (WB5, WB8-WB10, WB13a, WB13b); Extend/Format attaches (WB4).
    size_t next = 0;
    const uint8_t entry = scanner.EntryAt(p, &next);
    const Class cls = static_cast<Class>(entry & kClassMask);
    if (cls == kRefuse) return false;
    if (cls == kExtend) {
      word->content = word->content || (entry & kContent) != 0;
      p = next;
      continue;
    }
    if (IsWordClass(cls)) {
      word->content = word->content || (entry & kContent) != 0;
      word->last = cls;
      ++word->bases;
      p = next;
      continue;
    }
    if (cls != kMidLetter && cls != kMidNumLet && cls != kMidNum && cls != kSingleQuote &&
        cls != kDoubleQuote) {
      break;  // nothing else continues a word
    }
    const MidJoin join = JoinAcrossMid(scanner, content_only, &p, word);
    if (join == MidJoin::kRefused) return false;
    if (join == MidJoin::kEnded) break;
  }
  *pos = p;
  return true;
}

}  // namespace

bool SplitSpaceSeparatedWords(std::string_view text, std::vector<std::string_view>* words,
                              WordFilter filter) {
  Scanner scanner(text);
  const char* const data = text.data();
  const size_t n = text.size();
  const bool content_only = filter == WordFilter::kWithContent;
  size_t pos = 0;
#ifdef __SSE2__
  size_t window_at = n;  // the window's first byte; n: none
  Window window;
#endif
  while (pos < n) {
#ifdef __SSE2__
    // Words of ASCII letters and digits followed by a byte that surely ends them, found with bit
    // operations on a 64-byte window (kept while the position stays inside it). Anything else
    // is left to the code point by code point step below.
    if (pos - window_at >= 64 && n - pos >= 64) {
      window_at = pos;
      window = Window(data + pos);
    }
    if (pos - window_at < 64 && !TakeWindowWords(text, window, window_at, &pos, words)) continue;
#endif
      // Outside a word: ASCII spaces and punctuation are skipped at once ('_' and '@' can start
      // words). Extend/Format here attaches to a non-word character, or stands alone after a hard
      // break or at the start: either way no word.
#ifdef __SSE2__
    if (pos + 16 <= n) {
      const unsigned starters = StarterMask(Load16(data + pos));
      if (starters == 0) {
        pos += 16;
        continue;
      }
      pos += static_cast<size_t>(__builtin_ctz(starters));
    }
#endif
    auto byte = static_cast<unsigned char>(data[pos]);
    if (byte < 0x80 && !IsAsciiStarter(byte)) {
      ++pos;
      continue;
    }
    const size_t begin = pos;
    Word word;
    if (IsAsciiAlnum(byte)) {
      // A run of ASCII letters and digits (WB5, WB8-WB10); when a plain separator follows, the
      // word is complete.
      const size_t end = AsciiAlnumRunEnd(data, pos + 1, n);
      if (end == n || EndsAsciiWord(static_cast<unsigned char>(data[end]))) {
        words->push_back(text.substr(begin, end - begin));
        pos = end;
        continue;
      }
      word.first = IsAsciiDigit(byte) ? kNumeric : kALetter;
      word.last = IsAsciiDigit(static_cast<unsigned char>(data[end - 1])) ? kNumeric : kALetter;
      word.bases = end - begin;
      word.content = true;
      pos = end;
    } else {
      size_t next = 0;
      const uint8_t entry = scanner.EntryAt(pos, &next);
      word.first = static_cast<Class>(entry & kClassMask);
      if (word.first == kRefuse) return false;
      if (!IsWordClass(word.first)) {
        pos = next;
        continue;
      }
      word.last = word.first;
      word.bases = 1;
      word.content = (entry & kContent) != 0;
      pos = next;
    }
    if (!ExtendWord(scanner, content_only, &pos, &word)) return false;
    // A lone ExtendNumLet ("_") is no word for ICU (rule status 0); two or more are.
    if (!(word.bases == 1 && word.first == kExtendNumLet) && (word.content || !content_only)) {
      words->push_back(text.substr(begin, pos - begin));
    }
  }
  return true;
}

bool IsLetterMarkOrNumber(char32_t cp) {
  if (cp < 0x10000) return (BmpClasses()[cp] & kContent) != 0;
  return cp <= 0x10FFFF && ContentProperty(static_cast<UChar32>(cp));
}

}  // namespace neardup
