// JiebaSegmenter: loading jieba's dictionary into a trie and cutting text exactly as jieba 0.42.1's
// Tokenizer.cut (default mode, with or without HMM) does.
#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "features/jieba_internal.h"
#include "features/used_slots.h"
#include "features/word_splitter.h"

namespace neardup {
namespace jieba {

// ---- tries -----------------------------------------------------------------------------------

TrieBuilder::TrieBuilder() {
  freq_.push_back(0);  // the root (the empty string, never a key of FREQ)
  children_.reserve(1 << 20);
}

uint32_t TrieBuilder::Find(const std::u32string& word) const {
  uint32_t node = Root();
  for (char32_t cp : word) {
    node = Child(node, cp);
    if (node == kNoNode) return kNoNode;
  }
  return node == Root() ? kNoNode : node;
}

void TrieBuilder::Set(const std::u32string& word, int64_t freq) {
  uint32_t node = Root();
  for (char32_t cp : word) {
    auto [it, inserted] = children_.try_emplace(Key(node, cp), static_cast<uint32_t>(freq_.size()));
    if (inserted) freq_.push_back(0);  // a new prefix: FREQ[prefix] = 0
    node = it->second;
  }
  if (node != Root()) freq_[node] = freq;
}

std::vector<TrieBuilder::Edge> TrieBuilder::Edges() const {
  std::vector<Edge> edges;
  edges.reserve(children_.size());
  for (const auto& [key, child] : children_) {
    edges.push_back(
        {static_cast<uint32_t>(key >> 21), static_cast<char32_t>(key & 0x1FFFFF), child});
  }
  return edges;
}

namespace {

std::length_error TooManyUnits() {
  return std::length_error("the jieba dictionary needs more than " +
                           std::to_string(Trie::kMaxUnits) + " trie units");
}

}  // namespace

struct Trie::ChildLists {
  std::vector<uint32_t> first_child;  // node i's children are children[first_child[i], [i + 1])
  std::vector<std::pair<uint32_t, uint32_t>> children;  // (code, child)

  size_t ChildCount(uint32_t node) const { return first_child[node + 1] - first_child[node]; }
};

// calc(): log(FREQ.get(word) or 1) - logtotal, used only for words whose FREQ is truthy; each
// distinct frequency's weight is computed once and stored once, in *log_probs (index 0 is NaN:
// not a word). Beyond 65,534 weights the rest are kept per unit, in overflow().
class Trie::WeightIndex {
 public:
  WeightIndex(double log_total, std::vector<double>* log_probs)
      : log_total_(log_total), log_probs_(log_probs) {
    log_probs_->assign(1, NAN);
  }

  // The weight index of a word of frequency `freq` placed at `unit` (0 when freq is 0).
  uint32_t IndexOf(int64_t freq, size_t unit) {
    if (freq == 0) return 0;
    const auto it = index_of_freq_.find(freq);
    if (it != index_of_freq_.end()) return it->second;
    const double log_prob = std::log(static_cast<double>(freq)) - log_total_;
    if (log_probs_->size() < kOverflowProb) {
      log_probs_->push_back(log_prob);
      const auto index = static_cast<uint32_t>(log_probs_->size() - 1);
      index_of_freq_.emplace(freq, index);
      return index;
    }
    overflow_.emplace_back(static_cast<uint32_t>(unit), log_prob);
    return kOverflowProb;
  }

  const std::vector<std::pair<uint32_t, double>>& overflow() const { return overflow_; }

