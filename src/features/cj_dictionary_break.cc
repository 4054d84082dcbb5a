// Japanese word segmentation equal to ICU 72's word BreakIterator without ICU; see
// cj_dictionary_break.h.
//
// What ICU does with kana/kanji (word.txt, rbbi_cache.cpp, dictbe.cpp of ICU 72):
// - The rules chain every run of $KanaKanji = [\p{Han} \p{Hiragana} \p{Word_Break=Katakana}]
//   code points into one segment of rule status 400 (a word), except that a run of one code point
//   is a word only if it is Hiragana, Katakana or Ideographic (U+3005 alone is not). Nothing else
//   joins such a run except Extend/Format/ZWJ after it (WB4) and ExtendNumLet on either side of
//   Word_Break=Katakana (WB13a/b): texts with those are left to ICU (so are texts with
//   Extend/Format/ZWJ just before a run).
// - That segment holds dictionary characters, so CjkBreakEngine::divideUpDictionaryRange splits
//   it: over the run it finds the segmentation of least total cost, where a dictionary word costs
//   its cjdict value, a code point that starts no one-character word costs 255 on its own, and a
//   run of n < 20 katakana starting after a non-katakana code point is one more candidate of cost
//   984/408/240/204/252/300/372/480 for n = 1..8, 8192 beyond. Costs add in uint32_t arithmetic
//   with wrap-around, ties keep the earlier candidate, and dictionary words are matched up to 20
//   UTF-16 units. Every piece keeps the run's rule status 400.
// The engine only takes code points of [[:Han:][:Hiragana:][:Katakana:]\u30FC\uFF70\uFF9E\uFF9F]
// and NFKC-normalises its range first: code points of $KanaKanji outside that set, or not
// NFKC-normalised (half-width katakana, compatibility ideographs), are left to ICU.
#include "features/cj_dictionary_break.h"

#include <unicode/uchar.h>
#include <unicode/ucharstrie.h>
#include <unicode/udata.h>
#include <unicode/unorm2.h>
#include <unicode/uscript.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <string>

#include "common/utf8.h"
#include "features/used_slots.h"
#include "features/word_splitter.h"

