// Fingerprinter: normalisation -> features -> SimHash, and the yanyiwu/simhash compatibility
// profile; see neardup/fingerprinter.h.
#include "neardup/fingerprinter.h"

// XXH3 inlined into the fused path's per-shingle hash (the same function HashFeature calls).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/utf8.h"
#include "features/idf_table.h"
#include "fingerprint/simhash_accumulator.h"
#include "neardup/jieba.h"

namespace neardup {

FingerprintOptions YanyiwuSimhashOptions(size_t top_k) {
  FingerprintOptions options;
  options.profile = HashProfile::kYanyiwuSimhash;
  options.normalize.nfkc = false;
  options.normalize.case_fold = false;
  options.normalize.traditional_to_simplified = false;
  options.normalize.fold_whitespace = false;
  options.normalize.strip_markup = false;
  options.features.tokenizer = Tokenizer::kJieba;
  options.features.shingle_size = 1;
  options.features.weighting = Weighting::kTfIdf;
  options.features.sublinear_tf = false;
  options.features.top_k = top_k;
  options.features.drop_single_char_words = true;
  options.features.drop_stop_words = true;
  options.hash = FeatureHash::kJenkinsLookup3;
  options.bits = 64;
  return options;
}

namespace {

// kSpreadBits.lanes[b] holds bit i of byte b in byte i: adding it to a 64-bit word counts the
// eight bits of b in eight 8-bit lanes at once.
struct SpreadBits {
  uint64_t lanes[256];
  constexpr SpreadBits() : lanes() {
    for (int b = 0; b < 256; ++b) {
      for (int i = 0; i < 8; ++i) lanes[b] |= static_cast<uint64_t>((b >> i) & 1) << (8 * i);
    }
  }
};
constexpr SpreadBits kSpreadBits;

// HashFeature(text, hash, bits) with XXH3 inlined: shingles are short, and the call into the
// shared xxHash library costs about as much as hashing one.
inline FeatureHashValue HashShingle(std::string_view text, FeatureHash hash, int bits) {
  if (hash != FeatureHash::kXxh3) return HashFeature(text, hash, bits);
  FeatureHashValue value;
  if (bits > 64) {
    const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
    value.hi = h.high64;
    value.lo = h.low64;
  } else {
    value.lo = XXH3_64bits(text.data(), text.size());
  }
  return value;
}

// 1 + ln(count) for the counts most features have, from the same std::log: FeatureWeight's
// sublinear term without a call per feature.
struct SublinearTable {
  static constexpr int kSize = 64;
  double weight[kSize];
  SublinearTable() {
    for (int c = 1; c < kSize; ++c) weight[c] = 1 + std::log(static_cast<double>(c));
    weight[0] = 0;
  }
};

// FeatureWeight(options, count) for the fused path's options (never TF-IDF).
inline double CountWeight(const FeatureOptions& options, uint32_t count,
                          const SublinearTable& table) {
  if (options.weighting == Weighting::kUniform) return 1;
  if (!options.sublinear_tf) return static_cast<double>(count);
  if (count < SublinearTable::kSize) return table.weight[count];
  return FeatureWeight(options, static_cast<double>(count));
}

// The fused path from token views to a SimHash: shingles are hashed from views into the text (or,
// when their words are not separated by exactly one space there, from a per-thread arena), counted
// in an open-addressing table keyed by their hash (texts compared on a hash match, so distinct
// shingles never merge), and voted in order of first occurrence. Every buffer lives per thread and
// is reused: no allocation per document in the steady state.
class FeatureHasher {
 public:
  // Hashes the shingles of `tokens` (views into `text`) into *accumulator with the weights
  // FeatureExtractor::Extract gives them, producing the same fingerprint as hashing Extract's
  // features in its order (heaviest first, ties by text). Returns the number of features.
  // *fingerprint is left alone when there is no feature.
  size_t Run(const FeatureOptions& options, std::span<const std::string_view> tokens,
             FeatureHash hash, int bits, Fingerprint* fingerprint);

 private:
  struct Entry {
    std::string_view text;
    FeatureHashValue hash;
    uint32_t count = 0;
    double weight = 0;
  };
  // An open-addressing slot: 1 + the index into entries_ (0 = empty) and bits of the hash that
  // rule out most other entries without reading them.
  struct SlotEntry {
    uint32_t index;
    uint32_t tag;
  };
  // The shingle of `words`: a view into the text, or written at the arena's end.
  std::string_view ShingleView(std::span<const std::string_view> words);
  // The slot where the search for `h` starts.
  size_t Home(const FeatureHashValue& h) const {
    return static_cast<size_t>(h.lo ^ (h.lo >> 29)) & mask_;
  }
  SlotEntry* Slot(const FeatureHashValue& h, std::string_view text);
  void ReferenceOrder(int bits, Fingerprint* fingerprint);