 private:
  double log_total_;
  std::vector<double>* log_probs_;
  std::unordered_map<int64_t, uint32_t> index_of_freq_;
  std::vector<std::pair<uint32_t, double>> overflow_;  // (unit, weight) beyond 65,534 weights
};

Trie::Trie(const TrieBuilder& builder, double log_total) {
  node_count_ = builder.node_count() - 1;  // without the root
  std::vector<TrieBuilder::Edge> edges = builder.Edges();
  const size_t max_code = AssignCodes(edges);
  const ChildLists lists = ChildrenByCode(builder.node_count(), edges);
  std::vector<TrieBuilder::Edge>().swap(edges);  // not needed any more: lower the load's peak

  WeightIndex weights(log_total, &log_probs_);
  size_t end_used = 0;
  const std::vector<uint32_t> node_of = PlaceNodes(builder, lists, max_code, &weights, &end_used);
  // Padding: base + code stays inside the array for every base and code.
  GrowUnitsTo(end_used + max_code + 1);
  if (units_.size() > kMaxUnits) throw TooManyUnits();
  if (!weights.overflow().empty()) {
    overflow_log_probs_.assign(units_.size(), NAN);
    for (const auto& [unit, log_prob] : weights.overflow()) overflow_log_probs_[unit] = log_prob;
  }
  freq_.assign(units_.size(), 0);
  for (size_t node = 0; node < builder.node_count(); ++node) {
    if (node_of[node] != kNoNode) freq_[node_of[node]] = builder.Freq(static_cast<uint32_t>(node));
  }
  freq_[kRoot] = 0;
}

size_t Trie::AssignCodes(const std::vector<TrieBuilder::Edge>& edges) {
  std::unordered_map<char32_t, uint32_t> edge_count;
  for (const TrieBuilder::Edge& edge : edges) ++edge_count[edge.cp];
  std::vector<std::pair<uint32_t, char32_t>> by_count;
  by_count.reserve(edge_count.size());
  for (const auto& [cp, count] : edge_count) by_count.emplace_back(count, cp);
  std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  bmp_codes_.assign(kBmp, 0);
  for (size_t i = 0; i < by_count.size(); ++i) {
    const char32_t cp = by_count[i].second;
    const auto code = static_cast<uint32_t>(i + 1);
    if (cp < kBmp) {
      bmp_codes_[cp] = code;
    } else {
      other_codes_[cp] = code;
    }
  }
  return by_count.size();
}

Trie::ChildLists Trie::ChildrenByCode(size_t builder_nodes,
                                      const std::vector<TrieBuilder::Edge>& edges) const {
  ChildLists lists;
  std::vector<uint32_t>& first_child = lists.first_child;
  first_child.assign(builder_nodes + 1, 0);
  for (const TrieBuilder::Edge& edge : edges) ++first_child[edge.parent + 1];
  for (size_t i = 0; i < builder_nodes; ++i) first_child[i + 1] += first_child[i];
  lists.children.resize(edges.size());
  {
    std::vector<uint32_t> cursor(first_child.begin(), first_child.end() - 1);
    for (const TrieBuilder::Edge& edge : edges) {
      lists.children[cursor[edge.parent]++] = {Code(edge.cp), edge.child};
    }
  }
  for (size_t i = 0; i < builder_nodes; ++i) {
    std::sort(lists.children.begin() + first_child[i], lists.children.begin() + first_child[i + 1]);
  }
  return lists;
}

void Trie::GrowUnitsTo(size_t size) {
  if (size <= units_.size()) return;
  HugePageArray<Unit> bigger(std::max(size, units_.size() + units_.size() / 2),
                             MakeUnit(0, kEmptyCheck, 0));
  for (size_t i = 0; i < units_.size(); ++i) bigger[i] = units_[i];
  units_ = std::move(bigger);
}

// Level by level (in a level, those with the most children first), each node's children go at the
// first base where all are free.
std::vector<uint32_t> Trie::PlaceNodes(const TrieBuilder& builder, const ChildLists& lists,
                                       size_t max_code, WeightIndex* weights, size_t* end_used) {
  const size_t builder_nodes = builder.node_count();
  // Built in place, with room for the fill (about 45 % of the units end up used) so that it
  // seldom grows, which would copy.
  units_.Assign(builder_nodes * 5 / 2 + max_code + 64, MakeUnit(0, kEmptyCheck, 0));
  units_[kRoot] = MakeUnit(0, kRootCheck, 0);
  UsedSlots used(units_.size());
  size_t free_head = 1;                                   // no free unit below this
  std::vector<uint32_t> node_of(builder_nodes, kNoNode);  // builder node -> unit
  node_of[builder.Root()] = kRoot;
  std::vector<uint32_t> level = {builder.Root()};
  std::vector<uint32_t> next_level;
  *end_used = 1;
  constexpr size_t kSizeClasses = 16;  // families of 1, 2, ..., 14, and 15 or more children
  std::array<size_t, kSizeClasses> last_base;
  last_base.fill(1);
  while (!level.empty()) {
    std::stable_sort(level.begin(), level.end(), [&](uint32_t a, uint32_t b) {
      return lists.ChildCount(a) > lists.ChildCount(b);
    });
    next_level.clear();
    for (const uint32_t parent : level) {
      const auto kids_begin = lists.children.begin() + lists.first_child[parent];
      const auto kids_end = lists.children.begin() + lists.first_child[parent + 1];
      if (kids_begin == kids_end) continue;
      size_t base = 0;
      if (parent != builder.Root()) {
        const size_t first_code = kids_begin->first;
        // A family rarely fits among the units that the previous families of its size left:
        // start at the base of the last one (bases need not be unique, only the kids' units).
        const size_t size_class = std::min<size_t>(kids_end - kids_begin, kSizeClasses - 1);
        const size_t start =
            std::max(free_head > first_code ? free_head - first_code : 1, last_base[size_class]);
        base = used.FirstFreeBase(
            kids_begin, kids_end, [](const auto& kid) { return kid.first; }, start);
        last_base[size_class] = base;
      }
      const uint32_t unit = node_of[parent];
      units_[unit] =
          MakeUnit(static_cast<uint32_t>(base), CheckOf(units_[unit]), ProbIndexOf(units_[unit]));
      for (auto kid = kids_begin; kid != kids_end; ++kid) {
        const size_t t = base + kid->first;
        if (t >= kMaxUnits) throw TooManyUnits();
        if (t >= units_.size()) GrowUnitsTo(t + 1);
        used.Mark(t);
        units_[t] = MakeUnit(0, unit, weights->IndexOf(builder.Freq(kid->second), t));
        node_of[kid->second] = static_cast<uint32_t>(t);
        *end_used = std::max(*end_used, t + 1);
        next_level.push_back(kid->second);
      }
      while ((used.At(free_head) & 1) != 0) ++free_head;
    }
    level.swap(next_level);
  }
  return node_of;
}

void AdviseHugePages(void* data, size_t bytes) {
#ifdef MADV_HUGEPAGE
  madvise(data, bytes, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

size_t CutScratch::Reserve(size_t size) {
  if (size <= capacity) return capacity;
  const size_t n = std::max(size, capacity * 2);
  const size_t n1 = n + 1;  // offsets and the route have one more entry than the block
  cps.resize(n);
  codes.resize(n);
  offsets.resize(n1);
  route_prob.resize(n1);
  route_end.resize(n1);
  route_node.resize(n1);
  viterbi_from.resize(n);
  states.resize(n);
  capacity = n;
  return capacity;
}

CutScratch& ThreadScratch() {
  thread_local CutScratch scratch;
  return scratch;
}

Status ReadWholeFile(const std::string& path, std::string* contents) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    if (errno == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::IoError(path + ": " + std::strerror(errno));
  }
  contents->clear();
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) contents->append(buffer, n);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return Status::IoError(path + ": read error");
  return Status::Ok();
}

namespace {

// ---- the cutting algorithms, shared by both trie forms ---------------------------------------

// Walks `trie` along the code points of the UTF-8 `word`; kNoNode when absent (or not UTF-8).
template <class TrieT>
uint32_t FindUtf8(const TrieT& trie, std::string_view word) {
  uint32_t node = trie.Root();
  size_t i = 0;
  while (i < word.size()) {
    const size_t len = utf8::ValidSequenceLength(word, i);
    if (len == 0) return kNoNode;
    node = trie.Child(node, utf8::Decode(word, i, len));
    if (node == kNoNode) return kNoNode;
    i += len;
  }
  return node == trie.Root() ? kNoNode : node;
}

// Everything a cut needs besides the trie.
struct CutContext {
  double log_total = 0;
  std::vector<uint32_t>* token_nodes = nullptr;  // if set, receives each token's node
  // Only the tokens of two or more code points of blocks (single characters and "\r\n" are left
  // out).
  bool words_only = false;
  // Only the tokens that hold a letter, mark or number (IsLetterMarkOrNumber): in a block, a Han
  // character or an ASCII letter or digit; outside blocks, a valid non-ASCII character that is one.
  bool content_only = false;
  const HmmModel* hmm = nullptr;  // null: HMM=False
  const std::unordered_set<std::string>* force_split_words = nullptr;
};

// One block (a run of re_han_default characters) being cut: code points, their byte offsets in
// the text, and the output.
template <class TrieT>
class BlockCutter {
 public:
  BlockCutter(const TrieT& trie, const CutContext& context, std::string_view text,
              CutScratch& scratch, std::vector<std::string_view>* tokens)
      : trie_(trie), context_(context), text_(text), scratch_(scratch), tokens_(tokens) {}

