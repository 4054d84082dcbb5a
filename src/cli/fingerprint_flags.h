// Shared pieces of every command that fingerprints or reads documents: the fingerprinting flags
// (normalisation, tokenizer, weighting, width, profile), the input flags and a batch reader over
// DocumentReader that keeps the input order.
//
// Internal header of the command-line tool; not thread-safe (one command runs at a time).
#ifndef NEARDUP_CLI_FINGERPRINT_FLAGS_H_
#define NEARDUP_CLI_FINGERPRINT_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/option_flags.h"
#include "cli/report.h"
#include "common/parallel.h"
#include "neardup/document_reader.h"
#include "neardup/fingerprinter.h"
#include "neardup/options.h"
#include "neardup/status.h"

namespace neardup::cli {

// Flags that choose the FingerprintOptions: the registry's fingerprint options
// (neardup/options.h).
class FingerprintFlags {
 public:
  // Declares the flags on `app` (--bits and --hash only `with_bits`).
  void Add(CLI::App* app, bool with_bits = true) {
    std::vector<std::string_view> skip;
    if (!with_bits) skip = {"bits", "hash"};
    flags_.Declare(app, kFingerprintScope, skip);
  }

  // The options given, checked; errors name the flag.
  Status Values(OptionValues* values) const { return flags_.Collect(values); }
  // Whether the option `key` (e.g. "top_k") was given.
  bool Given(std::string_view key) const { return flags_.Given(key); }
  const RegistryFlags& flags() const { return flags_; }

  // The FingerprintOptions the flags choose (the library's defaults for those not given).
  Status ToOptions(FingerprintOptions* options) const {
    OptionValues values(OptionNaming::kFlag);
    NEARDUP_RETURN_IF_ERROR(Values(&values));
    *options = FingerprintOptions{};
    return values.ApplyTo(options);
  }

 private:
  RegistryFlags flags_;
};

// The check of every thread-count flag: 0 (all cores) up to 65536, a negative count refused.
inline CLI::Validator ThreadCount() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        char* end = nullptr;
        const long long n = std::strtoll(value.c_str(), &end, 10);
        if (end == value.c_str() || *end != '\0') return "";  // the conversion names non-numbers
        if (n < 0 || n > 65536) return "must be 0 (all cores) to 65536, got " + value;
        return "";
      },
      "");
}

// Flags that choose the inputs and how they are read, the same in every command that reads
// documents (dedup, explain, eval, fingerprint, keywords, idf, index add): INPUT... and the
// registry's reading options.
class InputFlags {
 public:
  std::vector<std::string> inputs;

  // Declares the flags; `positional` adds the INPUT... arguments (required when `required`).
  void Add(CLI::App* app, bool positional = true, bool required = false) {
    if (positional) {
      auto* option = app->add_option("inputs", inputs,
                                     "JSONL files (.jsonl/.ndjson/.json), plain text files, "
                                     "directories, or - for standard input; gzip, zstd and xz are "
                                     "read directly" +
                                         std::string(required ? "" : " (default: -)"));
      if (required) option->required();
    }
    flags_.Declare(app, kReaderScope);
  }

  // The options given, checked; errors name the flag.
  Status Values(OptionValues* values) const { return flags_.Collect(values); }

  // The reader options of the flags (and of `fingerprint`'s --replace-invalid-utf8).
  Status ToReaderOptions(DocumentReaderOptions* options,
                         const FingerprintFlags* fingerprint = nullptr) const {
    OptionValues values(OptionNaming::kFlag);
    NEARDUP_RETURN_IF_ERROR(Values(&values));
    if (fingerprint != nullptr) NEARDUP_RETURN_IF_ERROR(fingerprint->Values(&values));
    return values.ApplyTo(options);
  }
  int threads() const { return IntValue("threads"); }
  bool strict() const { return flags_.Given("strict"); }

 private:
  int IntValue(std::string_view key) const {
    OptionValues values(OptionNaming::kFlag);
    if (!Values(&values).ok()) return 0;
    const OptionValue* value = values.Find(key);
    return value != nullptr ? static_cast<int>(std::get<int64_t>(*value)) : 0;
  }

  RegistryFlags flags_;
};

// One input document.
struct InputDocument {
  std::string id;
  std::string text;
  std::string location;  // "file:line" or "file"
};

// Documents a command reads and processes in parallel at a time.
inline constexpr size_t kBatchDocuments = 2048;

