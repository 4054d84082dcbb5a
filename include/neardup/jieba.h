// Jieba: a Chinese word segmenter and TF-IDF keyword extractor that reproduce Python jieba 0.42.1
// exactly (jieba.cut / jieba.lcut in default mode, and jieba.analyse.extract_tags).
//
// Both classes load jieba's own data files (dict.txt, finalseg/prob_*.py, analyse/idf.txt) from
// the installed python3-jieba package or from paths given in JiebaOptions. After Create they are
// immutable: one instance may be shared by any number of threads without locking.
#ifndef NEARDUP_JIEBA_H_
#define NEARDUP_JIEBA_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/export.h"
#include "neardup/status.h"

namespace neardup {

class FeatureExtractor;

// A word added on top of the main dictionary, as jieba's add_word(word, freq) does. Without a
// frequency jieba's suggest_freq(word) value is used (just high enough for the word to be cut
// out whole). A frequency of 0 deletes the word and forces the HMM to split it (del_word).
struct JiebaUserWord {
  std::string word;
  std::optional<int64_t> frequency;
};

// Where the data comes from. Every empty path means the file of the installed python3-jieba
// package (the directory chosen at build time, NEARDUP_JIEBA_DIR, normally
// /usr/lib/python3/dist-packages/jieba).
struct JiebaOptions {
  std::string dict_path;  // main dictionary, "word freq [tag]" per line (dict.txt)
  std::string hmm_dir;    // directory holding prob_start.py, prob_trans.py, prob_emit.py
  std::string idf_path;   // IDF table, "word idf" per line (analyse/idf.txt)
  // User dictionaries in jieba's load_userdict format ("word [freq] [tag]" per line), applied in
  // order after the main dictionary, then `user_words` in order.
  std::vector<std::string> user_dict_paths;
  std::vector<JiebaUserWord> user_words;
};

// The directory of the python3-jieba package this build uses by default.
NEARDUP_EXPORT std::string DefaultJiebaDirectory();

// The one place that knows jieba's data layout: dict_path = dir/dict.txt, hmm_dir = dir/finalseg,
// idf_path = dir/analyse/idf.txt (empty `dir`: DefaultJiebaDirectory()).
NEARDUP_EXPORT JiebaOptions JiebaOptionsForDirectory(const std::string& dir);

// Segments text into words exactly as jieba 0.42.1 does. Immutable after Create; thread-safe.
class NEARDUP_EXPORT JiebaSegmenter {
 public:
  // Loads the dictionary, the HMM parameters and the user dictionaries of `options` (idf_path is
  // ignored here). Errors name the file and line of bad input.
  static Result<std::shared_ptr<const JiebaSegmenter>> Create(const JiebaOptions& options);

  // The segmenter of the default python3-jieba data, loaded once on first use and then shared.
  static Result<std::shared_ptr<const JiebaSegmenter>> Default();

  // Appends to *tokens the words of jieba.cut(text, cut_all=False, HMM=hmm), in order. Each token
  // is a view into `text` (which must outlive the views); concatenated they give `text` back.
  // `text` should be valid UTF-8; any other byte is treated as a one-byte non-Chinese character,
  // never a crash.
  void Cut(std::string_view text, std::vector<std::string_view>* tokens, bool hmm = true) const;

  // Convenience form of Cut returning owned strings (like jieba.lcut).
  std::vector<std::string> LCut(std::string_view text, bool hmm = true) const;

  // The dictionary frequency of `word` (jieba's FREQ.get(word)): nullopt when the word is not in
  // the dictionary at all, 0 when it is only a prefix of a word or was deleted.
  std::optional<int64_t> Frequency(std::string_view word) const;

  // Sum of all dictionary frequencies (jieba's `total`).
  int64_t total_frequency() const;

  // Number of dictionary entries, including the zero-frequency prefixes jieba stores.
  size_t dictionary_size() const;

  ~JiebaSegmenter();
  JiebaSegmenter(const JiebaSegmenter&) = delete;
  JiebaSegmenter& operator=(const JiebaSegmenter&) = delete;

  class NEARDUP_HIDDEN Impl;  // internal

 private:
  friend class KeywordExtractor;
  friend class FeatureExtractor;  // cuts with its token filter built in
  explicit JiebaSegmenter(std::unique_ptr<Impl> impl);
  static Result<std::shared_ptr<const JiebaSegmenter>> LoadOrThrow(const JiebaOptions& options);
  std::unique_ptr<Impl> impl_;
};

// One keyword of a text and its weight.
struct Keyword {
  std::string word;
  double weight = 0;

  friend bool operator==(const Keyword&, const Keyword&) = default;
};

// A word of a text with the number of times it occurs (after keyword filtering).
struct TermCount {
  std::string_view word;  // view into the text given to CountTerms
  int64_t count = 0;
};

// TF-IDF keywords exactly as jieba.analyse.extract_tags(text, topK, withWeight=True) computes
// them, on top of a JiebaSegmenter. Immutable after Create; thread-safe.
class NEARDUP_EXPORT KeywordExtractor {
 public:
  // Loads the IDF table of `options.idf_path` (default analyse/idf.txt of python3-jieba) and uses
  // `segmenter` to cut texts.
  static Result<std::shared_ptr<const KeywordExtractor>> Create(
      std::shared_ptr<const JiebaSegmenter> segmenter, const JiebaOptions& options = {});

  // The extractor of the default python3-jieba data on JiebaSegmenter::Default(), loaded once.
  static Result<std::shared_ptr<const KeywordExtractor>> Default();

  // jieba's extract_tags(text, topK=top_k, withWeight=True): the words, weight = tf / total * idf
  // (computed exactly as jieba does), by decreasing weight, ties in order of first occurrence.
  // top_k == 0 returns every word.
  std::vector<Keyword> ExtractTags(std::string_view text, size_t top_k = 20) const;

  // As ExtractTags, but weight = raw count * idf (no division by the total count), ordered by
  // that weight, ties in order of first occurrence.
  std::vector<Keyword> ExtractTagsRaw(std::string_view text, size_t top_k = 20) const;

  // The words extract_tags would weigh, with their counts, in order of first occurrence: tokens of
  // Cut(text, hmm=true) of at least two characters that are not stop words. Views into `text`.
  void CountTerms(std::string_view text, std::vector<TermCount>* terms) const;

  // IDF of `word`, or median_idf() when the table lacks it (as jieba does).
  double Idf(std::string_view word) const;
  // Whether the IDF table holds `word`.
  bool HasIdf(std::string_view word) const;
  // sorted(idf values)[n / 2], jieba's default for unknown words.
  double median_idf() const;
  size_t idf_size() const;

  const JiebaSegmenter& segmenter() const;

  ~KeywordExtractor();
  KeywordExtractor(const KeywordExtractor&) = delete;
  KeywordExtractor& operator=(const KeywordExtractor&) = delete;

  class NEARDUP_HIDDEN Impl;  // internal

 private:
  KeywordExtractor(std::shared_ptr<const JiebaSegmenter> segmenter, std::unique_ptr<Impl> impl);
  // CountTerms, plus each term's IDF in *idfs when idfs is not null.
  void CountTermsAndIdfs(std::string_view text, std::vector<TermCount>* terms,
                         std::vector<double>* idfs) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace neardup

#endif  // NEARDUP_JIEBA_H_
