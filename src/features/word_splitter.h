// A hand-written word splitter for scripts that separate words with spaces and punctuation
// (Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari, ...), giving the same word segments as
// ICU's root-locale word BreakIterator (UAX #29 as ICU 72's word.txt tailors it) without ICU.
//
// Internal header. Stateless after a one-time table build; safe from any thread.
#ifndef NEARDUP_FEATURES_WORD_SPLITTER_H_
#define NEARDUP_FEATURES_WORD_SPLITTER_H_

#include <string_view>
#include <vector>

namespace neardup {

// Appends to *words the segments of `text` (valid UTF-8) that ICU's word break iterator marks as
// words (rule status >= UBRK_WORD_NONE_LIMIT: letters, numbers), as views into `text`, and returns
// true. Returns false, with *words unspecified, when the text holds a code point this splitter
// leaves to ICU: dictionary scripts (Han, kana, Hangul, Thai, Lao, Khmer, Myanmar, ...), ZWJ
// sequences and regional indicators. The caller then segments the text with ICU.
//
// With WordFilter::kWithContent only the words holding a letter, mark or number
// (IsLetterMarkOrNumber) are appended: the words a feature is made of ("@" or "__" are not).
enum class WordFilter { kAll, kWithContent };
bool SplitSpaceSeparatedWords(std::string_view text, std::vector<std::string_view>* words,
                              WordFilter filter = WordFilter::kAll);

// Whether `cp` is a letter, mark or number (general category L*, M*, N*): what makes a token a
// word feature. A table lookup below U+10000.
bool IsLetterMarkOrNumber(char32_t cp);

}  // namespace neardup

#endif  // NEARDUP_FEATURES_WORD_SPLITTER_H_
