// IdfTable loading and IdfTableBuilder (the `neardup idf` learner); see idf_table.h and
// neardup/features.h.
#include "features/idf_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <mutex>
#include <vector>

#include "common/utf8.h"
#include "neardup/features.h"
#include "neardup/jieba.h"

namespace neardup {

std::string IdfTable::DefaultPath() { return JiebaOptionsForDirectory("").idf_path; }

Result<std::shared_ptr<const IdfTable>> IdfTable::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open IDF table " + path);
  auto table = std::make_shared<IdfTable>();
  std::string line;
  uint64_t line_number = 0;
  std::vector<double> values;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    auto fail = [&](const std::string& why) {
      return Status::Corruption(path + ":" + std::to_string(line_number) + ": " + why);
    };
    if (!utf8::IsValid(line)) return fail("invalid UTF-8");
    size_t space = line.find_last_of(" \t");
    if (space == std::string::npos || space == 0) return fail("expected \"word idf\"");
    std::string_view number(line.data() + space + 1, line.size() - space - 1);
    double idf = 0;
    auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), idf);
    if (ec != std::errc() || ptr != number.data() + number.size() || !std::isfinite(idf)) {
      return fail("IDF \"" + std::string(number) + "\" is not a number");
    }
    size_t word_end = line.find_last_not_of(" \t", space);
    std::string word = line.substr(0, word_end + 1);
    // jieba keeps the last value of a repeated word.
    auto [it, inserted] = table->idf_.insert_or_assign(std::move(word), idf);
    (void)it;
    (void)inserted;
  }
  if (in.bad()) return Status::IoError("error reading IDF table " + path);
  if (table->idf_.empty()) return Status::InvalidArgument("IDF table " + path + " is empty");
  values.reserve(table->idf_.size());
  double sum = 0;
  for (const auto& [word, idf] : table->idf_) {
    values.push_back(idf);
    sum += idf;
  }
  std::sort(values.begin(), values.end());
  table->median_ = values[values.size() / 2];
  table->mean_ = sum / static_cast<double>(values.size());
  return std::shared_ptr<const IdfTable>(std::move(table));
}

Result<std::shared_ptr<const IdfTable>> IdfTable::Default() {
  static std::mutex mutex;
  static std::shared_ptr<const IdfTable> table;
  std::lock_guard<std::mutex> lock(mutex);
  if (table == nullptr) {
    auto loaded = Load(DefaultPath());
    if (!loaded.ok()) return loaded.status();
    table = *loaded;
  }
  return table;
}

void IdfTableBuilder::AddDocument(const std::vector<std::string>& tokens) {
  ++document_count;
  std::vector<const std::string*> distinct;
  distinct.reserve(tokens.size());
  for (const std::string& token : tokens) distinct.push_back(&token);
  std::sort(distinct.begin(), distinct.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  const std::string* previous = nullptr;
  for (const std::string* token : distinct) {
    if (previous != nullptr && *previous == *token) continue;
    ++document_frequency_[*token];
    previous = token;
  }
}

void IdfTableBuilder::Merge(const IdfTableBuilder& other) {
  document_count += other.document_count;
  for (const auto& [word, count] : other.document_frequency_) document_frequency_[word] += count;
}

std::vector<std::pair<std::string, uint64_t>> IdfTableBuilder::SortedCounts() const {
  std::vector<std::pair<std::string, uint64_t>> counts(document_frequency_.begin(),
                                                       document_frequency_.end());
  std::sort(counts.begin(), counts.end());
  return counts;
}

std::string IdfTableBuilder::ToText(uint64_t min_document_frequency) const {
  std::string out;
  char buffer[64];
  for (const auto& [word, df] : SortedCounts()) {
    if (df < min_document_frequency) continue;
    // Words with spaces would break the "word idf" format (the idf is the last field).
    double idf = std::log(static_cast<double>(document_count) / static_cast<double>(df));
    auto [ptr, ec] =
        std::to_chars(buffer, buffer + sizeof(buffer), idf, std::chars_format::fixed, 8);
    out.append(word);
    out.push_back(' ');
    out.append(buffer, ec == std::errc() ? ptr : buffer);
    out.push_back('\n');
  }
  return out;
}

Status IdfTableBuilder::Write(const std::string& path, uint64_t min_document_frequency) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::IoError("cannot open " + path + " for writing");
  std::string text = ToText(min_document_frequency);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return Status::IoError("error writing " + path);
  return Status::Ok();
}

}  // namespace neardup
