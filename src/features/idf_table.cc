// The IDF table parser shared with jieba's keyword extractor, IdfTable loading and
// IdfTableBuilder (the `neardup idf` learner); see idf_table.h and neardup/features.h.
#include "features/idf_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/utf8.h"
#include "neardup/features.h"
#include "neardup/jieba.h"
#include "neardup/output_file.h"

namespace neardup {

std::string IdfTable::DefaultPath() { return JiebaOptionsForDirectory("").idf_path; }

namespace {

// Python str.splitlines() line boundaries.
bool IsLineBoundary(char32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
         cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

// Python float() of a decimal string (no hexadecimal forms).
bool ParsePythonFloat(std::string_view s, double* value) {
  std::string text;
  for (char c : s) {
    if (c != '_') text.push_back(c);
  }
  if (text.empty() || text.find_first_of("xX") != std::string::npos) return false;
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

}  // namespace

Status ParseIdfTable(std::string_view text, const std::string& path,
                     const std::function<void(std::string_view word, double idf)>& add) {
  const size_t bad_at = utf8::FindInvalid(text);
  if (bad_at != std::string_view::npos) {
    return Status::InvalidUtf8(path + ": invalid UTF-8 at byte " + std::to_string(bad_at));
  }
  size_t line_number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    // str.splitlines(): find the next boundary.
    size_t end = pos;
    size_t boundary_length = 0;
    while (end < text.size()) {
      const size_t len = utf8::ValidSequenceLength(text, end);
      const char32_t cp = utf8::Decode(text, end, len);
      if (IsLineBoundary(cp)) {
        boundary_length = (cp == '\r' && end + 1 < text.size() && text[end + 1] == '\n') ? 2 : len;
        break;
      }
      end += len;
    }
    ++line_number;
    const std::string_view line = utf8::StripPythonSpace(text.substr(pos, end - pos));
    pos = boundary_length == 0 ? text.size() : end + boundary_length;
    if (line.empty()) continue;
    const size_t space = line.find_last_of(" \t");
    const std::string_view word = space == std::string_view::npos
                                      ? std::string_view()
                                      : line.substr(0, line.find_last_not_of(" \t", space) + 1);
    double idf = 0;
    if (space == std::string_view::npos ||
        line.find_last_not_of(" \t", space) == std::string_view::npos ||
        !ParsePythonFloat(line.substr(space + 1), &idf) || !std::isfinite(idf)) {
      return Status::Corruption(path + ":" + std::to_string(line_number) +
                                ": expected 'word idf', got '" + std::string(line.substr(0, 200)) +
                                "'");
    }
    add(word, idf);
  }
  return Status::Ok();
}

Result<std::shared_ptr<const IdfTable>> IdfTable::Load(const std::string& path) {
  NoteInput(path);  // never an output of this command
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open IDF table " + path);
  std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::IoError("error reading IDF table " + path);
  auto table = std::make_shared<IdfTable>();
  NEARDUP_RETURN_IF_ERROR(ParseIdfTable(contents, path, [&](std::string_view word, double idf) {
    table->idf_.insert_or_assign(std::string(word), idf);  // jieba keeps the last value
  }));
  std::vector<double> values;
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

struct IdfTableBuilder::Impl {
  uint64_t document_count = 0;
  std::unordered_map<std::string, uint64_t> document_frequency;
};

IdfTableBuilder::IdfTableBuilder() : impl_(std::make_unique<Impl>()) {}
IdfTableBuilder::~IdfTableBuilder() = default;
IdfTableBuilder::IdfTableBuilder(IdfTableBuilder&&) noexcept = default;
IdfTableBuilder& IdfTableBuilder::operator=(IdfTableBuilder&&) noexcept = default;

uint64_t IdfTableBuilder::document_count() const { return impl_->document_count; }

void IdfTableBuilder::AddDocument(const std::vector<std::string>& tokens) {
  ++impl_->document_count;
  std::vector<const std::string*> distinct;
  distinct.reserve(tokens.size());
  for (const std::string& token : tokens) distinct.push_back(&token);
  std::sort(distinct.begin(), distinct.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  const std::string* previous = nullptr;
  for (const std::string* token : distinct) {
    if (previous != nullptr && *previous == *token) continue;
    ++impl_->document_frequency[*token];
    previous = token;
  }
}

void IdfTableBuilder::Merge(const IdfTableBuilder& other) {
  impl_->document_count += other.impl_->document_count;
  for (const auto& [word, count] : other.impl_->document_frequency)
    impl_->document_frequency[word] += count;
}

std::vector<std::pair<std::string, uint64_t>> IdfTableBuilder::SortedCounts() const {
  std::vector<std::pair<std::string, uint64_t>> counts(impl_->document_frequency.begin(),
                                                       impl_->document_frequency.end());
  std::sort(counts.begin(), counts.end());
  return counts;
}

std::string IdfTableBuilder::ToText(uint64_t min_document_frequency) const {
  std::string out;
  char buffer[64];
  for (const auto& [word, df] : SortedCounts()) {
    if (df < min_document_frequency) continue;
    // Words with spaces would break the "word idf" format (the idf is the last field).
    double idf = std::log(static_cast<double>(impl_->document_count) / static_cast<double>(df));
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
