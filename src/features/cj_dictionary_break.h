// Japanese word segmentation that gives the same word segments as ICU 72's root-locale word
// BreakIterator (its rule-based pass plus CjkBreakEngine's dictionary pass over kana/kanji runs)
// without running ICU: ICU's own cjdict costs on a double-array trie of ours, and the
// space-separated parts through SplitSpaceSeparatedWords.
//
// Internal header. The dictionary is read once from ICU's data; everything is safe from any thread.
#ifndef NEARDUP_FEATURES_CJ_DICTIONARY_BREAK_H_
#define NEARDUP_FEATURES_CJ_DICTIONARY_BREAK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace neardup {

// ICU's Chinese/Japanese dictionary (brkitr/cjdict: word -> cost, the "snlp" CjkBreakEngine
// minimises) as a double-array trie over code points renumbered by frequency.
class CjDictionary {
 public:
  // The dictionary of the ICU data this process links, loaded on first use; nullptr when ICU's
  // data has no readable cjdict (the caller then keeps ICU's own break iterator).
  static const CjDictionary* Default();

  // Builds the trie from (word as code points, cost) pairs; costs must be in [0, 0x7FFFFFFF].
  explicit CjDictionary(const std::vector<std::pair<std::u32string, int32_t>>& words);

  // The code of `cp` (0: in no word).
  uint32_t Code(char32_t cp) const {
    if (cp < 0x10000) return bmp_codes_[cp];
    auto it = other_codes_.find(cp);
    return it == other_codes_.end() ? 0 : it->second;
  }
  static constexpr uint32_t kRoot = 0;
  static constexpr uint32_t kNoNode = 0xFFFFFFFFu;
  // The child of `node` by code `code` (not 0), or kNoNode.
  uint32_t Child(uint32_t node, uint32_t code) const {
    const uint32_t t = units_[node].base + code;  // units_ is padded: t is always in range
    return units_[t].check == node ? t : kNoNode;
  }
  // The cost of the word ending at `node`, or -1 when no word ends there.
  int32_t Cost(uint32_t node) const { return units_[node].cost; }
  size_t word_count() const { return word_count_; }
  size_t slot_count() const { return units_.size(); }

 private:
  // Words as one array of code points (word w is chars[starts[w], starts[w + 1])) and their costs.
  struct WordList {
    std::vector<char32_t> chars;
    std::vector<uint32_t> starts{0};
    std::vector<int32_t> costs;
    void Add(const char32_t* word, size_t size, int32_t cost) {
      chars.insert(chars.end(), word, word + size);
      starts.push_back(static_cast<uint32_t>(chars.size()));
      costs.push_back(cost);
    }
  };
  CjDictionary() = default;
  void Build(WordList list);
  // Build's steps. Numbers the code points of `chars` by how often they occur, commonest first
  // (children of a node then sit close together), into bmp_codes_ / other_codes_; returns the
  // largest code.
  uint32_t AssignCodes(const std::vector<char32_t>& chars);
  // Places the words of `list` (as codes, in the sorted `order`) in units_ (double-array layout).
  void PlaceWords(const WordList& list, const std::vector<uint32_t>& order, uint32_t max_code);

  struct Unit {
    uint32_t base = 0;
    uint32_t check = kNoNode;
    int32_t cost = -1;
  };
  std::vector<Unit> units_;
  std::vector<uint32_t> bmp_codes_;
  std::unordered_map<char32_t, uint32_t> other_codes_;
  size_t word_count_ = 0;
};

// Appends to *words the segments of `text` that ICU 72's root word BreakIterator marks as words
// (rule status >= UBRK_WORD_NONE_LIMIT), as views into `text`, and returns true. Returns false,
// with *words unspecified, when the text holds something this path leaves to ICU (code points
// outside the kana/kanji dictionary runs that SplitSpaceSeparatedWords refuses, kana/kanji that
// are not NFKC-normalised or that ICU's dictionary engine does not cover, Extend/Format/ZWJ/
// ExtendNumLet next to kana or kanji) or when ICU's dictionary could not be read.
bool SplitJapaneseWords(std::string_view text, std::vector<std::string_view>* words);

// The same with an explicit dictionary (tests).
bool SplitJapaneseWords(const CjDictionary& dictionary, std::string_view text,
                        std::vector<std::string_view>* words);

}  // namespace neardup

#endif  // NEARDUP_FEATURES_CJ_DICTIONARY_BREAK_H_
