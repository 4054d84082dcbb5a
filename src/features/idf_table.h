// IdfTable: an IDF table in jieba's "word idf" line format, with the median and mean IDF used for
// words the table lacks (jieba uses the median, cppjieba the mean).
//
// Internal header. Immutable after Load; safe to share between threads.
#ifndef NEARDUP_FEATURES_IDF_TABLE_H_
#define NEARDUP_FEATURES_IDF_TABLE_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/string_hash.h"
#include "neardup/status.h"

namespace neardup {

// The one parser of IDF tables, for IdfTable and jieba's KeywordExtractor: calls add(word, idf) for
// every line of `contents` in order (a repeated word is added again; jieba keeps the last value).
// Lines are Python's str.splitlines() stripped as str.strip() does, as jieba's IDFLoader reads
// them; a line is "word idf" where the idf is the text after the last space or tab, a finite
// Python float() literal, and the word is what comes before it (trimmed). Blank lines are skipped.
// Errors: kInvalidUtf8 "path: invalid UTF-8 at byte N", kCorruption "path:line: ...".
Status ParseIdfTable(std::string_view contents, const std::string& path,
                     const std::function<void(std::string_view word, double idf)>& add);

class IdfTable {
 public:
  // Parses `path`; kNotFound if it cannot be opened, kCorruption naming "path:line" for a line
  // that is not "word number", kInvalidArgument if the table is empty.
  static Result<std::shared_ptr<const IdfTable>> Load(const std::string& path);
  // The table of the default jieba data (analyse/idf.txt), loaded once and shared.
  static Result<std::shared_ptr<const IdfTable>> Default();
  // Path of the default table.
  static std::string DefaultPath();

  // IDF of `word`, or median() if absent.
  double Idf(std::string_view word) const {
    auto it = idf_.find(word);
    return it == idf_.end() ? median_ : it->second;
  }
  // Pointer to the IDF of `word`, or nullptr if absent.
  const double* Find(std::string_view word) const {
    auto it = idf_.find(word);
    return it == idf_.end() ? nullptr : &it->second;
  }
  double median() const { return median_; }  // sorted values [n / 2], as jieba
  double mean() const { return mean_; }      // sum / n, as cppjieba's idfAverage_
  size_t size() const { return idf_.size(); }

 private:
  std::unordered_map<std::string, double, StringHash, std::equal_to<>> idf_;
  double median_ = 0;
  double mean_ = 0;
};

}  // namespace neardup

#endif  // NEARDUP_FEATURES_IDF_TABLE_H_
