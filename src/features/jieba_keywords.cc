// KeywordExtractor: jieba.analyse.extract_tags (TF-IDF, jieba/analyse/tfidf.py) on top of
// JiebaSegmenter, with the IDF table in an open-addressing hash map.
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "features/idf_table.h"
#include "features/jieba_internal.h"

namespace neardup {
namespace {

inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 32;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  return x;
}

// A fast hash for the short words of keyword extraction (XXH3 for longer ones).
inline uint64_t HashBytes(std::string_view bytes) {
  const size_t n = bytes.size();
  const char* p = bytes.data();
  if (n > 16) return XXH3_64bits(p, n);
  uint64_t head = 0;
  uint64_t tail = 0;
  if (n >= 8) {
    std::memcpy(&head, p, 8);
    std::memcpy(&tail, p + n - 8, 8);
  } else if (n >= 4) {
    uint32_t a;
    uint32_t b;
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + n - 4, 4);
    head = a;
    tail = b;
  } else if (n > 0) {
    head = static_cast<unsigned char>(p[0]) |
           (static_cast<uint64_t>(static_cast<unsigned char>(p[n / 2])) << 8) |
           (static_cast<uint64_t>(static_cast<unsigned char>(p[n - 1])) << 16);
  }
  return Mix64((head * 0x9E3779B97F4A7C15ull) ^ Mix64(tail + n));
}

size_t TableSizeFor(size_t count) {
  size_t size = 16;
  while (size < count * 2) size *= 2;
  return size;
}

struct TermScratch {
  std::vector<std::string_view> tokens;
  std::vector<uint32_t> nodes;  // trie node of each token
  // Open-addressing table from term to its index in the terms vector; a slot is live when its
  // stamp equals the current call's stamp. Each call uses a prefix sized to its token count.
  // A term that is a dictionary trie node is keyed by its node id, any other by its bytes.
  struct Slot {
    uint32_t stamp = 0;
    uint32_t term = 0;  // index in terms; kNodeKey flags a node-id key
    uint64_t key = 0;   // node id, or hash of the bytes
  };
  static constexpr uint32_t kNodeKey = 0x80000000u;
  std::vector<Slot> term_keys;  // the slot contents of every term, to re-insert on growth
  std::vector<double> idfs;     // per term, for ExtractTags
  std::vector<Slot> slots;
  uint32_t stamp = 0;
};

// Not inlined (nor ThreadExtractScratch): a thread_local seen through an inlined accessor makes the
// compiler recompute its address with __tls_get_addr (the library is a shared object) in loops.
[[gnu::noinline]] TermScratch& ThreadTermScratch() {
  thread_local TermScratch scratch;
  return scratch;
}

// wc.lower() in STOP_WORDS. Terms are runs of [\u4E00-\u9FD5a-zA-Z0-9+#&._%-], whose Unicode
// lower case is the ASCII lower case.
// A word of at most 7 bytes as one integer: its bytes, and its length in the top byte.
constexpr uint64_t PackShortWord(std::string_view word) {
  uint64_t packed = uint64_t{word.size()} << 56;
  for (size_t i = 0; i < word.size(); ++i) {
    packed |= uint64_t{static_cast<unsigned char>(word[i])} << (8 * i);
  }
  return packed;
}

constexpr auto kPackedStopWords = [] {
  std::array<uint64_t, std::size(jieba::kStopWords)> packed{};
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = PackShortWord(jieba::kStopWords[i]);
  return packed;
}();
static_assert(std::all_of(std::begin(jieba::kStopWords), std::end(jieba::kStopWords),
                          [](std::string_view w) {
                            return w.size() <= 5 && std::all_of(w.begin(), w.end(), [](char c) {
                                     return c >= 'a' && c <= 'z';
                                   });
                          }));

bool IsStopWord(std::string_view term) {
  if (term.size() > 5) return false;
  char lower[5];
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    lower[i] = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower[i] < 'a' || lower[i] > 'z') return false;  // stop words are ASCII letters only
  }
  const uint64_t packed = PackShortWord(std::string_view(lower, term.size()));
  bool found = false;
  for (const uint64_t stop : kPackedStopWords) found |= stop == packed;
  return found;
}