  // Cuts the block of the first n code points in the scratch buffers (with their offsets, plus
  // the end, and, for Trie, their codes).
  void Cut(size_t n) {
    n_ = n;
    cps_ = scratch_.cps.data();
    offsets_ = scratch_.offsets.data();
    CalcRoute();
    if (context_.hmm != nullptr) {
      CutDag();
    } else {
      CutDagNoHmm();
    }
  }

  // Cut with HMM of a block in which no word starts (no character is the first of a dictionary
  // word, as in most runs of ASCII): every route step is one character, so __cut_DAG buffers the
  // whole block, and finalseg.cut of a block without Han is its re_skip split. One character is
  // emitted as it is either way.
  void CutWithoutWords(size_t n) {
    n_ = n;
    cps_ = scratch_.cps.data();
    offsets_ = scratch_.offsets.data();
    SkipSplit(0, n);
  }

 private:
  // log(FREQ[word]) - logtotal, or NaN when FREQ[word] is 0.
  double WordLogProb(uint32_t node) const {
    if constexpr (std::is_same_v<TrieT, Trie>) {
      return trie_.WordLogProb(node);
    } else {
      const int64_t freq = trie_.Freq(node);
      return freq != 0 ? std::log(static_cast<double>(freq)) - context_.log_total : NAN;
    }
  }

  // Outputs the token of code points [begin, end), with its trie node when asked for nodes.
  [[gnu::always_inline]] void Emit(size_t begin, size_t end, uint32_t node = kUnknownNode) {
    if (context_.words_only && end - begin < 2) return;
    if (context_.content_only && !HasContent(begin, end)) return;
    tokens_->emplace_back(text_.data() + offsets_[begin], offsets_[end] - offsets_[begin]);
    if (context_.token_nodes != nullptr) context_.token_nodes->push_back(node);
  }

  // Whether cps[begin:end) holds a letter or number. A block holds Han characters of
  // [\u4E00-\u9FD5] (all letters, Lo) and the ASCII of re_han_default, of which only the letters
  // and digits count.
  bool HasContent(size_t begin, size_t end) const {
    for (size_t i = begin; i < end; ++i) {
      if (cps_[i] >= 0x80 || IsAsciiAlnum(cps_[i])) return true;
    }
    return false;
  }

  // Tokenizer.get_DAG + Tokenizer.calc: route[idx] = max over the DAG of
  // (log(FREQ[word] or 1) - logtotal + route[x + 1][0], x), ties to the larger x.
  void CalcRoute() {
    if constexpr (std::is_same_v<TrieT, Trie>) {
      CalcRouteOnTrie();
      return;
    }
    const size_t n = n_;
    auto& prob = scratch_.route_prob;
    auto& end = scratch_.route_end;
    auto& route_node = scratch_.route_node;
    prob[n] = 0;
    end[n] = 0;
    for (size_t idx = n; idx-- > 0;) {
      bool found = false;
      double best = 0;
      size_t best_x = idx;
      uint32_t best_node = kNoNode;
      size_t i = idx;
      uint32_t node = trie_.Child(trie_.Root(), cps_[idx]);
      while (node != kNoNode) {
        const double word_log_prob = WordLogProb(node);
        if (!std::isnan(word_log_prob)) {  // `if self.FREQ[frag]`
          const double p = word_log_prob + prob[i + 1];
          if (!found || p >= best) {  // equal probabilities: the larger x wins
            best = p;
            best_x = i;
            best_node = node;
            found = true;
          }
        }
        if (++i >= n) break;
        node = trie_.Child(node, cps_[i]);
      }
      if (!found) {  // DAG[idx] = [idx]; FREQ.get(char) is None or 0, so log(1) = 0
        best = (0.0 - context_.log_total) + prob[idx + 1];
        best_x = idx;
      }
      prob[idx] = best;
      end[idx] = best_x;
      route_node[idx] = best_node;
    }
  }

