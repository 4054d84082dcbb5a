// FeatureExtractor: tokenizers (jieba, ICU word boundaries, character n-grams), word shingles and
// TF-IDF / TF / uniform weighting; see neardup/features.h.
#include <unicode/brkiter.h>
#include <unicode/uchar.h>
#include <unicode/utext.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/string_hash.h"
#include "common/utf8.h"
#include "features/cj_dictionary_break.h"
#include "features/idf_table.h"
#include "features/jieba_internal.h"
#include "features/word_splitter.h"
#include "neardup/features.h"
#include "neardup/jieba.h"

namespace neardup {
namespace {

// jieba.analyse's STOP_WORDS, compared as they are (the text is normally case-folded already).
const std::unordered_set<std::string_view>& JiebaStopWords() {
  static const std::unordered_set<std::string_view> words(std::begin(jieba::kStopWords),
                                                          std::end(jieba::kStopWords));
  return words;
}

bool IsContent(char32_t cp) { return IsLetterMarkOrNumber(cp); }

// True if the token holds a letter, mark or number (not only spaces and punctuation).
bool HasContent(std::string_view token) {
  size_t i = 0;
  while (i < token.size()) {
    auto byte = static_cast<unsigned char>(token[i]);
    if (byte < 0x80) {
      if ((byte >= '0' && byte <= '9') || ((byte | 0x20) >= 'a' && (byte | 0x20) <= 'z')) {
        return true;
      }
      ++i;
      continue;
    }
    size_t len = utf8::ValidSequenceLength(token, i);
    if (len == 0) {
      ++i;
      continue;
    }
    if (IsContent(utf8::Decode(token, i, len))) return true;
    i += len;
  }
  return false;
}

size_t CodePointCount(std::string_view token) {
  size_t count = 0;
  for (char c : token) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

// ICU word segmentation over UTF-8 without conversion; one BreakIterator per thread.
Status IcuWords(std::string_view text, std::vector<std::string_view>* tokens) {
  thread_local std::unique_ptr<icu::BreakIterator> iterator;
  UErrorCode error = U_ZERO_ERROR;
  if (iterator == nullptr) {
    iterator.reset(icu::BreakIterator::createWordInstance(icu::Locale::getRoot(), error));
    if (U_FAILURE(error) || iterator == nullptr) {
      iterator.reset();
      return Status::Internal(std::string("ICU word break iterator unavailable: ") +
                              u_errorName(error));
    }
  }
  UText utext = UTEXT_INITIALIZER;
  utext_openUTF8(&utext, text.data(), static_cast<int64_t>(text.size()), &error);
  iterator->setText(&utext, error);
  if (U_FAILURE(error)) {
    utext_close(&utext);
    return Status::Internal(std::string("ICU word segmentation failed: ") + u_errorName(error));
  }
  int32_t begin = iterator->first();
  for (int32_t end = iterator->next(); end != icu::BreakIterator::DONE;
       begin = end, end = iterator->next()) {
    if (iterator->getRuleStatus() >= UBRK_WORD_NONE_LIMIT) {
      tokens->push_back(text.substr(static_cast<size_t>(begin), static_cast<size_t>(end - begin)));
    }
  }
  utext_close(&utext);
  return Status::Ok();
}

// Overlapping n-grams of the content characters; `storage` receives the compacted characters.
void CharNgrams(std::string_view text, int n, std::string* storage,
                std::vector<std::string_view>* tokens) {
  std::vector<size_t> starts;  // byte offset of each character in *storage
  storage->clear();
  storage->reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t len = utf8::ValidSequenceLength(text, i);
    if (len == 0) {
      ++i;
      continue;
    }
    if (IsContent(utf8::Decode(text, i, len))) {
      starts.push_back(storage->size());
      storage->append(text.substr(i, len));
    }
    i += len;
  }
  if (starts.empty()) return;
  starts.push_back(storage->size());
  size_t chars = starts.size() - 1;
  size_t width = std::min(chars, static_cast<size_t>(n));
  for (size_t c = 0; c + width <= chars; ++c) {
    tokens->push_back(std::string_view(*storage).substr(starts[c], starts[c + width] - starts[c]));
  }
}

}  // namespace

struct FeatureExtractor::Impl {
  FeatureOptions options;
  // The jieba segmenter is loaded on the first text that needs it (loading the dictionary takes
  // a noticeable fraction of a second), once, whatever the number of threads.
  std::string jieba_dir;
  mutable std::once_flag jieba_once;
  mutable std::shared_ptr<const JiebaSegmenter> jieba;
  mutable Status jieba_status;
  std::shared_ptr<const IdfTable> idf;