  std::string arena_;  // sized for the worst case; arena_used_ bytes hold the shingles written
  size_t arena_used_ = 0;
  std::vector<Entry> entries_;
  std::vector<SlotEntry> slots_;
  size_t mask_ = 0;
};

std::string_view FeatureHasher::ShingleView(std::span<const std::string_view> words) {
  bool contiguous = true;
  for (size_t j = 0; j + 1 < words.size() && contiguous; ++j) {
    const char* end = words[j].data() + words[j].size();
    contiguous = words[j + 1].data() == end + 1 && *end == ' ';
  }
  if (contiguous) {
    const char* begin = words.front().data();
    return std::string_view(begin,
                            static_cast<size_t>(words.back().data() + words.back().size() - begin));
  }
  // The arena is sized for the worst case before the loop: it never reallocates, so earlier views
  // stay valid.
  char* const begin = arena_.data() + arena_used_;
  char* out = begin;
  for (size_t j = 0; j < words.size(); ++j) {
    if (j > 0) *out++ = ' ';
    std::memcpy(out, words[j].data(), words[j].size());
    out += words[j].size();
  }
  arena_used_ += static_cast<size_t>(out - begin);
  return std::string_view(begin, static_cast<size_t>(out - begin));
}

FeatureHasher::SlotEntry* FeatureHasher::Slot(const FeatureHashValue& h, std::string_view text) {
  size_t i = Home(h);
  const auto tag = static_cast<uint32_t>(h.lo >> 32);
  while (true) {
    SlotEntry& slot = slots_[i];
    if (slot.index == 0) return &slot;
    if (slot.tag == tag) {
      const Entry& entry = entries_[slot.index - 1];
      if (entry.hash.lo == h.lo && entry.hash.hi == h.hi && entry.text == text) return &slot;
    }
    i = (i + 1) & mask_;
  }
}

size_t FeatureHasher::Run(const FeatureOptions& options, std::span<const std::string_view> tokens,
                          FeatureHash hash, int bits, Fingerprint* fingerprint) {
  entries_.clear();
  if (tokens.empty()) return 0;
  const size_t n = static_cast<size_t>(options.shingle_size);
  const size_t count = tokens.size() >= n ? tokens.size() - n + 1 : 1;
  const size_t width = std::min(n, tokens.size());
  size_t table = 16;
  while (table < 2 * count) table *= 2;
  if (slots_.size() < table || slots_.size() > 64 * table) slots_.assign(table, SlotEntry{0, 0});
  std::fill(slots_.begin(), slots_.begin() + static_cast<ptrdiff_t>(table), SlotEntry{0, 0});
  mask_ = table - 1;
  arena_used_ = 0;
  if (width > 1) {
    size_t token_bytes = 0;
    for (std::string_view token : tokens) token_bytes += token.size() + 1;
    if (arena_.size() < token_bytes * width) arena_.resize(token_bytes * width);
  }
  for (size_t i = 0; i < count; ++i) {
    const std::string_view text = ShingleView(tokens.subspan(i, width));
    const FeatureHashValue h = HashShingle(text, hash, bits);
    SlotEntry* slot = Slot(h, text);
    if (slot->index == 0) {
      entries_.push_back(Entry{text, h, 1, 0});
      slot->index = static_cast<uint32_t>(entries_.size());
      slot->tag = static_cast<uint32_t>(h.lo >> 32);
    } else {
      entries_[slot->index - 1].count += 1;
    }
  }
  // Votes. Extract's order (heaviest first, ties by text) can round differently from any other
  // order, but every order's sum is within gamma_m * sum|w| of the exact sum (recursive summation,
  // gamma_m = m u / (1 - m u)), so a sum of ours farther than 2 gamma_m sum|w| from 0 (ours is
  // exact to within that too) has the same sign as Extract's. With integer weights every sum is
  // exact in any order. Otherwise, when a sum is too close to 0 to decide, the votes are redone in
  // Extract's order. Features seen once (weight 1 under every weighting) are counted per bit in
  // integers, eight bits per 64-bit word; the rest are voted in doubles.
  double sums[128] = {};
  uint64_t ones[128] = {};
  uint64_t lanes[16] = {};
  uint64_t once = 0, pending = 0;
  bool integral = true;
  double total = 0;
  SimHashAccumulator heavy(bits);
  auto flush = [&] {
    for (int k = 0; k < bits / 8; ++k) {
      for (int i = 0; i < 8; ++i) ones[8 * k + i] += (lanes[k] >> (8 * i)) & 0xFF;
      lanes[k] = 0;
    }
    pending = 0;
  };
  static const SublinearTable sublinear;
  for (Entry& entry : entries_) {
    entry.weight = CountWeight(options, entry.count, sublinear);
    total += entry.weight;
    if (entry.weight == 1.0) {
      for (int k = 0; k < 8; ++k) lanes[k] += kSpreadBits.lanes[(entry.hash.lo >> (8 * k)) & 0xFF];
      if (bits == 128) {
        for (int k = 0; k < 8; ++k) {
          lanes[8 + k] += kSpreadBits.lanes[(entry.hash.hi >> (8 * k)) & 0xFF];
        }
      }
      ++once;
      if (++pending == 255) flush();
      continue;
    }
    integral = integral && entry.weight == std::floor(entry.weight);
    heavy.Add(entry.hash, entry.weight);
  }
  flush();
  std::span<const double> heavy_sums = heavy.sums();
  for (int j = 0; j < bits; ++j) {
    const double net = 2 * static_cast<double>(ones[j]) - static_cast<double>(once);
    sums[j] = heavy_sums[static_cast<size_t>(j)] + net;
  }
  bool decided = integral && total < 0x1p52;
  if (!decided) {
    const double m = static_cast<double>(entries_.size());
    const double u = std::numeric_limits<double>::epsilon() / 2;
    const double gamma = m * u / (1 - m * u);
    const double margin = 4 * gamma * total;  // twice the bound: `total` itself is rounded
    decided = true;
    for (int j = 0; j < bits && decided; ++j) decided = std::fabs(sums[j]) > margin;
  }
  if (!decided) {
    ReferenceOrder(bits, fingerprint);
    return entries_.size();
  }
  uint64_t lo = 0, hi = 0;
  for (int j = 0; j < 64; ++j) lo |= static_cast<uint64_t>(sums[j] > 0) << j;
  if (bits == 128) {
    for (int j = 0; j < 64; ++j) hi |= static_cast<uint64_t>(sums[64 + j] > 0) << j;
  }
  *fingerprint = bits == 128 ? Fingerprint::From128(hi, lo) : Fingerprint::From64(lo);
  return entries_.size();
}

void FeatureHasher::ReferenceOrder(int bits, Fingerprint* fingerprint) {
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    return a.weight != b.weight ? a.weight > b.weight : a.text < b.text;
  });
  SimHashAccumulator accumulator(bits);
  for (const Entry& entry : entries_) accumulator.Add(entry.hash, entry.weight);
  *fingerprint = accumulator.Finish();
}