  // CalcRoute on the double-array trie: each node's unit is read once per walk step.
  void CalcRouteOnTrie() {
    const size_t n = n_;
    double* prob = scratch_.route_prob.data();
    size_t* end = scratch_.route_end.data();
    uint32_t* route_node = scratch_.route_node.data();
    const uint32_t* codes = scratch_.codes.data();
    const double no_word = 0.0 - context_.log_total;  // DAG[idx] = [idx]: log(1) - logtotal
    prob[n] = 0;
    end[n] = 0;
    double next_prob = 0;  // prob[idx + 1], kept in a register: the next position needs it first
    for (size_t idx = n; idx-- > 0;) {
      // The second step of a walk a few positions on misses the cache most: start loading it.
      constexpr size_t kAhead = 4;
      if (idx >= kAhead) trie_.PrefetchSecondStep(codes[idx - kAhead], codes[idx - kAhead + 1]);
      // No p is -inf (every term is finite), so -inf stands for "no word found yet".
      double best = -INFINITY;
      size_t best_x = idx;
      uint32_t best_node = kNoNode;
      uint32_t node = trie_.RootChildByCode(codes[idx]);
      if (node != kNoNode) {
        // `if self.FREQ[frag]`: a prefix that is no word weighs NaN, and NaN >= best is false.
        // The choices are selects, not branches: which word wins is hard to predict.
        Trie::Unit unit = trie_.UnitOf(node);
        const double first = trie_.WordLogProb(unit, node) + next_prob;
        const bool first_is_word = first >= best;
        best = first_is_word ? first : best;
        best_node = first_is_word ? node : best_node;
        for (size_t i = idx + 1; i < n; ++i) {
          node = trie_.ChildOfUnit(unit, node, codes[i]);
          if (node == kNoNode) break;
          unit = trie_.UnitOf(node);
          const double p = trie_.WordLogProb(unit, node) + prob[i + 1];
          const bool take = p >= best;  // equal probabilities: the larger x wins
          best = take ? p : best;
          best_x = take ? i : best_x;
          best_node = take ? node : best_node;
        }
      }
      if (best == -INFINITY) best = no_word + next_prob;
      next_prob = best;
      prob[idx] = best;
      end[idx] = best_x;
      route_node[idx] = best_node;
    }
  }

  // Whether FREQ.get(cps[begin:end]) is truthy.
  bool InDictionary(size_t begin, size_t end) const {
    uint32_t node = trie_.Root();
    for (size_t i = begin; i < end; ++i) {
      if constexpr (std::is_same_v<TrieT, Trie>) {
        node = trie_.ChildByCode(node, scratch_.codes[i]);
      } else {
        node = trie_.Child(node, cps_[i]);
      }
      if (node == kNoNode) return false;
    }
    return trie_.Freq(node) != 0;
  }

  // The buffered run of single characters [begin, end) of __cut_DAG.
  void FlushBuffer(size_t begin, size_t end) {
    if (end - begin == 1) {
      Emit(begin, end);
    } else if (!InDictionary(begin, end)) {
      FinalsegCut(begin, end);
    } else {
      for (size_t i = begin; i < end; ++i) Emit(i, i + 1);
    }
  }

  // Tokenizer.__cut_DAG.
  void CutDag() {
    const size_t n = n_;
    const auto& route_end = scratch_.route_end;
    size_t x = 0;
    size_t buf_begin = 0;
    size_t buf_end = 0;  // buf = cps[buf_begin:buf_end]
    while (x < n) {
      const size_t y = route_end[x] + 1;
      if (y - x == 1) {
        if (buf_begin == buf_end) buf_begin = x;
        buf_end = y;
      } else {
        if (buf_begin != buf_end) {
          FlushBuffer(buf_begin, buf_end);
          buf_begin = buf_end = 0;
        }
        Emit(x, y, scratch_.route_node[x]);
      }
      x = y;
    }
    if (buf_begin != buf_end) FlushBuffer(buf_begin, buf_end);
  }

  // Tokenizer.__cut_DAG_NO_HMM: single ASCII letters and digits are merged.
  void CutDagNoHmm() {
    const size_t n = n_;
    const auto& route_end = scratch_.route_end;
    size_t x = 0;
    size_t buf_begin = 0;
    size_t buf_end = 0;
    while (x < n) {
      const size_t y = route_end[x] + 1;
      if (y - x == 1 && IsAsciiAlnum(cps_[x])) {
        if (buf_begin == buf_end) buf_begin = x;
        buf_end = y;
      } else {
        if (buf_begin != buf_end) {
          Emit(buf_begin, buf_end);
          buf_begin = buf_end = 0;
        }
        Emit(x, y, scratch_.route_node[x]);
      }
      x = y;
    }
    if (buf_begin != buf_end) Emit(buf_begin, buf_end);
  }

  // finalseg.cut over cps[begin:end]: Han runs go through the Viterbi, the rest is split by
  // finalseg.re_skip = ([a-zA-Z0-9]+(?:\.\d+)?%?).
  void FinalsegCut(size_t begin, size_t end) {
    size_t i = begin;
    while (i < end) {
      size_t j = i;
      if (IsHan(cps_[i])) {
        while (j < end && IsHan(cps_[j])) ++j;
        ViterbiCut(i, j);
      } else {
        while (j < end && !IsHan(cps_[j])) ++j;
        SkipSplit(i, j);
      }
      i = j;
    }
  }

