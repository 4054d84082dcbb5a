// Fingerprinter: normalisation -> features -> SimHash, and the yanyiwu/simhash compatibility
// profile; see neardup/fingerprinter.h.
#include "neardup/fingerprinter.h"

#include <algorithm>
#include <cmath>

#include "common/utf8.h"
#include "features/idf_table.h"
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

struct Fingerprinter::Impl {
  std::unique_ptr<TextNormalizer> normalizer;        // kNeardup
  std::unique_ptr<FeatureExtractor> extractor;       // kNeardup
  std::shared_ptr<const KeywordExtractor> keywords;  // kYanyiwuSimhash
  std::shared_ptr<const IdfTable> idf;               // kYanyiwuSimhash (for the mean IDF)
};

Fingerprinter::Fingerprinter(const FingerprintOptions& options)
    : options_(options), impl_(std::make_unique<Impl>()) {}

Fingerprinter::~Fingerprinter() = default;

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
    fingerprinter->options_.hash = FeatureHash::kJenkinsLookup3;
    const FeatureOptions& features = options.features;
    Result<std::shared_ptr<const KeywordExtractor>> keywords = Status::Internal("unset");
    if (features.jieba_dir.empty() && features.idf_path.empty()) {
      keywords = KeywordExtractor::Default();
    } else {
      JiebaOptions jieba;
      if (!features.jieba_dir.empty()) {
        jieba.dict_path = features.jieba_dir + "/dict.txt";
        jieba.hmm_dir = features.jieba_dir + "/finalseg";
        jieba.idf_path = features.jieba_dir + "/analyse/idf.txt";
      }
      if (!features.idf_path.empty()) jieba.idf_path = features.idf_path;
      auto segmenter =
          features.jieba_dir.empty() ? JiebaSegmenter::Default() : JiebaSegmenter::Load(jieba);
      if (!segmenter.ok()) return segmenter.status().WithContext("loading the jieba dictionary");
      keywords = KeywordExtractor::Load(*segmenter, jieba);
    }
    if (!keywords.ok()) return keywords.status().WithContext("loading the jieba IDF table");
    impl.keywords = *keywords;
    std::string idf_path = !features.idf_path.empty()    ? features.idf_path
                           : !features.jieba_dir.empty() ? features.jieba_dir + "/analyse/idf.txt"
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

Result<FingerprintDetails> Fingerprinter::ComputeDetails(std::string_view text, bool keep_features,
                                                         bool keep_normalized_text) const {
  if (options_.max_text_bytes > 0 && text.size() > options_.max_text_bytes) {
    return Status::ResourceExhausted("text of " + std::to_string(text.size()) +
                                     " bytes exceeds the limit of " +
                                     std::to_string(options_.max_text_bytes));
  }
  FingerprintDetails details;
  std::vector<WeightedFeature> features;
  std::string normalized;
  if (options_.profile == HashProfile::kYanyiwuSimhash) {
    std::string replaced;
    size_t invalid = utf8::FindInvalid(text);
    if (invalid != std::string_view::npos) {
      if (!options_.normalize.replace_invalid_utf8) {
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
    size_t top_k = options_.features.top_k;
    size_t keep = top_k > 0 ? std::min(top_k, scored.size()) : scored.size();
    std::partial_sort(scored.begin(), scored.begin() + static_cast<ptrdiff_t>(keep), scored.end(),
                      heavier);
    features.reserve(keep);
    for (size_t i = 0; i < keep; ++i) {
      features.push_back(
          WeightedFeature{std::string(terms[scored[i].order].word), scored[i].weight});
    }
    if (keep_normalized_text) normalized.assign(text);
  } else {
    NEARDUP_RETURN_IF_ERROR(impl_->normalizer->Normalize(text, &normalized));
    NEARDUP_RETURN_IF_ERROR(impl_->extractor->Extract(normalized, &features));
    if (features.empty() && !normalized.empty()) {
      // No word or character feature (only punctuation or symbols): hash the text itself.
      features.push_back(WeightedFeature{normalized, 1.0});
      details.whole_text_fallback = true;
    }
  }
  SimHashAccumulator accumulator(options_.bits);
  for (const WeightedFeature& feature : features) {
    accumulator.Add(HashFeature(feature.text, options_.hash, options_.bits), feature.weight);
  }
  details.fingerprint = accumulator.Finish();
  details.feature_count = features.size();
  if (keep_features) details.features = std::move(features);
  if (keep_normalized_text) details.normalized_text = std::move(normalized);
  return details;
}

Result<Fingerprint> Fingerprinter::Compute(std::string_view text) const {
  auto details = ComputeDetails(text);
  if (!details.ok()) return details.status();
  return details->fingerprint;
}

Result<std::vector<WeightedFeature>> Fingerprinter::Features(std::string_view text) const {
  auto details = ComputeDetails(text, /*keep_features=*/true);
  if (!details.ok()) return details.status();
  return std::move(details->features);
}

Result<Fingerprint> Fingerprinter::ComputeFromFeatures(
    std::span<const WeightedFeature> features) const {
  return SimHashFeatures(features, options_.bits, options_.hash);
}

}  // namespace neardup