// The per-thread buffers of the fused path. The accessor is not inlined: when the compiler sees
// that FeatureHasher::Run's `this` is a thread_local, it specialises Run for it and recomputes the
// address with __tls_get_addr (the library is a shared object) inside its loops. Behind a call,
// `this` is an ordinary pointer: one TLS lookup per document.
struct FusedScratch {
  std::string normalized;
  std::vector<std::string_view> tokens;
  std::string storage;
  FeatureHasher hasher;
};

[[gnu::noinline]] FusedScratch& ThreadFusedScratch() {
  thread_local FusedScratch scratch;
  return scratch;
}

// Whether the fused path computes what Extract + SimHash would for these options.
bool FusedPathApplies(const FingerprintOptions& options) {
  const FeatureOptions& f = options.features;
  return f.fast_paths && options.normalize.fast_paths && f.tokenizer != Tokenizer::kCharNgram &&
         f.weighting != Weighting::kTfIdf && f.top_k == 0;
}

}  // namespace

struct Fingerprinter::Impl {
  FingerprintOptions options;
  std::unique_ptr<TextNormalizer> normalizer;        // kNeardup
  std::unique_ptr<FeatureExtractor> extractor;       // kNeardup
  std::shared_ptr<const KeywordExtractor> keywords;  // kYanyiwuSimhash
  std::shared_ptr<const IdfTable> idf;               // kYanyiwuSimhash (for the mean IDF)
};

Fingerprinter::Fingerprinter(const FingerprintOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}

Fingerprinter::~Fingerprinter() = default;

const FingerprintOptions& Fingerprinter::options() const { return impl_->options; }