// Reads documents in input order through DocumentReader. Malformed records are reported on
// stderr (neardup: warning: file:line: why (skipped)) and skipped.
class InputBatchReader {
 public:
  // Reads the inputs of `flags` (standard input when none), with the reading options of `flags`
  // and `fingerprint` (--replace-invalid-utf8).
  static Result<std::unique_ptr<InputBatchReader>> Open(const InputFlags& flags,
                                                        const FingerprintFlags* fingerprint) {
    std::unique_ptr<InputBatchReader> reader(new InputBatchReader());
    reader->inputs_ = flags.inputs;
    if (reader->inputs_.empty()) reader->inputs_.push_back("-");
    reader->threads_ = flags.threads();
    DocumentReaderOptions options;
    NEARDUP_RETURN_IF_ERROR(flags.ToReaderOptions(&options, fingerprint));
    reader->strict_ = options.strict;
    options.on_warning = reader->warnings_.Callback();
    auto opened = DocumentReader::Open(reader->inputs_, std::move(options));
    if (!opened.ok()) return opened.status();
    reader->documents_ = std::move(*opened);
    return reader;
  }

  // Appends up to `max_documents` documents to *batch (cleared first). Returns false at the end.
  Result<bool> NextBatch(size_t max_documents, std::vector<InputDocument>* batch) {
    batch->clear();
    while (batch->size() < max_documents) {
      InputDocument doc;
      auto got = NextDocument(&doc);
      if (!got.ok()) return got.status();
      if (!*got) break;
      batch->push_back(std::move(doc));
    }
    documents_read_ += batch->size();
    return !batch->empty();
  }

  // Writes the output lines of a processed batch to standard output in input order (`lines` may
  // be empty when the command writes nothing per document). A document whose processing failed is
  // reported and skipped or, with --strict, ends the command: then it prints the error and
  // returns false.
  bool WriteBatch(const std::vector<InputDocument>& batch, const std::vector<Status>& errors,
                  const std::vector<std::string>& lines) {
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!errors[i].ok()) {
        if (strict_) {
          PrintError(batch[i].location + ": " + errors[i].message());
          return false;
        }
        ReportSkipped(batch[i].location, errors[i]);
        continue;
      }
      if (!lines.empty()) std::fwrite(lines[i].data(), 1, lines[i].size(), stdout);
    }
    return true;
  }

  // Reads every document, runs `process(document, &line)` on the flags' thread count and writes
  // the lines to standard output in input order, whatever the thread count. `process` must be safe
  // to call concurrently. Returns the exit status: 0, or 1 after printing the error. Skip counts
  // are printed at the end; reading no document is an error.
  using ProcessFunction = std::function<Status(const InputDocument&, std::string* line)>;
  int ProcessAll(const ProcessFunction& process) {
    std::vector<InputDocument> batch;
    std::vector<std::string> lines;
    std::vector<Status> errors;
    for (;;) {
      auto more = NextBatch(kBatchDocuments, &batch);
      if (!more.ok()) {
        PrintError(more.status());
        return 1;
      }
      if (!*more) break;
      lines.assign(batch.size(), std::string());
      errors.assign(batch.size(), Status::Ok());
      ParallelFor(batch.size(), threads_, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) errors[i] = process(batch[i], &lines[i]);
      });
      if (!WriteBatch(batch, errors, lines)) return 1;
    }
    if (std::fflush(stdout) != 0) {
      PrintError("error writing standard output");
      return 1;
    }
    return Finish();
  }

  // Prints the skip and fallback counts; returns 1 (after the error) if no document was read.
  int Finish() {
    std::map<std::string, uint64_t> skipped = documents_->skipped();
    for (const auto& [reason, count] : failed_) skipped[reason] += count;
    WarningPrinter::PrintTotals(skipped, documents_->fallbacks());
    if (documents_read_ == 0) {
      PrintError(NothingRead(skipped));
      return 1;
    }
    return 0;
  }

  // The expanded input files (DocumentReader::files()).
  const std::vector<std::string>& files() const { return documents_->files(); }

  // Reports a record that failed later (e.g. while fingerprinting) the same way.
  void ReportSkipped(const std::string& location, const Status& status) {
    ++failed_[Fingerprinter::IsNoFeatures(status) ? std::string("no_features")
                                                  : std::string(StatusCodeName(status.code()))];
    warnings_.Callback()(location + ": " + status.message() + " (skipped)");
  }

 private:
  InputBatchReader() = default;

  Result<bool> NextDocument(InputDocument* doc) {
    Document document;
    auto got = documents_->Next(&document);
    if (!got.ok()) return got.status();
    if (!*got) return false;
    doc->id = std::move(document.id);
    doc->text = std::move(document.text);
    doc->location = std::move(document.location);
    return true;
  }

  std::vector<std::string> inputs_;
  int threads_ = 0;
  bool strict_ = false;
  std::unique_ptr<DocumentReader> documents_;
  WarningPrinter warnings_;
  std::map<std::string, uint64_t> failed_;
  uint64_t documents_read_ = 0;
};

}  // namespace neardup::cli

#endif  // NEARDUP_CLI_FINGERPRINT_FLAGS_H_
