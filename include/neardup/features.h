// Features: the second stage of fingerprinting, turning normalised text into weighted features
// (words, word shingles or character n-grams with TF-IDF, term-frequency or uniform weights).
//
// Chinese is segmented by the jieba segmenter (neardup/jieba.h), every other script by ICU word
// boundaries (which also segment Thai, Japanese, Khmer, Lao and Burmese with dictionaries).
//
// Thread safety: a FeatureExtractor is immutable after Create(); Extract() may be called from any
// number of threads at once.
#ifndef NEARDUP_FEATURES_H_
#define NEARDUP_FEATURES_H_

#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "neardup/export.h"
#include "neardup/status.h"

namespace neardup {

// One feature and its weight (weights are > 0).
struct WeightedFeature {
  std::string text;
  double weight = 0;
  friend bool operator==(const WeightedFeature&, const WeightedFeature&) = default;
};

enum class Tokenizer {
  kAuto,       // jieba for text with Han characters and no kana, ICU words for everything else
  kJieba,      // jieba words (HMM on) for any text; non-Han runs become words as jieba splits them
  kIcuWord,    // ICU BreakIterator word segmentation (all scripts, dictionary-based for CJK/Thai)
  kCharNgram,  // overlapping n-grams of the letters/digits (whitespace and punctuation removed)
};

enum class Weighting {
  kTfIdf,          // term frequency x IDF (jieba's table or FeatureOptions::idf_path)
  kTermFrequency,  // occurrences in the document
  kUniform,        // every distinct feature weighs 1
};

struct NEARDUP_EXPORT FeatureOptions {
  Tokenizer tokenizer = Tokenizer::kAuto;
  // Word tokenizers: features are runs of `shingle_size` consecutive words (1 = single words).
  int shingle_size = 2;
  // kCharNgram: characters per n-gram.
  int char_ngram_size = 4;
  Weighting weighting = Weighting::kTermFrequency;
  // Use 1 + ln(tf) instead of tf (damps repeated boilerplate).
  bool sublinear_tf = true;
  // Keep only the `top_k` heaviest features (ties broken by feature text); 0 keeps all.
  size_t top_k = 0;
  // Drop single-character words (jieba's keyword convention) before shingling. CJK single
  // characters carry most of the content of classical text, so this is off by default.
  bool drop_single_char_words = false;
  // Drop jieba's stop words (the analyse stop-word list) before shingling.
  bool drop_stop_words = false;
  // IDF table in jieba's "word idf" line format; empty means jieba's own table. Shingles get the
  // mean IDF of their words; unknown words get the table's median IDF.
  std::string idf_path;
  // Directory of the jieba dictionaries; empty means the library default.
  std::string jieba_dir;
  // HMM for unknown Chinese words in jieba segmentation.
  bool jieba_hmm = true;
  // Shortcuts with the same output as the plain path: a hand-written word splitter instead of
  // ICU's BreakIterator for text in space-separated scripts (ICU still segments Han, kana,
  // Hangul, Thai, Lao, Khmer, Myanmar, emoji ZWJ sequences), and (in Fingerprinter) features
  // hashed straight from token views. false runs the plain ICU path (the reference for
  // differential tests and benchmarks).
  bool fast_paths = true;
};

// The weight Extract gives a feature seen `count` times in a text whose IDF is `idf` (pass 1
// without TF-IDF): 1 for kUniform, else count or 1 + ln(count) (sublinear_tf), times idf.
inline double FeatureWeight(const FeatureOptions& options, double count, double idf = 1) {
  if (options.weighting == Weighting::kUniform) return 1;
  double weight = options.sublinear_tf ? 1 + std::log(count) : count;
  return options.weighting == Weighting::kTfIdf ? weight * idf : weight;
}

class NEARDUP_EXPORT FeatureExtractor {
 public:
  // Loads what the options need (jieba dictionary, IDF table). Fails with kNotFound /
  // kCorruption naming the file, or kInvalidArgument for an out-of-range option.
  static Result<std::unique_ptr<FeatureExtractor>> Create(const FeatureOptions& options);
  ~FeatureExtractor();
  FeatureExtractor(const FeatureExtractor&) = delete;
  FeatureExtractor& operator=(const FeatureExtractor&) = delete;

  // Appends the distinct weighted features of `text` (valid UTF-8, normally normalised) to
  // *features after clearing it, heaviest first (ties by feature text). Text without any word or
  // character feature yields none.
  Status Extract(std::string_view text, std::vector<WeightedFeature>* features) const;

  // The tokens (before shingling and weighting) the configured tokenizer produces for `text`.
  Status Tokenize(std::string_view text, std::vector<std::string>* tokens) const;

  // The same tokens without copies: views into `text`, or into *storage for character n-grams.
  // *tokens and *storage are replaced (their capacity is reused from call to call).
  Status TokenViews(std::string_view text, std::vector<std::string_view>* tokens,
                    std::string* storage) const;

  // IDF of one word under the configured table (the median for unknown words).
  double Idf(std::string_view word) const;

  const FeatureOptions& options() const;

 private:
  struct NEARDUP_HIDDEN Impl;
  explicit FeatureExtractor(const FeatureOptions& options);
  std::unique_ptr<Impl> impl_;
};

// Writes an IDF table learned from documents: idf(w) = ln(N / df(w)) over `document_count`
// documents, one "word idf" line per word with df >= min_document_frequency, sorted by word.
class NEARDUP_EXPORT IdfTableBuilder {
 public:
  IdfTableBuilder();
  ~IdfTableBuilder();
  IdfTableBuilder(IdfTableBuilder&&) noexcept;
  IdfTableBuilder& operator=(IdfTableBuilder&&) noexcept;
  IdfTableBuilder(const IdfTableBuilder&) = delete;
  IdfTableBuilder& operator=(const IdfTableBuilder&) = delete;

  // Counts each distinct token of one document once.
  void AddDocument(const std::vector<std::string>& tokens);
  // Merges another builder's counts (for per-thread builders).
  void Merge(const IdfTableBuilder& other);
  // Writes the table to `path` (kIoError naming the path on failure).
  Status Write(const std::string& path, uint64_t min_document_frequency = 1) const;
  // The table as text, in the same format.
  std::string ToText(uint64_t min_document_frequency = 1) const;

  // Documents added (and merged) so far.
  uint64_t document_count() const;
  // (word, document frequency) of every word seen, sorted by word.
  std::vector<std::pair<std::string, uint64_t>> SortedCounts() const;

 private:
  struct NEARDUP_HIDDEN Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace neardup

#endif  // NEARDUP_FEATURES_H_