  void SkipSplit(size_t begin, size_t end) {
    size_t pending = begin;  // start of the text between matches
    size_t pos = begin;
    while (pos < end) {
      if (!IsAsciiAlnum(cps_[pos])) {
        ++pos;
        continue;
      }
      const size_t match_begin = pos;
      while (pos < end && IsAsciiAlnum(cps_[pos])) ++pos;
      if (pos + 1 < end && cps_[pos] == '.' && cps_[pos + 1] >= '0' && cps_[pos + 1] <= '9') {
        pos += 2;
        while (pos < end && cps_[pos] >= '0' && cps_[pos] <= '9') ++pos;
      }
      if (pos < end && cps_[pos] == '%') ++pos;
      if (pending < match_begin) Emit(pending, match_begin, NodeOf(pending, match_begin));
      Emit(match_begin, pos, NodeOf(match_begin, pos));
      pending = pos;
    }
    if (pending < end) Emit(pending, end, NodeOf(pending, end));
  }

  // The trie node of the word cps[begin:end) (kNoNode when absent), looked up only when nodes are
  // asked for and the word has two or more characters (kUnknownNode otherwise).
  uint32_t NodeOf(size_t begin, size_t end) const {
    if (context_.token_nodes == nullptr || end - begin < 2) return kUnknownNode;
    uint32_t node = trie_.Root();
    for (size_t i = begin; i < end && node != kNoNode; ++i) {
      if constexpr (std::is_same_v<TrieT, Trie>) {
        node = trie_.ChildByCode(node, scratch_.codes[i]);
      } else {
        node = trie_.Child(node, cps_[i]);
      }
    }
    return node;
  }

  // A word produced by finalseg.__cut, split into characters if it is a force-split word.
  void EmitHmmWord(size_t begin, size_t end) {
    const auto* force = context_.force_split_words;
    if (force != nullptr && !force->empty() && end - begin > 1) {
      const std::string_view word = text_.substr(offsets_[begin], offsets_[end] - offsets_[begin]);
      if (force->count(std::string(word)) > 0) {
        for (size_t i = begin; i < end; ++i) Emit(i, i + 1);
        return;
      }
    }
    Emit(begin, end, NodeOf(begin, end));
  }

  // finalseg.viterbi + finalseg.__cut over the Han run cps[begin:end].
  void ViterbiCut(size_t begin, size_t end) {
    const HmmModel& hmm = *context_.hmm;
    const size_t n = end - begin;
    auto& from = scratch_.viterbi_from;
    const auto& emit0 = hmm.emit[cps_[begin] - kHanFirst];
    // Only the last column of V is needed: it stays in registers, as do the transitions used.
    std::array<double, 4> v;
    for (int y = 0; y < 4; ++y) v[y] = hmm.start[y] + emit0[y];
    // PrevStatus, as state indices: B <- E,S; E <- B,M; M <- M,B; S <- S,E.
    static constexpr int kPrev[4][2] = {{kE, kS}, {kB, kM}, {kM, kB}, {kS, kE}};
    std::array<std::array<double, 2>, 4> trans;
    for (int y = 0; y < 4; ++y) {
      for (int k = 0; k < 2; ++k) trans[y][k] = hmm.trans[kPrev[y][k]][y];
    }
    for (size_t t = 1; t < n; ++t) {
      const auto& emit = hmm.emit[cps_[begin + t] - kHanFirst];
      std::array<double, 4> next;
      for (int y = 0; y < 4; ++y) {
        const double em = emit[y];
        const int y0a = kPrev[y][0];
        const int y0b = kPrev[y][1];
        const double pa = v[y0a] + trans[y][0] + em;
        const double pb = v[y0b] + trans[y][1] + em;
        // max over (prob, state) tuples: equal probabilities go to the larger state letter.
        int best = y0a;
        double best_p = pa;
        if (pb > pa || (pb == pa && y0b > y0a)) {
          best = y0b;
          best_p = pb;
        }
        next[y] = best_p;
        from[t][y] = static_cast<uint8_t>(best);
      }
      v = next;
    }
    int state = v[kS] >= v[kE] ? kS : kE;  // ties to 'S'
    auto& states = scratch_.states;
    for (size_t t = n; t-- > 0;) {
      states[t] = static_cast<uint8_t>(state);
      if (t > 0) state = from[t][state];
    }
    // finalseg.__cut
    size_t word_begin = 0;
    size_t next = 0;
    for (size_t i = 0; i < n; ++i) {
      switch (states[i]) {
        case kB:
          word_begin = i;
          break;
        case kE:
          EmitHmmWord(begin + word_begin, begin + i + 1);
          next = i + 1;
          break;
        case kS:
          EmitHmmWord(begin + i, begin + i + 1);
          next = i + 1;
          break;
        default:
          break;
      }
    }
    if (next < n) EmitHmmWord(begin + next, end);
  }

