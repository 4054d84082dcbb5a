// WordDiff: the word-level difference of two texts, as the report shows it side by side.
//
// Texts are cut into tokens: a run of letters, digits and marks is one word; every Han, kana or
// Thai character is a token of its own (those scripts do not put spaces between words); a run of
// whitespace is one token; any other character (punctuation, symbols) is one token. The token
// sequences are compared with Myers' O(ND) difference algorithm (E. W. Myers, "An O(ND)
// Difference Algorithm and Its Variations", Algorithmica 1(2), 1986): the greedy forward search
// for the furthest-reaching D-paths, then the path traced back, which gives a shortest edit
// script (the fewest tokens deleted plus inserted). The common prefix and suffix are taken off
// first. A search that would need more than `max_edits` edits stops and the middle part is
// reported as deleted and inserted whole (`complete` = false), so the cost of one diff is
// bounded by O((N + M) * max_edits) time and O(max_edits^2) memory.
//
// The result is a sequence of spans: concatenating the kEqual and kDelete spans gives `a` back,
// the kEqual and kInsert spans give `b`, byte for byte. With `cleanup`, an unchanged stretch of
// only whitespace and punctuation between two changes is folded into them, so a rewritten
// sentence reads as one change instead of a word-by-word patchwork.
//
// Internal header of the report (src/report/); plain functions, thread-safe.
#ifndef NEARDUP_REPORT_WORD_DIFF_H_
#define NEARDUP_REPORT_WORD_DIFF_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace neardup::report {

struct DiffSpan {
  enum Kind : char { kEqual = '=', kDelete = '-', kInsert = '+' };
  Kind kind = kEqual;
  std::string text;
};

struct WordDiffOptions {
  size_t max_edits = 2000;  // tokens deleted + inserted before the search gives up
  bool cleanup = true;      // fold separator-only equal stretches between changes
};

struct WordDiffResult {
  std::vector<DiffSpan> spans;  // adjacent spans have different kinds
  bool complete = true;         // false: the search stopped at max_edits (see above)
  size_t edits = 0;             // tokens deleted + inserted (before cleanup)
};

// The tokens of `text` (views into it), in order; their concatenation is `text`. Invalid UTF-8
// bytes are tokens of one byte.
std::vector<std::string_view> DiffTokens(std::string_view text);

WordDiffResult WordDiff(std::string_view a, std::string_view b,
                        const WordDiffOptions& options = WordDiffOptions());

}  // namespace neardup::report

#endif  // NEARDUP_REPORT_WORD_DIFF_H_