namespace neardup {
namespace {

// How a code point takes part in Japanese segmentation: a set of these flags (0: handled by
// SplitSpaceSeparatedWords, which may still refuse it).
enum JaFlags : uint8_t {
  kRun = 1,             // part of a dictionary run
  kEngineKatakana = 2,  // CjkBreakEngine's isKatakana (the katakana-run candidate)
  kWbKatakana = 4,      // Word_Break=Katakana: joins ExtendNumLet on either side (WB13a/b)
  kMuteAlone = 8,       // a run of this code point alone is no word (e.g. U+3005, U+303B)
  kAttaches = 16,       // Extend, Format, ZWJ: refused next to a run (WB4)
  kNumLet = 32,         // ExtendNumLet: refused next to Word_Break=Katakana
  kLeave = 64,          // $KanaKanji or engine code point this path does not reproduce
};

// CjkBreakEngine's isKatakana.
bool IsEngineKatakana(UChar32 c) {
  return (c >= 0x30A1 && c <= 0x30FE && c != 0x30FB) || (c >= 0xFF66 && c <= 0xFF9F);
}

uint8_t Classify(UChar32 c) {
  UErrorCode error = U_ZERO_ERROR;
  const UScriptCode script = uscript_getScript(c, &error);
  const int word_break = u_getIntPropertyValue(c, UCHAR_WORD_BREAK);
  const bool kana_kanji =
      script == USCRIPT_HAN || script == USCRIPT_HIRAGANA || word_break == U_WB_KATAKANA;
  const bool engine_set = script == USCRIPT_HAN || script == USCRIPT_HIRAGANA ||
                          script == USCRIPT_KATAKANA || c == 0x30FC || c == 0xFF70 || c == 0xFF9E ||
                          c == 0xFF9F;
  if (kana_kanji || engine_set) {
    const bool normalized = u_getIntPropertyValue(c, UCHAR_NFKC_QUICK_CHECK) == UNORM_YES &&
                            u_getCombiningClass(c) == 0;
    if (!kana_kanji || !engine_set || !normalized || U_FAILURE(error)) return kLeave;
    uint8_t flags = kRun;
    if (IsEngineKatakana(c)) flags |= kEngineKatakana;
    if (word_break == U_WB_KATAKANA) flags |= kWbKatakana;
    // A run of one code point is a word only by $KatakanaEx, $HiraganaEx or $IdeographicEx.
    const bool word_alone = script == USCRIPT_HIRAGANA || word_break == U_WB_KATAKANA ||
                            u_hasBinaryProperty(c, UCHAR_IDEOGRAPHIC);
    if (!word_alone) flags |= kMuteAlone;
    return flags;
  }
  if (word_break == U_WB_EXTEND || word_break == U_WB_FORMAT || word_break == U_WB_ZWJ) {
    return kAttaches;
  }
  if (word_break == U_WB_EXTENDNUMLET) return kNumLet;
  return 0;
}

const std::array<uint8_t, 0x10000>& BmpClasses() {
  static const auto* table = [] {
    auto* t = new std::array<uint8_t, 0x10000>;
    for (UChar32 c = 0; c < 0x10000; ++c) {
      (*t)[static_cast<size_t>(c)] = (c >= 0xD800 && c <= 0xDFFF) ? 0 : Classify(c);
    }
    return t;
  }();
  return *table;
}

uint8_t FlagsOf(char32_t cp, const std::array<uint8_t, 0x10000>& table) {
  return cp < 0x10000 ? table[cp] : Classify(static_cast<UChar32>(cp));
}

// CjkBreakEngine's constants.
constexpr uint32_t kNoPath = 0xFFFFFFFFu;  // kuint32max: not reached
constexpr uint32_t kUnknownCost = 255;     // maxSnlp
constexpr size_t kMaxWordUnits = 20;       // maxWordSize, in UTF-16 units
constexpr size_t kMaxKatakanaGroup = 20;   // kMaxKatakanaGroupLength
uint32_t KatakanaCost(size_t length) {
  static constexpr uint32_t kCost[] = {8192, 984, 408, 240, 204, 252, 300, 372, 480};
  return length > 8 ? 8192 : kCost[length];
}

// Per-thread buffers for one dictionary run, reused across calls.
struct RunScratch {
  std::vector<uint32_t> codes;    // dictionary code of each code point
  std::vector<uint8_t> units;     // UTF-16 length of each code point
  std::vector<uint8_t> katakana;  // IsEngineKatakana of each code point
  std::vector<size_t> offsets;    // byte offset of each code point, plus the end
  std::vector<uint32_t> best;     // bestSnlp
  std::vector<int32_t> prev;      // prev
  std::vector<uint32_t> breaks;   // code point indexes of the boundaries, last first
  bool mute_alone = false;        // a run of one code point that is no word
  void Clear() {
    codes.clear();
    units.clear();
    katakana.clear();
    offsets.clear();
  }
  void ReleaseIfHuge() {
    if (offsets.capacity() > (size_t{1} << 20)) *this = RunScratch();
  }
};

[[gnu::noinline]] RunScratch& ThreadRunScratch() {
  thread_local RunScratch scratch;
  return scratch;
}

// divideUpDictionaryRange over the run whose code points are in *s; appends the pieces.
void DivideRun(const CjDictionary& dictionary, std::string_view text, RunScratch* s,
               std::vector<std::string_view>* words) {
  const size_t n = s->codes.size();
  if (n == 1 && s->mute_alone) return;  // ICU's rule 999: status 0
  s->best.assign(n + 1, kNoPath);
  s->prev.assign(n + 1, -1);
  uint32_t* best = s->best.data();
  int32_t* prev = s->prev.data();
  best[0] = 0;
  auto relax = [&](size_t from, size_t to, uint32_t cost) {
    const uint32_t snlp = best[from] + cost;  // wraps like ICU's
    if (snlp < best[to]) {
      best[to] = snlp;
      prev[to] = static_cast<int32_t>(from);
    }
  };
  bool prev_katakana = false;
  for (size_t i = 0; i < n; ++i) {
    if (best[i] == kNoPath) continue;  // (is_prev_katakana is not updated either, as in ICU)
    bool one_char_word = false;
    uint32_t node = CjDictionary::kRoot;
    size_t units = 0;
    for (size_t k = i; k < n; ++k) {
      const uint32_t code = s->codes[k];
      if (code == 0) break;
      node = dictionary.Child(node, code);
      if (node == CjDictionary::kNoNode) break;
      units += s->units[k];
      const int32_t cost = dictionary.Cost(node);
      if (cost >= 0) {
        one_char_word = one_char_word || k == i;
        relax(i, k + 1, static_cast<uint32_t>(cost));
      }
      if (units >= kMaxWordUnits) break;
    }
    if (!one_char_word) relax(i, i + 1, kUnknownCost);
    const bool is_katakana = s->katakana[i] != 0;
    if (!prev_katakana && is_katakana) {
      size_t length = 1;
      for (size_t j = i + 1; j < n && length < kMaxKatakanaGroup && s->katakana[j]; ++j) ++length;
      if (length < kMaxKatakanaGroup) relax(i, i + length, KatakanaCost(length));
    }
    prev_katakana = is_katakana;
  }
  s->breaks.clear();
  if (best[n] == kNoPath) {
    s->breaks.push_back(static_cast<uint32_t>(n));
  } else {
    for (int32_t i = static_cast<int32_t>(n); i > 0; i = prev[i]) {
      s->breaks.push_back(static_cast<uint32_t>(i));
    }
  }
  size_t begin = s->offsets[0];
  for (size_t b = s->breaks.size(); b-- > 0;) {
    const size_t end = s->offsets[s->breaks[b]];
    words->push_back(text.substr(begin, end - begin));
    begin = end;
  }
}

}  // namespace

CjDictionary::CjDictionary(const std::vector<std::pair<std::u32string, int32_t>>& words) {
  WordList list;
  for (const auto& [word, cost] : words) list.Add(word.data(), word.size(), cost);
  Build(std::move(list));
}

namespace {

// The words of `chars` (word w is chars[starts[w], starts[w + 1])) in lexicographic order.
std::vector<uint32_t> SortedWords(const std::vector<char32_t>& chars,
                                  const std::vector<uint32_t>& starts) {
  std::vector<uint32_t> order(starts.size() - 1);
  for (size_t w = 0; w < order.size(); ++w) order[w] = static_cast<uint32_t>(w);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return std::lexicographical_compare(chars.begin() + starts[a], chars.begin() + starts[a + 1],
                                        chars.begin() + starts[b], chars.begin() + starts[b + 1]);
  });
  return order;
}