Result<std::unique_ptr<Fingerprinter>> Fingerprinter::Create(const FingerprintOptions& options) {
  if (options.bits != 64 && options.bits != 128) {
    return Status::InvalidArgument("bits must be 64 or 128, got " + std::to_string(options.bits));
  }
  std::unique_ptr<Fingerprinter> fingerprinter(new Fingerprinter(options));
  Impl& impl = *fingerprinter->impl_;
  if (options.profile == HashProfile::kYanyiwuSimhash) {
    if (options.bits != 64) {
      return Status::InvalidArgument("the yanyiwu/simhash profile is 64-bit only");
    }
    fingerprinter->impl_->options.hash = FeatureHash::kJenkinsLookup3;
    const FeatureOptions& features = options.features;
    Result<std::shared_ptr<const KeywordExtractor>> keywords = Status::Internal("unset");
    if (features.jieba_dir.empty() && features.idf_path.empty()) {
      keywords = KeywordExtractor::Default();
    } else {
      JiebaOptions jieba;
      if (!features.jieba_dir.empty()) jieba = JiebaOptionsForDirectory(features.jieba_dir);
      if (!features.idf_path.empty()) jieba.idf_path = features.idf_path;
      auto segmenter =
          features.jieba_dir.empty() ? JiebaSegmenter::Default() : JiebaSegmenter::Create(jieba);
      if (!segmenter.ok()) return segmenter.status().WithContext("loading the jieba dictionary");
      keywords = KeywordExtractor::Create(*segmenter, jieba);
    }
    if (!keywords.ok()) return keywords.status().WithContext("loading the jieba IDF table");
    impl.keywords = *keywords;
    std::string idf_path = !features.idf_path.empty() ? features.idf_path
                           : !features.jieba_dir.empty()
                               ? JiebaOptionsForDirectory(features.jieba_dir).idf_path
                               : std::string();
    auto idf = idf_path.empty() ? IdfTable::Default() : IdfTable::Load(idf_path);
    if (!idf.ok()) return idf.status();
    impl.idf = *idf;
    return fingerprinter;
  }
  auto normalizer = TextNormalizer::Create(options.normalize);
  if (!normalizer.ok()) return normalizer.status();
  impl.normalizer = std::move(*normalizer);
  auto extractor = FeatureExtractor::Create(options.features);
  if (!extractor.ok()) return extractor.status();
  impl.extractor = std::move(*extractor);
  return fingerprinter;
}

// A text that normalises to nothing (whitespace, markup or control characters only) has no
// feature: every such text would get the same all-zero fingerprint and be a duplicate of every
// other. It is refused instead, the same way everywhere (service 400, a counted failure in dedup).
static Status NoFeatures() {
  return Status::InvalidArgument(
      "no features: nothing is left to fingerprint once the text is normalised (only "
      "whitespace, markup or control characters)");
}

Result<FingerprintDetails> Fingerprinter::ComputeDetails(std::string_view text, bool keep_features,
                                                         bool keep_normalized_text) const {
  FingerprintDetails details;
  NEARDUP_RETURN_IF_ERROR(ComputeInto(
      text, keep_features, keep_normalized_text ? &details.normalized_text : nullptr, &details));
  return details;
}