  const TrieT& trie_;
  const CutContext& context_;
  std::string_view text_;
  CutScratch& scratch_;
  size_t n_ = 0;  // the block: cps_[0, n_), offsets_[0, n_]
  const char32_t* cps_ = nullptr;
  const size_t* offsets_ = nullptr;
  std::vector<std::string_view>* tokens_;
};

// Tokenizer.cut(text, cut_all=False, HMM=context.hmm != null): splits the text into blocks of
// re_han_default characters, which are cut with the dictionary; everything else becomes one token
// per character, except "\r\n" which stays one token.
template <class TrieT>
void CutText(const TrieT& trie, const CutContext& context, std::string_view text,
             std::vector<std::string_view>* tokens) {
  CutScratch& scratch = ThreadScratch();
  BlockCutter<TrieT> cutter(trie, context, text, scratch, tokens);
  const size_t n = text.size();
  size_t i = 0;
  // The block buffers, written through pointers (they only grow, and hold `capacity` code points).
  constexpr bool kCodes = std::is_same_v<TrieT, Trie>;
  size_t capacity = 0;
  char32_t* cps = nullptr;
  size_t* offsets = nullptr;
  uint32_t* codes = nullptr;
  auto reserve = [&](size_t size) {
    capacity = scratch.Reserve(size);
    cps = scratch.cps.data();
    offsets = scratch.offsets.data();
    codes = scratch.codes.data();
  };
  reserve(256);
  while (i < n) {
    // Gather a block, noting whether a dictionary word may start in it.
    size_t count = 0;
    bool no_word_starts = true;
    while (i < n) {
      if (count == capacity) reserve(capacity * 2);
      const auto c = static_cast<unsigned char>(text[i]);
      if (c < 0x80) {
        if (!IsBlockAscii(c)) break;
        cps[count] = c;
        if constexpr (kCodes) {
          codes[count] = trie.BmpCode(c);
          no_word_starts = no_word_starts && trie.RootChildByCode(codes[count]) == kNoNode;
        } else {
          no_word_starts = false;
        }
        offsets[count++] = i;
        ++i;
      } else {
        // A Han character of the block range is 3 bytes, E4 B8 80 .. E9 BF 95 (with a lead byte
        // in E4..E9, two continuation bytes make a valid sequence: no overlong or surrogate form).
        if (c < 0xE4 || c > 0xE9 || i + 2 >= n ||
            (static_cast<unsigned char>(text[i + 1]) & 0xC0) != 0x80 ||
            (static_cast<unsigned char>(text[i + 2]) & 0xC0) != 0x80) {
          break;
        }
        const char32_t cp = utf8::Decode(text, i, 3);
        if (!IsHan(cp)) break;
        no_word_starts = false;  // Han: a word may start, or the HMM may cut
        cps[count] = cp;
        if constexpr (kCodes) codes[count] = trie.BmpCode(cp);
        offsets[count++] = i;
        i += 3;
      }
    }
    if (count != 0) {
      offsets[count] = i;
      if (no_word_starts && context.hmm != nullptr) {
        cutter.CutWithoutWords(count);
      } else {
        cutter.Cut(count);
      }
    }
    if (i >= n) break;
    // One character outside blocks.
    const auto c = static_cast<unsigned char>(text[i]);
    size_t len = 1;
    if (c == '\r' && i + 1 < n && text[i + 1] == '\n') {
      len = 2;
    } else if (c >= 0xE1 && c <= 0xEF && c != 0xED && i + 2 < n &&
               (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80 &&
               (static_cast<unsigned char>(text[i + 2]) & 0xC0) == 0x80) {
      len = 3;  // the common case (CJK punctuation): valid, as no overlong or surrogate form
    } else if (c >= 0x80) {
      len = utf8::ValidSequenceLength(text, i);
      if (len == 0) len = 1;  // not UTF-8: one byte at a time
    }
    // ASCII outside blocks is never a letter or digit (those are block characters), nor is a
    // byte that is not UTF-8.
    const bool keep = !context.content_only ||
                      (c >= 0x80 && len > 1 && IsLetterMarkOrNumber(utf8::Decode(text, i, len)));
    if (!context.words_only && keep) {
      tokens->push_back(text.substr(i, len));
      if (context.token_nodes != nullptr) context.token_nodes->push_back(kUnknownNode);
    }
    i += len;
  }
}

// ---- loading ---------------------------------------------------------------------------------

// Frequencies above this are refused, so that totals never overflow (jieba's largest is 10^6).
constexpr int64_t kMaxFrequency = 1000000000000;

// Python bytes.strip(): ASCII whitespace.
std::string_view StripAsciiWhitespace(std::string_view s) {
  while (!s.empty() && utf8::IsAsciiSpaceByte(s.front())) s.remove_prefix(1);
  while (!s.empty() && utf8::IsAsciiSpaceByte(s.back())) s.remove_suffix(1);
  return s;
}

bool DecodeUtf8(std::string_view s, std::u32string* out) {
  out->clear();
  size_t i = 0;
  while (i < s.size()) {
    const size_t len = utf8::ValidSequenceLength(s, i);
    if (len == 0) return false;
    out->push_back(utf8::Decode(s, i, len));
    i += len;
  }
  return true;
}

// Python int() of a decimal string: optional sign, digits (underscores between digits allowed).
bool ParsePythonInt(std::string_view s, int64_t* value) {
  std::string digits;
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  for (; i < s.size(); ++i) {
    if (s[i] >= '0' && s[i] <= '9') {
      digits.push_back(s[i]);
    } else if (s[i] == '_' && !digits.empty() && i + 1 < s.size() && s[i + 1] != '_') {
      continue;
    } else {
      return false;
    }
  }
  if (digits.empty()) return false;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return false;
  *value = negative ? -v : v;
  return true;
}

// Calls fn(line_number, line) for each line of `contents` split at '\n' (Python's iteration over
// a binary file: the last line may lack its '\n', no empty line after a final '\n').
template <class Fn>
Status ForEachLine(std::string_view contents, Fn fn) {
  size_t line_number = 0;
  size_t pos = 0;
  while (pos < contents.size()) {
    size_t end = contents.find('\n', pos);
    if (end == std::string_view::npos) end = contents.size();
    ++line_number;
    NEARDUP_RETURN_IF_ERROR(fn(line_number, contents.substr(pos, end - pos)));
    pos = end + 1;
  }
  return Status::Ok();
}

// Tokenizer.gen_pfdict.
Status LoadMainDictionary(const std::string& path, TrieBuilder* builder) {
  std::string contents;
  NEARDUP_RETURN_IF_ERROR(ReadWholeFile(path, &contents));
  std::u32string word;
  return ForEachLine(contents, [&](size_t line_number, std::string_view raw) -> Status {
    const std::string_view line = StripAsciiWhitespace(raw);
    auto bad = [&](const char* why) {
      return Status::Corruption(path + ":" + std::to_string(line_number) +
                                ": invalid dictionary entry (" + why +
                                "): " + utf8::ReplaceInvalid(line.substr(0, 200)));
    };
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) return bad("expected 'word freq'");
    size_t freq_end = line.find(' ', space + 1);
    if (freq_end == std::string_view::npos) freq_end = line.size();
    if (!utf8::IsValid(line)) return bad("not UTF-8");
    DecodeUtf8(line.substr(0, space), &word);
    int64_t freq = 0;
    if (!ParsePythonInt(line.substr(space + 1, freq_end - space - 1), &freq) || freq < 0 ||
        freq > kMaxFrequency) {
      return bad("frequency is not an integer in [0, 10^12]");
    }
    if (word.empty()) return bad("empty word");
    builder->Set(word, freq);
    builder->total += freq;
    return Status::Ok();
  });
}

// The mutable state of a segmenter being loaded, with jieba's add_word / suggest_freq.
class DictionaryLoader {
 public:
  TrieBuilder builder;
  std::unordered_set<std::string> force_split_words;