// A trie node being placed: its slot and the range [lo, hi) of sorted words below it (the word
// ending at the node, if any, first), `depth` codes long.
struct PendingNode {
  uint32_t node;
  uint32_t lo, hi, depth;
  uint32_t children = 0;
};

// The children of `p` among the words of `chars` / `starts` sorted by `order`: their codes into
// *codes and the first word of each into *firsts (and p->hi after the last); sets p->children.
// Returns the word ending at p (duplicates, none in ICU's data, keep the first), or -1. (Inlined:
// it runs twice for every node.)
[[gnu::always_inline]] inline int64_t ChildrenOf(const std::vector<char32_t>& chars,
                                                 const std::vector<uint32_t>& starts,
                                                 const std::vector<uint32_t>& order, PendingNode* p,
                                                 std::vector<uint32_t>* codes,
                                                 std::vector<uint32_t>* firsts) {
  auto key_size = [&](size_t w) { return starts[w + 1] - starts[w]; };
  codes->clear();
  firsts->clear();
  int64_t ending = -1;
  uint32_t lo = p->lo;
  if (lo < p->hi && key_size(order[lo]) == p->depth) {
    ending = order[lo];
    ++lo;
    while (lo < p->hi && key_size(order[lo]) == p->depth) ++lo;
  }
  for (uint32_t w = lo; w < p->hi; ++w) {
    const uint32_t code = chars[starts[order[w]] + p->depth];
    if (codes->empty() || codes->back() != code) {
      codes->push_back(code);
      firsts->push_back(w);
    }
  }
  firsts->push_back(p->hi);
  p->children = static_cast<uint32_t>(codes->size());
  return ending;
}

}  // namespace

void CjDictionary::Build(WordList list) {
  const uint32_t max_code = AssignCodes(list.chars);
  // The words as code sequences (in place of the code points), sorted: the words below a trie
  // node are a contiguous range.
  for (char32_t& cp : list.chars) cp = Code(cp);
  const std::vector<uint32_t> order = SortedWords(list.chars, list.starts);
  PlaceWords(list, order, max_code);
}

