// Myers' O(ND) word diff of two texts (see word_diff.h).
#include "report/word_diff.h"

#include <unicode/uchar.h>
#include <unicode/uscript.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <cstdint>
#include <unordered_map>

namespace neardup::report {
namespace {

enum class CharClass { kWord, kSingle, kSpace, kOther };

CharClass Classify(UChar32 c) {
  if (c < 0x80) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      return CharClass::kSpace;
    }
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
      return CharClass::kWord;
    }
    return CharClass::kOther;
  }
  if (c < 0) return CharClass::kOther;  // an invalid byte
  if (u_isUWhiteSpace(c)) return CharClass::kSpace;
  UErrorCode error = U_ZERO_ERROR;
  switch (uscript_getScript(c, &error)) {
    case USCRIPT_HAN:
    case USCRIPT_HIRAGANA:
    case USCRIPT_KATAKANA:
    case USCRIPT_THAI:
    case USCRIPT_LAO:
    case USCRIPT_KHMER:
    case USCRIPT_MYANMAR:
      return CharClass::kSingle;
    default:
      break;
  }
  const int8_t category = u_charType(c);
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || u_isdigit(c) || category == U_NON_SPACING_MARK ||
      category == U_COMBINING_SPACING_MARK || category == U_ENCLOSING_MARK) {
    return CharClass::kWord;
  }
  return CharClass::kOther;
}

// True for a token that holds no letter or digit (whitespace, punctuation, symbols).
bool IsSeparator(std::string_view token) {
  int32_t i = 0;
  const int32_t length = static_cast<int32_t>(token.size());
  const auto* bytes = reinterpret_cast<const uint8_t*>(token.data());
  while (i < length) {
    UChar32 c;
    U8_NEXT(bytes, i, length, c);
    CharClass kind = Classify(c);
    if (kind == CharClass::kWord || kind == CharClass::kSingle) return false;
  }
  return true;
}

// Appends `text` to the spans as `kind`, merging with the last span of the same kind.
void Append(std::vector<DiffSpan>* spans, DiffSpan::Kind kind, std::string_view text) {
  if (text.empty()) return;
  if (!spans->empty() && spans->back().kind == kind) {
    spans->back().text.append(text);
  } else {
    spans->push_back({kind, std::string(text)});
  }
}

// One edit step of the traced-back path, in forward order.
struct Step {
  DiffSpan::Kind kind;
  size_t index;  // token index into a (kEqual, kDelete) or b (kInsert)
};

// Shortest edit script of a[0..n) -> b[0..m) (token ids) by Myers' greedy algorithm; false when
// it needs more than max_edits edits.
bool Myers(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, size_t max_edits,
           std::vector<Step>* steps, size_t* edits) {
  const int64_t n = static_cast<int64_t>(a.size());
  const int64_t m = static_cast<int64_t>(b.size());
  const int64_t max_d = std::min<int64_t>(n + m, static_cast<int64_t>(max_edits));
  const int64_t offset = max_d + 1;
  std::vector<int32_t> v(static_cast<size_t>(2 * max_d + 3), 0);
  // trace[d] holds v[-d..d] as it was before round d (what the backtrack of round d reads).
  std::vector<int32_t> trace;
  std::vector<size_t> trace_start;
  int64_t found_d = -1;
  for (int64_t d = 0; d <= max_d && found_d < 0; ++d) {
    trace_start.push_back(trace.size());
    trace.insert(trace.end(), v.begin() + (offset - d), v.begin() + (offset + d + 1));
    for (int64_t k = -d; k <= d; k += 2) {
      int64_t x;
      if (k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1])) {
        x = v[offset + k + 1];  // down: an insertion
      } else {
        x = v[offset + k - 1] + 1;  // right: a deletion
      }
      int64_t y = x - k;
      while (x < n && y < m && a[x] == b[y]) {
        ++x;
        ++y;
      }
      v[offset + k] = static_cast<int32_t>(x);
      if (x >= n && y >= m) {
        found_d = d;
        break;
      }
    }
  }
  if (found_d < 0) return false;
  *edits = static_cast<size_t>(found_d);
  // Back from (n, m): each round d contributes its diagonal snake and one edit.
  std::vector<Step> reversed;
  int64_t x = n, y = m;
  for (int64_t d = found_d; d >= 0; --d) {
    const int32_t* saved = trace.data() + trace_start[d];  // saved[j] = v[j - d]
    auto at = [&](int64_t k) { return saved[k + d]; };
    const int64_t k = x - y;
    int64_t previous_k;
    if (d == 0) {
      previous_k = 0;
    } else if (k == -d || (k != d && at(k - 1) < at(k + 1))) {
      previous_k = k + 1;
    } else {
      previous_k = k - 1;
    }
    const int64_t previous_x = d == 0 ? 0 : at(previous_k);
    const int64_t previous_y = previous_x - previous_k;
    while (x > previous_x && y > previous_y) {
      reversed.push_back({DiffSpan::kEqual, static_cast<size_t>(x - 1)});
      --x;
      --y;
    }
    if (d > 0) {
      if (x == previous_x) {
        reversed.push_back({DiffSpan::kInsert, static_cast<size_t>(y - 1)});
      } else {
        reversed.push_back({DiffSpan::kDelete, static_cast<size_t>(x - 1)});
      }
      x = previous_x;
      y = previous_y;
    }
  }
  steps->assign(reversed.rbegin(), reversed.rend());
  return true;
}