  // Tokenizer.suggest_freq(word, tune=False) for a str segment.
  int64_t SuggestFreq(std::string_view word) const {
    const auto total = static_cast<double>(builder.total);
    double freq = 1;
    std::vector<std::string_view> segments;
    CutContext context;
    context.log_total = std::log(total);
    CutText(builder, context, word, &segments);
    for (std::string_view seg : segments) {
      const uint32_t node = FindUtf8(builder, seg);
      const int64_t seg_freq = node == kNoNode ? 1 : builder.Freq(node);
      freq *= static_cast<double>(seg_freq) / total;
    }
    const uint32_t node = FindUtf8(builder, word);
    const int64_t word_freq = node == kNoNode ? 1 : builder.Freq(node);
    const auto suggested = static_cast<int64_t>(freq * total) + 1;
    return std::max(suggested, word_freq);
  }

  // Tokenizer.add_word(word, freq).
  Status AddWord(std::string_view word, std::optional<int64_t> frequency, std::string_view where) {
    std::u32string cps;
    if (!DecodeUtf8(word, &cps))
      return Status::InvalidUtf8(std::string(where) + ": word is not UTF-8");
    if (cps.empty()) return Status::InvalidArgument(std::string(where) + ": empty word");
    const int64_t freq = frequency.has_value() ? *frequency : SuggestFreq(word);
    if (freq < 0 || freq > kMaxFrequency) {
      return Status::InvalidArgument(std::string(where) + ": frequency " + std::to_string(freq) +
                                     " of word '" + std::string(word) + "' is not in [0, 10^12]");
    }
    builder.Set(cps, freq);
    builder.total += freq;
    if (freq == 0) force_split_words.insert(std::string(word));
    return Status::Ok();
  }