uint32_t CjDictionary::AssignCodes(const std::vector<char32_t>& chars) {
  std::unordered_map<char32_t, size_t> counts;
  for (char32_t cp : chars) ++counts[cp];
  std::vector<std::pair<size_t, char32_t>> by_count;
  by_count.reserve(counts.size());
  for (const auto& [cp, count] : counts) by_count.emplace_back(count, cp);
  std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  bmp_codes_.assign(0x10000, 0);
  for (size_t i = 0; i < by_count.size(); ++i) {
    const uint32_t code = static_cast<uint32_t>(i + 1);
    if (by_count[i].second < 0x10000) {
      bmp_codes_[by_count[i].second] = code;
    } else {
      other_codes_[by_count[i].second] = code;
    }
  }
  return static_cast<uint32_t>(by_count.size());
}

// Double-array placement as in the jieba trie (jieba_segmenter.cc): level by level, in a level
// the nodes with the most children first, each node's children at the first base where all are
// free, searched from the base of the last node with as many children.
void CjDictionary::PlaceWords(const WordList& list, const std::vector<uint32_t>& order,
                              uint32_t max_code) {
  const size_t word_total = list.costs.size();
  units_.assign(word_total * 3 + max_code + 64, Unit{});
  UsedSlots used(units_.size());
  std::vector<PendingNode> level, next_level;
  level.push_back({kRoot, 0, static_cast<uint32_t>(word_total), 0});
  std::vector<uint32_t> child_codes;
  std::vector<uint32_t> child_starts;
  size_t free_head = 1;  // no free slot below this
  size_t end_used = 1;   // one past the last used slot
  constexpr size_t kSizeClasses = 16;
  std::array<size_t, kSizeClasses> last_base;
  last_base.fill(1);
  while (!level.empty()) {
    for (PendingNode& p : level) {
      const int64_t ending =
          ChildrenOf(list.chars, list.starts, order, &p, &child_codes, &child_starts);
      if (ending >= 0) {
        units_[p.node].cost = list.costs[static_cast<size_t>(ending)];
        ++word_count_;
      }
    }
    std::stable_sort(level.begin(), level.end(), [](const PendingNode& a, const PendingNode& b) {
      return a.children > b.children;
    });
    next_level.clear();
    for (PendingNode& p : level) {
      if (p.children == 0) continue;  // a leaf: base 0
      ChildrenOf(list.chars, list.starts, order, &p, &child_codes, &child_starts);
      const size_t size_class = std::min<size_t>(child_codes.size(), kSizeClasses - 1);
      const size_t start = std::max(free_head > child_codes[0] ? free_head - child_codes[0] : 1,
                                    last_base[size_class]);
      const size_t base = used.FirstFreeBase(
          child_codes.begin(), child_codes.end(), [](uint32_t code) { return code; }, start);
      last_base[size_class] = base;
      units_[p.node].base = static_cast<uint32_t>(base);
      for (size_t c = 0; c < child_codes.size(); ++c) {
        const size_t t = base + child_codes[c];
        if (t >= units_.size()) units_.resize(std::max(t + 1, units_.size() + units_.size() / 2));
        used.Mark(t);
        units_[t].check = p.node;
        end_used = std::max(end_used, t + 1);
        next_level.push_back(
            {static_cast<uint32_t>(t), child_starts[c], child_starts[c + 1], p.depth + 1});
      }
      while ((used.At(free_head) & 1) != 0) ++free_head;
    }
    level.swap(next_level);
  }
  units_.resize(end_used + max_code + 1);  // base + code stays in range for every node
  units_.shrink_to_fit();
}