// len(wc.strip()) >= 2 for a token of Cut: block words hold no whitespace; other tokens are one
// character or "\r\n".
bool LongEnough(std::string_view token) {
  if (token.size() < 2) return false;
  const auto lead = static_cast<unsigned char>(token[0]);
  // Cut's tokens are single bytes where the text is not UTF-8, so the lead byte gives the length.
  const size_t first = lead < 0xC0 ? 1 : (lead < 0xE0 ? 2 : (lead < 0xF0 ? 3 : 4));
  if (first == token.size()) return false;  // one character
  // A word of a block (ASCII block characters and Han) holds no whitespace.
  if ((lead < 0x80 && jieba::IsBlockAscii(lead)) || (lead >= 0xE4 && lead <= 0xE9)) return true;
  size_t code_points = 0;
  for (char c : utf8::StripPythonSpace(token)) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80 && ++code_points >= 2) return true;
  }
  return false;
}

}  // namespace

class KeywordExtractor::Impl {
 public:
  std::shared_ptr<const JiebaSegmenter> segmenter;  // cuts the texts
  static constexpr uint32_t kUnused = 0xFFFFFFFFu;
  struct Entry {
    uint64_t hash = 0;
    uint32_t key_offset = 0;
    uint32_t key_length = kUnused;
    double idf = 0;
    bool used() const { return key_length != kUnused; }
  };
  std::string keys;  // all words, concatenated
  jieba::HugePageArray<Entry> table;
  // IDF per trie node of the segmenter's dictionary: an index into idf_values (0 = not in the IDF
  // table) when idf_values is not empty, else the value in node_idf (NaN = not in the table).
  std::vector<double> idf_values;
  jieba::HugePageArray<uint16_t> node_idf_index;
  jieba::HugePageArray<double> node_idf;
  // Bit filter over the hashes of the words left in `table` (high bits of the hash).
  std::vector<uint64_t> filter;
  int filter_shift = 64;
  size_t count = 0;  // words of the IDF file (count survives KeepOnlyNonNodeWords)
  double median = 0;