// Folds equal spans made only of separators that sit between two changes into those changes,
// then puts each change's deletions before its insertions and merges neighbours.
std::vector<DiffSpan> Cleanup(const std::vector<DiffSpan>& spans) {
  std::vector<DiffSpan> out;
  std::string deleted, inserted;
  auto flush_change = [&] {
    Append(&out, DiffSpan::kDelete, deleted);
    Append(&out, DiffSpan::kInsert, inserted);
    deleted.clear();
    inserted.clear();
  };
  for (size_t i = 0; i < spans.size(); ++i) {
    const DiffSpan& span = spans[i];
    if (span.kind == DiffSpan::kDelete) {
      deleted += span.text;
    } else if (span.kind == DiffSpan::kInsert) {
      inserted += span.text;
    } else {
      const bool between_changes =
          (!deleted.empty() || !inserted.empty()) && i + 1 < spans.size() && IsSeparator(span.text);
      if (between_changes) {
        deleted += span.text;
        inserted += span.text;
      } else {
        flush_change();
        Append(&out, DiffSpan::kEqual, span.text);
      }
    }
  }
  flush_change();
  return out;
}

}  // namespace

std::vector<std::string_view> DiffTokens(std::string_view text) {
  std::vector<std::string_view> tokens;
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t length = static_cast<int32_t>(std::min<size_t>(text.size(), INT32_MAX));
  int32_t i = 0;
  int32_t start = 0;
  CharClass current = CharClass::kOther;
  bool open = false;  // a word or whitespace run is being extended
  while (i < length) {
    const int32_t at = i;
    UChar32 c;
    U8_NEXT(bytes, i, length, c);
    const CharClass kind = Classify(c);
    const bool joins = open && kind == current;
    if (!joins) {
      if (at > start) tokens.push_back(text.substr(start, at - start));
      start = at;
    }
    current = kind;
    open = kind == CharClass::kWord || kind == CharClass::kSpace;
  }
  if (length > start) tokens.push_back(text.substr(start, length - start));
  return tokens;
}

WordDiffResult WordDiff(std::string_view a, std::string_view b, const WordDiffOptions& options) {
  WordDiffResult result;
  const std::vector<std::string_view> ta = DiffTokens(a);
  const std::vector<std::string_view> tb = DiffTokens(b);
  size_t prefix = 0;
  while (prefix < ta.size() && prefix < tb.size() && ta[prefix] == tb[prefix]) ++prefix;
  size_t suffix = 0;
  while (suffix < ta.size() - prefix && suffix < tb.size() - prefix &&
         ta[ta.size() - 1 - suffix] == tb[tb.size() - 1 - suffix]) {
    ++suffix;
  }
  std::vector<DiffSpan> spans;
  for (size_t i = 0; i < prefix; ++i) Append(&spans, DiffSpan::kEqual, ta[i]);
  // The middle tokens as small integers (equal text, equal id).
  std::unordered_map<std::string_view, uint32_t> ids;
  auto intern = [&ids](std::string_view token) {
    return ids.try_emplace(token, static_cast<uint32_t>(ids.size())).first->second;
  };
  std::vector<uint32_t> ma, mb;
  for (size_t i = prefix; i < ta.size() - suffix; ++i) ma.push_back(intern(ta[i]));
  for (size_t i = prefix; i < tb.size() - suffix; ++i) mb.push_back(intern(tb[i]));
  std::vector<Step> steps;
  if (Myers(ma, mb, options.max_edits, &steps, &result.edits)) {
    for (const Step& step : steps) {
      Append(&spans, step.kind,
             step.kind == DiffSpan::kInsert ? tb[prefix + step.index] : ta[prefix + step.index]);
    }
  } else {
    result.complete = false;
    result.edits = ma.size() + mb.size();
    for (size_t i = prefix; i < ta.size() - suffix; ++i) Append(&spans, DiffSpan::kDelete, ta[i]);
    for (size_t i = prefix; i < tb.size() - suffix; ++i) Append(&spans, DiffSpan::kInsert, tb[i]);
  }
  for (size_t i = ta.size() - suffix; i < ta.size(); ++i) Append(&spans, DiffSpan::kEqual, ta[i]);
  result.spans = options.cleanup ? Cleanup(spans) : std::move(spans);
  return result;
}

}  // namespace neardup::report