const CjDictionary* CjDictionary::Default() {
  static const CjDictionary* dictionary = []() -> const CjDictionary* {
    // ICU 72's brkitr/dictionaries resource maps Hani, Hira and Kana to cjdict.dict: a
    // DictionaryData header (int32 indexes; [0] = offset of the trie, [4] = trie type) and a
    // UCharsTrie whose values are the costs.
    UErrorCode error = U_ZERO_ERROR;
    UDataMemory* data =
        udata_open(U_ICUDATA_NAME U_TREE_SEPARATOR_STRING "brkitr", "dict", "cjdict", &error);
    if (U_FAILURE(error) || data == nullptr) return nullptr;
    const auto* indexes = static_cast<const int32_t*>(udata_getMemory(data));
    constexpr int32_t kTrieTypeMask = 7, kTrieTypeUChars = 1, kTrieHasValues = 8;
    if (indexes == nullptr || (indexes[4] & kTrieTypeMask) != kTrieTypeUChars ||
        (indexes[4] & kTrieHasValues) == 0 || indexes[0] < 32) {
      udata_close(data);
      return nullptr;
    }
    const auto* trie =
        reinterpret_cast<const char16_t*>(reinterpret_cast<const uint8_t*>(indexes) + indexes[0]);
    WordList list;
    icu::UCharsTrie::Iterator it(trie, 0, error);
    std::u32string cps;
    while (U_SUCCESS(error) && it.next(error)) {
      const icu::UnicodeString& word = it.getString();
      cps.clear();
      for (int32_t i = 0; i < word.length(); i = word.moveIndex32(i, 1)) {
        cps.push_back(static_cast<char32_t>(word.char32At(i)));
      }
      const int32_t cost = it.getValue();
      if (!cps.empty() && cost >= 0) list.Add(cps.data(), cps.size(), cost);
    }
    udata_close(data);
    if (U_FAILURE(error) || list.costs.empty()) return nullptr;
    auto* dictionary = new CjDictionary();
    dictionary->Build(std::move(list));
    return dictionary;
  }();
  return dictionary;
}

bool SplitJapaneseWords(std::string_view text, std::vector<std::string_view>* words) {
  const CjDictionary* dictionary = CjDictionary::Default();
  return dictionary != nullptr && SplitJapaneseWords(*dictionary, text, words);
}

bool SplitJapaneseWords(const CjDictionary& dictionary, std::string_view text,
                        std::vector<std::string_view>* words) {
  // Run indexes are int32_t, as ICU's text positions are: longer texts stay with ICU.
  if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) return false;
  const auto& table = BmpClasses();
  RunScratch& scratch = ThreadRunScratch();
  const size_t n = text.size();
  size_t piece = 0;  // start of the text not yet segmented
  size_t i = 0;
  uint8_t before = 0;  // flags of the previous code point
  while (i < n) {
    auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {  // '_' is the one ASCII ExtendNumLet; no ASCII is Extend/Format/ZWJ
      if (byte == '_' && (before & kWbKatakana) != 0) return false;
      ++i;
      while (i + 8 <= n && utf8::AsciiWord(text.data() + i)) i += 8;
      while (i < n && static_cast<unsigned char>(text[i]) < 0x80) ++i;
      before = text[i - 1] == '_' ? kNumLet : 0;
      continue;
    }
    size_t len = utf8::ValidSequenceLength(text, i);
    if (len == 0) {  // ICU reads U+FFFD here: Word_Break Other
      before = 0;
      ++i;
      continue;
    }
    const uint8_t flags = FlagsOf(utf8::Decode(text, i, len), table);
    if ((flags & kLeave) != 0) return false;
    if ((flags & kAttaches) != 0 && (before & kRun) != 0) return false;
    if ((flags & kNumLet) != 0 && (before & kWbKatakana) != 0) return false;
    if ((flags & kRun) == 0) {
      before = flags;
      i += len;
      continue;
    }
    // A dictionary run starts at i.
    if ((before & kAttaches) != 0) return false;
    if ((flags & kWbKatakana) != 0 && (before & kNumLet) != 0) return false;
    if (i > piece && !SplitSpaceSeparatedWords(text.substr(piece, i - piece), words)) {
      return false;
    }
    scratch.Clear();
    scratch.mute_alone = (flags & kMuteAlone) != 0;
    uint8_t f = flags;
    while (true) {
      const char32_t cp = utf8::Decode(text, i, len);
      scratch.codes.push_back(dictionary.Code(cp));
      scratch.units.push_back(cp < 0x10000 ? 1 : 2);
      scratch.katakana.push_back((f & kEngineKatakana) != 0);
      scratch.offsets.push_back(i);
      before = f;
      i += len;
      if (i >= n || static_cast<unsigned char>(text[i]) < 0x80) break;
      len = utf8::ValidSequenceLength(text, i);
      if (len == 0) break;
      f = FlagsOf(utf8::Decode(text, i, len), table);
      if ((f & kRun) == 0) break;
    }
    scratch.offsets.push_back(i);
    DivideRun(dictionary, text, &scratch, words);
    scratch.ReleaseIfHuge();
    piece = i;
  }
  return piece == n || SplitSpaceSeparatedWords(text.substr(piece), words);
}

}  // namespace neardup