  const Entry* Find(std::string_view word, uint64_t hash) const {
    const size_t mask = table.size() - 1;
    for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
      const Entry& e = table[slot];
      if (!e.used()) return nullptr;
      if (e.hash == hash && e.key_length == word.size() &&
          std::memcmp(keys.data() + e.key_offset, word.data(), word.size()) == 0) {
        return &e;
      }
    }
  }

  // idf_freq[word] = idf (a repeated word takes the last value).
  void Insert(std::string_view word, double idf) {
    const uint64_t hash = HashBytes(word);
    const size_t mask = table.size() - 1;
    for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
      Entry& e = table[slot];
      if (!e.used()) {
        e.hash = hash;
        e.key_offset = static_cast<uint32_t>(keys.size());
        e.key_length = static_cast<uint32_t>(word.size());
        e.idf = idf;
        keys.append(word);
        ++count;
        return;
      }
      if (e.hash == hash && e.key_length == word.size() &&
          std::memcmp(keys.data() + e.key_offset, word.data(), word.size()) == 0) {
        e.idf = idf;
        return;
      }
    }
  }

  // The IDF of a word that is not a node of the segmenter's trie.
  double IdfOfNonNode(std::string_view word) const {
    const uint64_t hash = HashBytes(word);
    if (!MayHoldNonNode(hash)) return median;
    const Entry* e = Find(word, hash);
    return e != nullptr ? e->idf : median;
  }
  bool HasNonNode(std::string_view word) const {
    const uint64_t hash = HashBytes(word);
    return MayHoldNonNode(hash) && Find(word, hash) != nullptr;
  }

  // The IDF of trie node `node` (whose word is known to be that node's).
  double IdfOfNode(uint32_t node) const {
    if (!idf_values.empty() || node_idf.size() == 0) {
      const uint16_t index = node_idf_index[node];
      return index == 0 ? median : idf_values[index - 1];
    }
    const double idf = node_idf[node];
    return std::isnan(idf) ? median : idf;
  }
  bool HasNode(uint32_t node) const {
    if (!idf_values.empty() || node_idf.size() == 0) return node_idf_index[node] != 0;
    return !std::isnan(node_idf[node]);
  }

  // Moves the IDF of every word that is a trie node out of `table` into a per-node array: an
  // index into idf_values (few distinct values: 2 bytes a node, cache-friendly) or, if there are
  // more than 65,535 distinct values, the double itself. `table` keeps the other words, with a
  // bit filter in front of it (most words looked up there are not in the table).
  void KeepOnlyNonNodeWords(const JiebaSegmenter::Impl& segmenter) {
    std::vector<std::pair<std::string, double>> rest;
    std::vector<std::pair<uint32_t, double>> nodes;
    std::unordered_map<double, uint16_t> value_index;
    bool few_values = true;
    for (size_t slot = 0; slot < table.size(); ++slot) {
      const Entry& entry = table[slot];
      if (!entry.used()) continue;
      const std::string_view word =
          std::string_view(keys).substr(entry.key_offset, entry.key_length);
      const uint32_t node = segmenter.FindNode(word);
      if (node != jieba::kNoNode) {
        nodes.emplace_back(node, entry.idf);
        if (few_values && !value_index.count(entry.idf)) {
          if (idf_values.size() >= 65535 || std::isnan(entry.idf)) {
            few_values = false;
          } else {
            idf_values.push_back(entry.idf);
            value_index[entry.idf] = static_cast<uint16_t>(idf_values.size());
          }
        }
      } else {
        rest.emplace_back(word, entry.idf);
      }
    }
    const size_t slot_count = segmenter.trie.slot_count();
    if (few_values) {
      node_idf_index.Assign(slot_count, 0);
      for (const auto& [node, idf] : nodes) node_idf_index[node] = value_index[idf];
    } else {
      idf_values.clear();
      node_idf.Assign(slot_count, NAN);
      for (const auto& [node, idf] : nodes) node_idf[node] = idf;
    }
    size_t table_size = 16;
    while (table_size < rest.size() * 2) table_size *= 2;
    table.Assign(table_size, Entry{});
    keys.clear();
    keys.shrink_to_fit();
    const size_t file_count = count;
    size_t filter_bits = 4096;
    while (filter_bits < rest.size() * 32 && filter_bits < (size_t{1} << 24)) filter_bits *= 2;
    filter.assign(filter_bits / 64, 0);
    filter_shift = 64 - std::countr_zero(filter_bits);
    for (const auto& [word, idf] : rest) {
      Insert(word, idf);
      const uint64_t bit = HashBytes(word) >> filter_shift;
      filter[bit / 64] |= uint64_t{1} << (bit % 64);
    }
    count = file_count;
  }

  bool MayHoldNonNode(uint64_t hash) const {
    if (filter.empty()) return true;
    const uint64_t bit = hash >> filter_shift;
    return (filter[bit / 64] >> (bit % 64)) & 1;
  }

  // IDFLoader.set_new_path.
  Status Load(const std::string& path) {
    std::string contents;
    NEARDUP_RETURN_IF_ERROR(jieba::ReadWholeFile(path, &contents));
    // Count lines first to size the table.
    size_t estimated_lines =
        1 + static_cast<size_t>(std::count(contents.begin(), contents.end(), '\n'));
    size_t table_size = 16;
    while (table_size < estimated_lines + estimated_lines / 2) table_size *= 2;
    table.Assign(table_size, Entry{});
    keys.reserve(contents.size());
    NEARDUP_RETURN_IF_ERROR(ParseIdfTable(
        contents, path, [this](std::string_view word, double idf) { Insert(word, idf); }));
    if (count == 0) return Status::Corruption(path + ": the IDF table is empty");
    std::vector<double> values;
    values.reserve(count);
    for (size_t slot = 0; slot < table.size(); ++slot) {
      if (table[slot].used()) values.push_back(table[slot].idf);
    }
    auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
    std::nth_element(values.begin(), middle, values.end());
    median = *middle;
    return Status::Ok();
  }
};