Status Fingerprinter::ComputeInto(std::string_view text, bool keep_features,
                                  std::string* normalized_text, FingerprintDetails* out) const {
  if (impl_->options.max_text_bytes > 0 && text.size() > impl_->options.max_text_bytes) {
    return Status::ResourceExhausted("text of " + std::to_string(text.size()) +
                                     " bytes exceeds the limit of " +
                                     std::to_string(impl_->options.max_text_bytes));
  }
  FingerprintDetails& details = *out;
  std::vector<WeightedFeature> features;
  std::string local_normalized;  // when the caller wants no normalised text (reference path)
  std::string& normalized = normalized_text != nullptr ? *normalized_text : local_normalized;
  if (impl_->options.profile == HashProfile::kYanyiwuSimhash) {
    std::string replaced;
    size_t invalid = utf8::FindInvalid(text);
    if (invalid != std::string_view::npos) {
      if (!impl_->options.normalize.replace_invalid_utf8) {
        return Status::InvalidUtf8("invalid UTF-8 at byte " + std::to_string(invalid));
      }
      replaced = utf8::ReplaceInvalid(text);
      text = replaced;
    }
    std::vector<TermCount> terms;
    impl_->keywords->CountTerms(text, &terms);
    struct Scored {
      double weight;
      size_t order;  // first occurrence: breaks ties as jieba does
    };
    std::vector<Scored> scored(terms.size());
    for (size_t i = 0; i < terms.size(); ++i) {
      const double* idf = impl_->idf->Find(terms[i].word);
      scored[i] = {
          static_cast<double>(terms[i].count) * (idf != nullptr ? *idf : impl_->idf->mean()), i};
    }
    auto heavier = [](const Scored& a, const Scored& b) {
      return a.weight != b.weight ? a.weight > b.weight : a.order < b.order;
    };
    size_t top_k = impl_->options.features.top_k;
    size_t keep = top_k > 0 ? std::min(top_k, scored.size()) : scored.size();
    std::partial_sort(scored.begin(), scored.begin() + static_cast<ptrdiff_t>(keep), scored.end(),
                      heavier);
    features.reserve(keep);
    for (size_t i = 0; i < keep; ++i) {
      features.push_back(
          WeightedFeature{std::string(terms[scored[i].order].word), scored[i].weight});
    }
    if (normalized_text != nullptr) normalized_text->assign(text);
  } else if (!keep_features && FusedPathApplies(impl_->options)) {
    FusedScratch& scratch = ThreadFusedScratch();
    if (scratch.normalized.capacity() > (size_t{64} << 20) &&
        scratch.normalized.capacity() > 8 * text.size()) {
      scratch = FusedScratch();  // a huge earlier text: give its buffers back
    }
    std::vector<std::string_view>& tokens = scratch.tokens;
    std::string& storage = scratch.storage;
    FeatureHasher& hasher = scratch.hasher;
    std::string& norm = normalized_text != nullptr ? *normalized_text : scratch.normalized;
    NEARDUP_RETURN_IF_ERROR(impl_->normalizer->Normalize(text, &norm));
    NEARDUP_RETURN_IF_ERROR(impl_->extractor->TokenViews(norm, &tokens, &storage));
    details.fingerprint = SimHashAccumulator(impl_->options.bits).Finish();
    details.feature_count = hasher.Run(impl_->options.features, tokens, impl_->options.hash,
                                       impl_->options.bits, &details.fingerprint);
    if (details.feature_count == 0 && !norm.empty()) {
      // No word feature (only punctuation or symbols): hash the text itself, as below.
      SimHashAccumulator accumulator(impl_->options.bits);
      accumulator.Add(HashFeature(norm, impl_->options.hash, impl_->options.bits), 1.0);
      details.feature_count = 1;
      details.whole_text_fallback = true;
      details.fingerprint = accumulator.Finish();
    }
    if (details.feature_count == 0) return NoFeatures();
    return Status::Ok();
  } else {
    NEARDUP_RETURN_IF_ERROR(impl_->normalizer->Normalize(text, &normalized));
    NEARDUP_RETURN_IF_ERROR(impl_->extractor->Extract(normalized, &features));
    if (features.empty() && !normalized.empty()) {
      // No word or character feature (only punctuation or symbols): hash the text itself.
      features.push_back(WeightedFeature{normalized, 1.0});
      details.whole_text_fallback = true;
    }
  }
  if (features.empty()) return NoFeatures();
  SimHashAccumulator accumulator(impl_->options.bits);
  for (const WeightedFeature& feature : features) {
    accumulator.Add(HashFeature(feature.text, impl_->options.hash, impl_->options.bits),
                    feature.weight);
  }
  details.fingerprint = accumulator.Finish();
  details.feature_count = features.size();
  if (keep_features) details.features = std::move(features);
  return Status::Ok();
}

Result<Fingerprint> Fingerprinter::Compute(std::string_view text) const {
  auto details = ComputeDetails(text);
  if (!details.ok()) return details.status();
  return details->fingerprint;
}

Result<Fingerprint> Fingerprinter::Compute(std::string_view text,
                                           std::string* normalized_text) const {
  FingerprintDetails details;
  NEARDUP_RETURN_IF_ERROR(ComputeInto(text, false, normalized_text, &details));
  return details.fingerprint;
}

Result<std::vector<WeightedFeature>> Fingerprinter::Features(std::string_view text) const {
  auto details = ComputeDetails(text, /*keep_features=*/true);
  if (!details.ok() && IsNoFeatures(details.status())) return std::vector<WeightedFeature>();
  if (!details.ok()) return details.status();
  return std::move(details->features);
}

Result<Fingerprint> Fingerprinter::ComputeFromFeatures(
    std::span<const WeightedFeature> features) const {
  return SimHashFeatures(features, impl_->options.bits, impl_->options.hash);
}

}  // namespace neardup