  // Tokenizer.load_userdict: each stripped, non-empty line matches
  // ^(.+?)( [0-9]+)?( [a-z]+)?$ (the shortest word for which the rest matches).
  Status LoadUserDictionary(const std::string& path) {
    std::string contents;
    NEARDUP_RETURN_IF_ERROR(ReadWholeFile(path, &contents));
    return ForEachLine(contents, [&](size_t line_number, std::string_view raw) -> Status {
      const std::string where = path + ":" + std::to_string(line_number);
      std::string_view line = StripAsciiWhitespace(raw);
      if (!utf8::IsValid(line)) {
        return Status::InvalidUtf8(where + ": dictionary file must be UTF-8");
      }
      if (line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);  // lstrip('\ufeff')
      while (line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
      if (line.empty()) return Status::Ok();
      // Try word ends in increasing order (at code point boundaries).
      size_t word_end = utf8::ValidSequenceLength(line, 0);
      while (true) {
        std::optional<int64_t> freq;
        if (MatchFreqAndTag(line.substr(word_end), &freq)) {
          return AddWord(line.substr(0, word_end), freq, where);
        }
        if (word_end >= line.size()) break;
        word_end += utf8::ValidSequenceLength(line, word_end);
      }
      return Status::Internal(where + ": user dictionary line did not match");
    });
  }

 private:
  // Whether `rest` matches ( [0-9]+)?( [a-z]+)?$; the frequency group's value goes to *freq.
  static bool MatchFreqAndTag(std::string_view rest, std::optional<int64_t>* freq) {
    size_t pos = 0;
    auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
    auto is_lower = [](char c) { return c >= 'a' && c <= 'z'; };
    freq->reset();
    if (pos + 1 < rest.size() && rest[pos] == ' ' && is_digit(rest[pos + 1])) {
      size_t end = pos + 1;
      while (end < rest.size() && is_digit(rest[end])) ++end;
      int64_t value = 0;
      if (!ParsePythonInt(rest.substr(pos + 1, end - pos - 1), &value)) {
        value = INT64_MAX;  // absurdly long digit strings saturate
      }
      *freq = value;
      pos = end;
    }
    if (pos + 1 < rest.size() && rest[pos] == ' ' && is_lower(rest[pos + 1])) {
      size_t end = pos + 1;
      while (end < rest.size() && is_lower(rest[end])) ++end;
      pos = end;
    }
    return pos == rest.size();
  }
};

std::string JoinPath(const std::string& dir, const char* name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace
}  // namespace jieba

// ---- public API ------------------------------------------------------------------------------

std::string DefaultJiebaDirectory() { return NEARDUP_DEFAULT_JIEBA_DIR; }

JiebaSegmenter::JiebaSegmenter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JiebaSegmenter::~JiebaSegmenter() = default;

Result<std::shared_ptr<const JiebaSegmenter>> JiebaSegmenter::Create(const JiebaOptions& options) {
  try {
    return LoadOrThrow(options);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory while loading the jieba dictionary");
  } catch (const std::length_error& error) {
    return Status::ResourceExhausted(error.what());
  }
}

JiebaOptions JiebaOptionsForDirectory(const std::string& dir) {
  const std::string root = dir.empty() ? DefaultJiebaDirectory() : dir;
  JiebaOptions options;
  options.dict_path = jieba::JoinPath(root, "dict.txt");
  options.hmm_dir = jieba::JoinPath(root, "finalseg");
  options.idf_path = jieba::JoinPath(root, "analyse/idf.txt");
  return options;
}

Result<std::shared_ptr<const JiebaSegmenter>> JiebaSegmenter::LoadOrThrow(
    const JiebaOptions& options) {
  const JiebaOptions defaults = JiebaOptionsForDirectory("");
  const std::string dict_path = options.dict_path.empty() ? defaults.dict_path : options.dict_path;
  const std::string hmm_dir = options.hmm_dir.empty() ? defaults.hmm_dir : options.hmm_dir;

  jieba::DictionaryLoader loader;
  NEARDUP_RETURN_IF_ERROR(jieba::LoadMainDictionary(dict_path, &loader.builder));
  if (loader.builder.total <= 0) {
    return Status::Corruption(dict_path + ": the dictionary has no word with a frequency");
  }
  Result<jieba::HmmModel> hmm = jieba::LoadHmmModel(hmm_dir);
  if (!hmm.ok()) return hmm.status();
  for (const std::string& path : options.user_dict_paths) {
    NEARDUP_RETURN_IF_ERROR(loader.LoadUserDictionary(path));
  }
  for (size_t i = 0; i < options.user_words.size(); ++i) {
    const JiebaUserWord& user_word = options.user_words[i];
    NEARDUP_RETURN_IF_ERROR(loader.AddWord(user_word.word, user_word.frequency,
                                           "user_words[" + std::to_string(i) + "]"));
  }
  if (loader.builder.total <= 0) {
    return Status::InvalidArgument("the dictionary frequencies sum to " +
                                   std::to_string(loader.builder.total));
  }

  auto impl =
      std::make_unique<Impl>(loader.builder, std::log(static_cast<double>(loader.builder.total)));
  impl->hmm = std::move(hmm).value();
  impl->force_split_words = std::move(loader.force_split_words);
  return std::shared_ptr<const JiebaSegmenter>(new JiebaSegmenter(std::move(impl)));
}

Result<std::shared_ptr<const JiebaSegmenter>> JiebaSegmenter::Default() {
  static const Result<std::shared_ptr<const JiebaSegmenter>> segmenter = Create(JiebaOptions{});
  return segmenter;
}

void JiebaSegmenter::Impl::Cut(std::string_view text, std::vector<std::string_view>* tokens,
                               bool use_hmm) const {
  jieba::CutContext context;
  context.log_total = log_total;
  context.hmm = use_hmm ? &hmm : nullptr;
  context.force_split_words = &force_split_words;
  jieba::CutText(trie, context, text, tokens);
}

void JiebaSegmenter::Impl::CutContentWords(std::string_view text,
                                           std::vector<std::string_view>* tokens,
                                           bool use_hmm) const {
  jieba::CutContext context;
  context.content_only = true;
  context.log_total = log_total;
  context.hmm = use_hmm ? &hmm : nullptr;
  context.force_split_words = &force_split_words;
  jieba::CutText(trie, context, text, tokens);
}

void JiebaSegmenter::Impl::CutWordsWithNodes(std::string_view text,
                                             std::vector<std::string_view>* tokens,
                                             std::vector<uint32_t>* token_nodes) const {
  jieba::CutContext context;
  context.words_only = true;
  context.log_total = log_total;
  context.hmm = &hmm;
  context.force_split_words = &force_split_words;
  context.token_nodes = token_nodes;
  jieba::CutText(trie, context, text, tokens);
}

uint32_t JiebaSegmenter::Impl::FindNode(std::string_view word) const {
  return jieba::FindUtf8(trie, word);
}

void JiebaSegmenter::Cut(std::string_view text, std::vector<std::string_view>* tokens,
                         bool hmm) const {
  impl_->Cut(text, tokens, hmm);
}

std::vector<std::string> JiebaSegmenter::LCut(std::string_view text, bool hmm) const {
  std::vector<std::string_view> views;
  Cut(text, &views, hmm);
  return std::vector<std::string>(views.begin(), views.end());
}

std::optional<int64_t> JiebaSegmenter::Frequency(std::string_view word) const {
  const uint32_t node = jieba::FindUtf8(impl_->trie, word);
  if (node == jieba::kNoNode) return std::nullopt;
  return impl_->trie.Freq(node);
}

int64_t JiebaSegmenter::total_frequency() const { return impl_->total; }

size_t JiebaSegmenter::dictionary_size() const { return impl_->trie.node_count(); }

}  // namespace neardup