KeywordExtractor::KeywordExtractor(std::shared_ptr<const JiebaSegmenter> segmenter,
                                   std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {
  impl_->segmenter = std::move(segmenter);
}
KeywordExtractor::~KeywordExtractor() = default;

const JiebaSegmenter& KeywordExtractor::segmenter() const { return *impl_->segmenter; }

Result<std::shared_ptr<const KeywordExtractor>> KeywordExtractor::Create(
    std::shared_ptr<const JiebaSegmenter> segmenter, const JiebaOptions& options) {
  if (segmenter == nullptr) return Status::InvalidArgument("KeywordExtractor needs a segmenter");
  const std::string path =
      options.idf_path.empty() ? JiebaOptionsForDirectory("").idf_path : options.idf_path;
  auto impl = std::make_unique<Impl>();
  try {
    NEARDUP_RETURN_IF_ERROR(impl->Load(path));
    const JiebaSegmenter::Impl& segmenter_impl = *segmenter->impl_;
    impl->KeepOnlyNonNodeWords(segmenter_impl);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory while loading " + path);
  }
  return std::shared_ptr<const KeywordExtractor>(
      new KeywordExtractor(std::move(segmenter), std::move(impl)));
}

Result<std::shared_ptr<const KeywordExtractor>> KeywordExtractor::Default() {
  static const Result<std::shared_ptr<const KeywordExtractor>> extractor =
      []() -> Result<std::shared_ptr<const KeywordExtractor>> {
    Result<std::shared_ptr<const JiebaSegmenter>> segmenter = JiebaSegmenter::Default();
    if (!segmenter.ok()) return segmenter.status();
    return Create(*segmenter);
  }();
  return extractor;
}

void KeywordExtractor::CountTerms(std::string_view text, std::vector<TermCount>* terms) const {
  CountTermsAndIdfs(text, terms, nullptr);
}

void KeywordExtractor::CountTermsAndIdfs(std::string_view text, std::vector<TermCount>* terms,
                                         std::vector<double>* idfs) const {
  terms->clear();
  if (idfs != nullptr) idfs->clear();
  const JiebaSegmenter::Impl& segmenter = *impl_->segmenter->impl_;
  TermScratch& scratch = ThreadTermScratch();
  scratch.tokens.clear();
  scratch.nodes.clear();
  segmenter.CutWordsWithNodes(text, &scratch.tokens, &scratch.nodes);
  // The table starts small (it must stay in cache) and doubles when half full.
  size_t table_size = TableSizeFor(std::min<size_t>(scratch.tokens.size(), 256));
  auto start_table = [&](size_t size) {
    if (scratch.slots.size() < size) scratch.slots.resize(size);
    if (++scratch.stamp == 0) {  // wrapped: forget every old stamp
      for (auto& slot : scratch.slots) slot.stamp = 0;
      scratch.stamp = 1;
    }
  };
  start_table(table_size);
  size_t mask = table_size - 1;
  auto home_slot = [](uint64_t key, bool by_node) {
    return by_node ? Mix64(key + 0x9E3779B97F4A7C15ull) : key;
  };
  scratch.term_keys.clear();
  const size_t token_count = scratch.tokens.size();
  for (size_t t = 0; t < token_count; ++t) {
    const std::string_view token = scratch.tokens[t];
    if (!LongEnough(token) || IsStopWord(token)) continue;
    uint32_t node = scratch.nodes[t];
    if (node == jieba::kUnknownNode) node = segmenter.FindNode(token);
    const bool by_node = node != jieba::kNoNode;
    const uint64_t key = by_node ? node : HashBytes(token);
    for (size_t slot = home_slot(key, by_node) & mask;; slot = (slot + 1) & mask) {
      TermScratch::Slot& entry = scratch.slots[slot];
      if (entry.stamp != scratch.stamp) {
        entry.stamp = scratch.stamp;
        entry.key = key;
        entry.term = static_cast<uint32_t>(terms->size()) | (by_node ? TermScratch::kNodeKey : 0);
        terms->push_back({token, 1});
        scratch.term_keys.push_back(entry);
        if (idfs != nullptr) {
          idfs->push_back(by_node ? impl_->IdfOfNode(node) : impl_->IdfOfNonNode(token));
        }
        if (terms->size() * 2 > table_size) {  // grow and re-insert every term
          table_size *= 2;
          start_table(table_size);
          mask = table_size - 1;
          for (const TermScratch::Slot& term_key : scratch.term_keys) {
            const bool node_key = (term_key.term & TermScratch::kNodeKey) != 0;
            size_t s = home_slot(term_key.key, node_key) & mask;
            while (scratch.slots[s].stamp == scratch.stamp) s = (s + 1) & mask;
            scratch.slots[s] = term_key;
            scratch.slots[s].stamp = scratch.stamp;
          }
        }
        break;
      }
      if (entry.key == key && ((entry.term & TermScratch::kNodeKey) != 0) == by_node) {
        TermCount& term = (*terms)[entry.term & ~TermScratch::kNodeKey];
        if (by_node || term.word == token) {
          ++term.count;
          break;
        }
      }
    }
  }
}

namespace {

// sorted(..., key=weight, reverse=True)[:top_k]: a stable sort, so ties keep the order of first
// occurrence; sorting by (weight descending, index ascending) gives the same top words.
std::vector<Keyword> TopKeywords(const std::vector<TermCount>& terms,
                                 const std::vector<double>& weights, size_t top_k,
                                 std::vector<uint32_t>* order) {
  order->resize(terms.size());
  for (size_t i = 0; i < order->size(); ++i) (*order)[i] = static_cast<uint32_t>(i);
  auto before = [&](uint32_t a, uint32_t b) {
    return weights[a] > weights[b] || (weights[a] == weights[b] && a < b);
  };
  const size_t n = top_k == 0 ? order->size() : std::min(top_k, order->size());
  const bool has_nan =
      std::any_of(weights.begin(), weights.end(), [](double w) { return std::isnan(w); });
  if (n < order->size() && !has_nan) {
    // The n best so far, best first. Terms come in index order, so a term that ties the last
    // kept weight never displaces it (the earlier index wins), as in the stable sort.
    size_t kept = 0;
    uint32_t* top = order->data();  // top[0, kept), written behind the read position
    for (uint32_t i = 0; i < weights.size(); ++i) {
      if (kept == n && !(weights[i] > weights[top[n - 1]])) continue;
      size_t pos = kept == n ? n - 1 : kept;
      while (pos > 0 && weights[i] > weights[top[pos - 1]]) {
        top[pos] = top[pos - 1];
        --pos;
      }
      top[pos] = i;
      if (kept < n) ++kept;
    }
  } else if (n < order->size()) {
    std::partial_sort(order->begin(), order->begin() + static_cast<std::ptrdiff_t>(n), order->end(),
                      before);
  } else {
    std::stable_sort(order->begin(), order->end(),
                     [&](uint32_t a, uint32_t b) { return weights[a] > weights[b]; });
  }
  std::vector<Keyword> keywords;
  keywords.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    keywords.push_back({std::string(terms[(*order)[i]].word), weights[(*order)[i]]});
  }
  return keywords;
}

struct ExtractScratch {
  std::vector<TermCount> terms;
  std::vector<double> idfs;
  std::vector<double> weights;
  std::vector<uint32_t> order;
};

[[gnu::noinline]] ExtractScratch& ThreadExtractScratch() {
  thread_local ExtractScratch scratch;
  return scratch;
}

}  // namespace