  Status LoadJieba() const {
    std::call_once(jieba_once, [this] {
      Result<std::shared_ptr<const JiebaSegmenter>> loaded = Status::Internal("unset");
      if (jieba_dir.empty()) {
        loaded = JiebaSegmenter::Default();
      } else {
        JiebaOptions jieba_options = JiebaOptionsForDirectory(jieba_dir);
        jieba_options.idf_path.clear();  // the segmenter reads no IDF table
        loaded = JiebaSegmenter::Create(jieba_options);
      }
      if (loaded.ok()) {
        jieba = *loaded;
      } else {
        jieba_status = loaded.status().WithContext("loading the jieba dictionary");
      }
    });
    return jieba_status;
  }

  // Words (or n-grams) of `text` after filtering; views into text or *storage.
  Status Tokens(const FeatureOptions& options, std::string_view text, std::string* storage,
                std::vector<std::string_view>* tokens) const {
    tokens->clear();
    Tokenizer tokenizer = options.tokenizer;
    if (tokenizer == Tokenizer::kAuto) {
      tokenizer = utf8::HanWithoutKana(text) ? Tokenizer::kJieba : Tokenizer::kIcuWord;
    }
    if (tokenizer == Tokenizer::kCharNgram) {
      CharNgrams(text, options.char_ngram_size, storage, tokens);
      return Status::Ok();
    }
    if (tokenizer == Tokenizer::kJieba && options.fast_paths) {
      // The cut leaves out the tokens without content itself (HasContent below): nothing is left
      // to drop but by the options below.
      NEARDUP_RETURN_IF_ERROR(LoadJieba());
      jieba->impl_->CutContentWords(text, tokens, options.jieba_hmm);
      if (!options.drop_single_char_words && !options.drop_stop_words) return Status::Ok();
    } else if (tokenizer == Tokenizer::kJieba) {
      NEARDUP_RETURN_IF_ERROR(LoadJieba());
      jieba->Cut(text, tokens, options.jieba_hmm);
    } else if (options.fast_paths &&
               SplitSpaceSeparatedWords(text, tokens, WordFilter::kWithContent)) {
      // The splitter kept only the words with content: nothing is left to drop but by the
      // options below.
      if (!options.drop_single_char_words && !options.drop_stop_words) return Status::Ok();
    } else {
      tokens->clear();
      if (!options.fast_paths || !SplitJapaneseWords(text, tokens)) {
        tokens->clear();
        NEARDUP_RETURN_IF_ERROR(IcuWords(text, tokens));
      }
    }
    const auto& stop_words = JiebaStopWords();
    auto drop = [&](std::string_view token) {
      if (!HasContent(token)) return true;
      if (options.drop_single_char_words && CodePointCount(token) < 2) return true;
      if (options.drop_stop_words && stop_words.count(token) > 0) return true;
      return false;
    };
    tokens->erase(std::remove_if(tokens->begin(), tokens->end(), drop), tokens->end());
    return Status::Ok();
  }
};

FeatureExtractor::FeatureExtractor(const FeatureOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}

const FeatureOptions& FeatureExtractor::options() const { return impl_->options; }

FeatureExtractor::~FeatureExtractor() = default;

Result<std::unique_ptr<FeatureExtractor>> FeatureExtractor::Create(const FeatureOptions& options) {
  if (options.shingle_size < 1 || options.shingle_size > 16) {
    return Status::InvalidArgument("shingle_size must be in [1, 16], got " +
                                   std::to_string(options.shingle_size));
  }
  if (options.char_ngram_size < 1 || options.char_ngram_size > 32) {
    return Status::InvalidArgument("char_ngram_size must be in [1, 32], got " +
                                   std::to_string(options.char_ngram_size));
  }
  std::unique_ptr<FeatureExtractor> extractor(new FeatureExtractor(options));
  extractor->impl_->jieba_dir = options.jieba_dir;
  if (options.tokenizer == Tokenizer::kJieba) {
    NEARDUP_RETURN_IF_ERROR(extractor->impl_->LoadJieba());  // surely needed: fail early
  } else if (options.tokenizer == Tokenizer::kAuto && !options.jieba_dir.empty()) {
    std::error_code error;
    const std::string dict_path = JiebaOptionsForDirectory(options.jieba_dir).dict_path;
    if (!std::filesystem::exists(dict_path, error)) {
      return Status::NotFound("jieba dictionary " + dict_path + " not found");
    }
  }
  if (options.weighting == Weighting::kTfIdf || !options.idf_path.empty()) {
    Result<std::shared_ptr<const IdfTable>> idf =
        !options.idf_path.empty() ? IdfTable::Load(options.idf_path)
        : options.jieba_dir.empty()
            ? IdfTable::Default()
            : IdfTable::Load(JiebaOptionsForDirectory(options.jieba_dir).idf_path);
    if (!idf.ok()) return idf.status();
    extractor->impl_->idf = *idf;
  }
  return extractor;
}

double FeatureExtractor::Idf(std::string_view word) const {
  return impl_->idf == nullptr ? 1.0 : impl_->idf->Idf(word);
}

Status FeatureExtractor::Tokenize(std::string_view text, std::vector<std::string>* tokens) const {
  std::string storage;
  std::vector<std::string_view> views;
  NEARDUP_RETURN_IF_ERROR(impl_->Tokens(impl_->options, text, &storage, &views));
  tokens->assign(views.begin(), views.end());
  return Status::Ok();
}

Status FeatureExtractor::TokenViews(std::string_view text, std::vector<std::string_view>* tokens,
                                    std::string* storage) const {
  return impl_->Tokens(impl_->options, text, storage, tokens);
}

Status FeatureExtractor::Extract(std::string_view text,
                                 std::vector<WeightedFeature>* features) const {
  features->clear();
  std::string storage;
  std::vector<std::string_view> tokens;
  NEARDUP_RETURN_IF_ERROR(impl_->Tokens(impl_->options, text, &storage, &tokens));
  if (tokens.empty()) return Status::Ok();

  const bool tf_idf = impl_->options.weighting == Weighting::kTfIdf && impl_->idf != nullptr;
  struct Tally {
    double count = 0;
    double idf = 1;
  };
  std::unordered_map<std::string_view, Tally, StringHash, std::equal_to<>> tallies;
  tallies.reserve(tokens.size());
  const bool words = impl_->options.tokenizer != Tokenizer::kCharNgram;
  const size_t n = words ? static_cast<size_t>(impl_->options.shingle_size) : 1;
  std::vector<std::string> shingles;  // owns joined shingles; reserved so views stay valid
  if (n == 1) {
    for (std::string_view token : tokens) {
      auto [it, inserted] = tallies.try_emplace(token);
      if (inserted && tf_idf) it->second.idf = impl_->idf->Idf(token);
      it->second.count += 1;
    }
  } else {
    size_t count = tokens.size() >= n ? tokens.size() - n + 1 : 1;
    size_t width = std::min(n, tokens.size());
    shingles.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      std::string shingle;
      double idf_sum = 0;
      for (size_t j = 0; j < width; ++j) {
        if (j > 0) shingle.push_back(' ');
        shingle.append(tokens[i + j]);
        if (tf_idf) idf_sum += impl_->idf->Idf(tokens[i + j]);
      }
      shingles.push_back(std::move(shingle));
      auto [it, inserted] = tallies.try_emplace(std::string_view(shingles.back()));
      if (inserted && tf_idf) it->second.idf = idf_sum / static_cast<double>(width);
      it->second.count += 1;
    }
  }
  features->reserve(tallies.size());
  for (const auto& [feature, tally] : tallies) {
    double weight = FeatureWeight(impl_->options, tally.count, tf_idf ? tally.idf : 1);
    if (!(weight > 0)) continue;  // a zero or negative IDF carries no vote
    features->push_back(WeightedFeature{std::string(feature), weight});
  }
  auto heavier = [](const WeightedFeature& a, const WeightedFeature& b) {
    return a.weight != b.weight ? a.weight > b.weight : a.text < b.text;
  };
  if (impl_->options.top_k > 0 && features->size() > impl_->options.top_k) {
    std::partial_sort(features->begin(),
                      features->begin() + static_cast<ptrdiff_t>(impl_->options.top_k),
                      features->end(), heavier);
    features->resize(impl_->options.top_k);
  } else {
    std::sort(features->begin(), features->end(), heavier);
  }
  return Status::Ok();
}

}  // namespace neardup
