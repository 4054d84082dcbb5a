// Internals of the jieba-exact segmenter: the prefix dictionary trie (a mutable form used while
// loading and a compact immutable form used to cut), the BMES HMM, the Python literal parser for
// finalseg/prob_*.py, and the segmentation algorithms shared by both trie forms.
//
// Internal header. Everything here mirrors jieba 0.42.1 (jieba/__init__.py, finalseg/__init__.py):
// comments name the Python function each piece reproduces.
#ifndef NEARDUP_FEATURES_JIEBA_INTERNAL_H_
#define NEARDUP_FEATURES_JIEBA_INTERNAL_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/utf8.h"
#include "neardup/jieba.h"
#include "neardup/status.h"

namespace neardup::jieba {

// jieba.analyse's KeywordExtractor.STOP_WORDS: the one list of stop words (keyword extraction
// and FeatureOptions::drop_stop_words).
inline constexpr std::string_view kStopWords[] = {
    "the",  "of",   "is", "and",  "to",   "in",  "that", "we",   "for",   "an",  "are",
    "by",   "be",   "as", "on",   "with", "can", "if",   "from", "which", "you", "it",
    "this", "then", "at", "have", "all",  "not", "one",  "has",  "or"};

// The Han range of jieba's regular expressions: [\u4E00-\u9FD5].
inline constexpr char32_t kHanFirst = 0x4E00;
inline constexpr char32_t kHanLast = 0x9FD5;
inline constexpr size_t kHanCount = kHanLast - kHanFirst + 1;

inline bool IsHan(char32_t cp) { return cp >= kHanFirst && cp <= kHanLast; }

// ASCII characters of re_han_default: [a-zA-Z0-9+#&\._%\-].
inline bool IsBlockAscii(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '#' || c == '&' || c == '.' || c == '_' || c == '%' || c == '-';
}
inline bool IsAsciiAlnum(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

inline constexpr uint32_t kNoNode = 0xFFFFFFFFu;
// A token's node was not looked up (Cut with nodes reports it for single characters, HMM words and
// text outside blocks).
inline constexpr uint32_t kUnknownNode = 0xFFFFFFFDu;

// The dictionary while it is being loaded: jieba's FREQ dict as a trie whose nodes are exactly the
// keys of FREQ (every word and, with frequency 0, every prefix of a word).
class TrieBuilder {
 public:
  TrieBuilder();
  uint32_t Root() const { return 0; }
  uint32_t Child(uint32_t node, char32_t cp) const {
    auto it = children_.find(Key(node, cp));
    return it == children_.end() ? kNoNode : it->second;
  }
  int64_t Freq(uint32_t node) const { return freq_[node]; }
  // The node of `word` (code points), or kNoNode.
  uint32_t Find(const std::u32string& word) const;
  // FREQ[word] = freq, and every missing prefix gets FREQ[prefix] = 0 (gen_pfdict / add_word).
  void Set(const std::u32string& word, int64_t freq);

  int64_t total = 0;  // jieba's `total`

  size_t node_count() const { return freq_.size(); }
  bool HasChildren(uint32_t) const { return true; }  // unknown here: always look
  // Every edge (parent, code point, child).
  struct Edge {
    uint32_t parent;
    char32_t cp;
    uint32_t child;
  };
  std::vector<Edge> Edges() const;

 private:
  static uint64_t Key(uint32_t node, char32_t cp) { return (uint64_t{node} << 21) | cp; }
  std::unordered_map<uint64_t, uint32_t> children_;
  std::vector<int64_t> freq_;
};

// madvise(MADV_HUGEPAGE), ignoring failures (the memory works either way).
void AdviseHugePages(void* data, size_t bytes);

// A fixed-size array of trivially copyable T on 2 MB-aligned memory that asks the kernel for
// transparent huge pages: big random-access tables then cost far fewer TLB misses.
template <class T>
class HugePageArray {
 public:
  HugePageArray() = default;
  explicit HugePageArray(size_t size, const T& value = T()) { Assign(size, value); }
  void Assign(size_t size, const T& value) {
    constexpr size_t kHugePage = size_t{2} << 20;
    const size_t bytes = (size * sizeof(T) + kHugePage - 1) / kHugePage * kHugePage;
    data_.reset(static_cast<T*>(std::aligned_alloc(kHugePage, bytes > 0 ? bytes : kHugePage)));
    if (data_ == nullptr) throw std::bad_alloc();
    AdviseHugePages(data_.get(), bytes);
    size_ = size;
    for (size_t i = 0; i < size; ++i) data_[i] = value;
  }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T[], Free> data_;
  size_t size_ = 0;
};
// The immutable dictionary used to cut: a double-array trie. Code points are renumbered from 1 by
// how many dictionary edges carry them (the commonest get the smallest codes, so the children of a
// node sit close together; 0 = in no word). Node t is the child of node s by code c when
// t == base(s) + c and check(t) == s. A unit is 8 bytes: base (24 bits), check (24 bits) and the
// index of the node's calc() weight in a small table of the distinct weights (16 bits), so
// following an edge reads one unit and eight units share a cache line. The root is node 0 with
// base 0; a node without children has base 0 too (its "children" would be the root's, whose check
// is 0, never its own).
class Trie {
 public:
  // Units are numbered below this (base and check are 24 bits; the last two values are reserved).
  static constexpr size_t kMaxUnits = (size_t{1} << 24) - 2;

  // Throws std::length_error if the dictionary needs more than kMaxUnits units.
  Trie(const TrieBuilder& builder, double log_total);
  uint32_t Root() const { return kRoot; }
  // The code of `cp` (0 when no dictionary word contains it).
  uint32_t Code(char32_t cp) const {
    if (cp < kBmp) return bmp_codes_[cp];
    const auto it = other_codes_.find(cp);
    return it == other_codes_.end() ? 0 : it->second;
  }
  // Code(cp) for cp < 0x10000.
  uint32_t BmpCode(char32_t cp) const { return bmp_codes_[cp]; }
  // Child(node, cp) for code = Code(cp); code 0 gives kNoNode.
  uint32_t ChildByCode(uint32_t node, uint32_t code) const {
    const uint32_t t = BaseOf(units_[node]) + code;  // units_ is padded: t is always in range
    return CheckOf(units_[t]) == node && code != 0 ? t : kNoNode;
  }
  // ChildByCode(Root(), code): the root's base is 0.
  uint32_t RootChildByCode(uint32_t code) const {
    return CheckOf(units_[code]) == kRoot && code != 0 ? code : kNoNode;
  }
  uint32_t Child(uint32_t node, char32_t cp) const { return ChildByCode(node, Code(cp)); }
  // Starts loading the unit ChildByCode(ChildByCode(root, first), second) would read.
  void PrefetchSecondStep(uint32_t first, uint32_t second) const {
    __builtin_prefetch(&units_[BaseOf(units_[first]) + second]);  // root's child of code c is c
  }
  // calc()'s log(FREQ[word]) - log(total) when FREQ[word] is not 0, else NaN.
  double WordLogProb(uint32_t node) const { return WordLogProb(units_[node], node); }
  bool HasChildren(uint32_t node) const { return BaseOf(units_[node]) != 0 || node == kRoot; }

  // The same, for a walk that reads each node's unit once.
  using Unit = uint64_t;  // base | check << 24 | prob index << 48
  Unit UnitOf(uint32_t node) const { return units_[node]; }
  // WordLogProb(node) (NaN when the node is no word); `unit` is the node's.
  double WordLogProb(Unit unit, uint32_t node) const {
    const uint32_t index = ProbIndexOf(unit);
    return index != kOverflowProb ? log_probs_[index] : overflow_log_probs_[node];
  }
  // ChildByCode(node, code) for code = Code(cp) != 0; `unit` is the node's (not the root's).
  uint32_t ChildOfUnit(Unit unit, uint32_t node, uint32_t code) const {
    const uint32_t base = BaseOf(unit);
    if (base == 0) return kNoNode;  // no children (only the root has base 0 and children)
    const uint32_t t = base + code;
    return CheckOf(units_[t]) == node && code != 0 ? t : kNoNode;
  }
  int64_t Freq(uint32_t node) const { return freq_[node]; }

  size_t node_count() const { return node_count_; }
  size_t slot_count() const { return units_.size(); }  // node ids are below this

 private:
  static constexpr uint32_t kRoot = 0;
  static constexpr char32_t kBmp = 0x10000;
  static constexpr uint32_t kEmptyCheck = 0xFFFFFF;  // a free unit
  static constexpr uint32_t kRootCheck = 0xFFFFFE;   // the root's unit: used, no parent
  static constexpr uint32_t kOverflowProb = 0xFFFF;  // the weight is in overflow_log_probs_
  static uint32_t BaseOf(Unit u) { return static_cast<uint32_t>(u & 0xFFFFFF); }
  static uint32_t CheckOf(Unit u) { return static_cast<uint32_t>((u >> 24) & 0xFFFFFF); }
  static uint32_t ProbIndexOf(Unit u) { return static_cast<uint32_t>(u >> 48); }
  static Unit MakeUnit(uint32_t base, uint32_t check, uint32_t prob_index) {
    return Unit{base} | (Unit{check} << 24) | (Unit{prob_index} << 48);
  }

  // The construction's steps (jieba_segmenter.cc).
  struct ChildLists;  // every builder node's children as (code, child), sorted by code
  class WeightIndex;  // each distinct frequency's weight, computed and stored once
  // Numbers the code points of `edges` by descending number of edges (ties by code point), from
  // 1, into bmp_codes_ / other_codes_; returns the largest code.
  size_t AssignCodes(const std::vector<TrieBuilder::Edge>& edges);
  ChildLists ChildrenByCode(size_t builder_nodes,
                            const std::vector<TrieBuilder::Edge>& edges) const;
  // Places the nodes in units_ (double-array layout); returns the unit of every builder node
  // (kNoNode for none) and sets *end_used to one past the last used unit.
  std::vector<uint32_t> PlaceNodes(const TrieBuilder& builder, const ChildLists& lists,
                                   size_t max_code, WeightIndex* weights, size_t* end_used);
  // Grows units_ (free units) to at least `size` units.
  void GrowUnitsTo(size_t size);

  HugePageArray<Unit> units_;
  // The distinct weights; index 0 is NaN (not a word). Should a dictionary have more than 65,534
  // distinct frequencies, the rest go to overflow_log_probs_ (per unit, empty otherwise).
  std::vector<double> log_probs_;
  std::vector<double> overflow_log_probs_;
  std::vector<int64_t> freq_;        // per unit
  std::vector<uint32_t> bmp_codes_;  // code point < 0x10000 -> code
  std::unordered_map<char32_t, uint32_t> other_codes_;
  size_t node_count_ = 0;
};

// The BMES model of finalseg. States are indexed in the alphabetical order of their letters
// (B=0, E=1, M=2, S=3) so that Python's tuple-max tie rule (the larger letter wins) is the larger
// index.
inline constexpr double kMinFloat = -3.14e100;  // finalseg.MIN_FLOAT
enum HmmState { kB = 0, kE = 1, kM = 2, kS = 3 };

struct HmmModel {
  std::array<double, 4> start{};
  std::array<std::array<double, 4>, 4> trans{};  // trans[from][to]; kMinFloat where absent
  // emit[cp - kHanFirst][state]; kMinFloat where the character is absent for that state. Only the
  // Han range is kept: finalseg runs the Viterbi on [\u4E00-\u9FD5]+ runs only.
  std::vector<std::array<double, 4>> emit;
};

// Parses finalseg/prob_start.py, prob_trans.py and prob_emit.py of `dir`.
Result<HmmModel> LoadHmmModel(const std::string& dir);

// A parsed Python literal (the subset used by jieba's data files: dicts, str, int/float).
struct PyValue {
  enum Kind { kNumber, kString, kDict } kind = kNumber;
  double number = 0;
  std::string text;                                   // UTF-8, for kString
  std::vector<std::pair<std::string, PyValue>> dict;  // for kDict (string keys, in order)
};
// Parses the literal assigned to `name` ("P=...") in the Python source `source`; `where` names
// the file in error messages.
Result<PyValue> ParsePythonAssignment(std::string_view source, std::string_view name,
                                      std::string_view where);

// Per-thread scratch buffers reused across calls. Every buffer holds at least `capacity` entries
// (one more for those indexed up to the block's end), so a block of that many code points is cut
// without any size check.
struct CutScratch {
  // Grows the buffers to hold a block of `size` code points; returns the new capacity.
  size_t Reserve(size_t size);
  size_t capacity = 0;
  std::vector<char32_t> cps;         // code points of the current block
  std::vector<uint32_t> codes;       // Trie::Code of each code point
  std::vector<size_t> offsets;       // byte offset of each code point, plus the end
  std::vector<double> route_prob;    // route[i][0]
  std::vector<size_t> route_end;     // route[i][1]
  std::vector<uint32_t> route_node;  // trie node of the word route[i] chooses, or kNoNode
  std::vector<std::array<uint8_t, 4>> viterbi_from;
  std::vector<uint8_t> states;
};
CutScratch& ThreadScratch();

// Reads a whole file into *contents.
Status ReadWholeFile(const std::string& path, std::string* contents);

}  // namespace neardup::jieba

namespace neardup {

class JiebaSegmenter::Impl {
 public:
  jieba::Trie trie;
  int64_t total = 0;
  double log_total = 0;
  jieba::HmmModel hmm;
  std::unordered_set<std::string> force_split_words;  // finalseg.Force_Split_Words

  Impl(const jieba::TrieBuilder& builder, double log_total_in)
      : trie(builder, log_total_in), total(builder.total), log_total(log_total_in) {}

  void Cut(std::string_view text, std::vector<std::string_view>* tokens, bool hmm) const;
  // The tokens of Cut that hold a letter, mark or number (FeatureExtractor's content filter), in
  // order; the others are never stored.
  void CutContentWords(std::string_view text, std::vector<std::string_view>* tokens,
                       bool hmm) const;
  // The tokens of Cut with HMM that have two or more code points (the only ones that can be
  // keywords: single characters and "\r\n" never have len(wc.strip()) >= 2), in order, with each
  // token's trie node: the node id, kNoNode, or kUnknownNode (not looked up; FindNode gives it).
  void CutWordsWithNodes(std::string_view text, std::vector<std::string_view>* tokens,
                         std::vector<uint32_t>* token_nodes) const;
  // The trie node of `word`, or kNoNode.
  uint32_t FindNode(std::string_view word) const;
};

}  // namespace neardup

#endif  // NEARDUP_FEATURES_JIEBA_INTERNAL_H_