std::vector<Keyword> KeywordExtractor::ExtractTags(std::string_view text, size_t top_k) const {
  ExtractScratch& scratch = ThreadExtractScratch();
  CountTermsAndIdfs(text, &scratch.terms, &scratch.idfs);
  const std::vector<TermCount>& terms = scratch.terms;
  double total = 0;  // sum(freq.values()), in insertion order
  for (const TermCount& term : terms) total += static_cast<double>(term.count);
  scratch.weights.resize(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    // freq[k] *= idf / total
    scratch.weights[i] = static_cast<double>(terms[i].count) * (scratch.idfs[i] / total);
  }
  return TopKeywords(terms, scratch.weights, top_k, &scratch.order);
}

std::vector<Keyword> KeywordExtractor::ExtractTagsRaw(std::string_view text, size_t top_k) const {
  ExtractScratch& scratch = ThreadExtractScratch();
  CountTermsAndIdfs(text, &scratch.terms, &scratch.idfs);
  const std::vector<TermCount>& terms = scratch.terms;
  scratch.weights.resize(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    scratch.weights[i] = static_cast<double>(terms[i].count) * scratch.idfs[i];
  }
  return TopKeywords(terms, scratch.weights, top_k, &scratch.order);
}

double KeywordExtractor::Idf(std::string_view word) const {
  const uint32_t node = impl_->segmenter->impl_->FindNode(word);
  return node != jieba::kNoNode ? impl_->IdfOfNode(node) : impl_->IdfOfNonNode(word);
}

bool KeywordExtractor::HasIdf(std::string_view word) const {
  const uint32_t node = impl_->segmenter->impl_->FindNode(word);
  return node != jieba::kNoNode ? impl_->HasNode(node) : impl_->HasNonNode(word);
}

double KeywordExtractor::median_idf() const { return impl_->median; }

size_t KeywordExtractor::idf_size() const { return impl_->count; }

}  // namespace neardup
