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

#include "cli/report.h"
#include "common/parallel.h"
#include "neardup/document_reader.h"
#include "neardup/fingerprinter.h"
#include "neardup/status.h"

namespace neardup::cli {

// Flags that choose the FingerprintOptions.
struct FingerprintFlags {
  std::string profile = "neardup";
  std::string tokenizer = "auto";
  std::string weighting;  // empty: library default
  int shingle = -1;       // -1: library default
  int ngram = -1;
  int top_k = -1;
  int bits = 64;
  std::string hash = "xxh3";
  bool no_nfkc = false;
  bool no_casefold = false;
  bool no_t2s = false;
  bool no_whitespace = false;
  bool keep_html = false;
  bool replace_invalid = false;
  std::string idf_path;
  std::string jieba_dir;

  // Declares the flags on `app` (--bits and --hash only `with_bits`).
  void Add(CLI::App* app, bool with_bits = true) {
    declared_.push_back(app);
    app->add_option("--profile", profile,
                    "neardup (the options below) | yanyiwu (reproduce yanyiwu/simhash: jieba "
                    "keywords, Jenkins hash; default --top-k 5)")
        ->check(CLI::IsMember({"neardup", "yanyiwu"}));
    app->add_option("--tokenizer", tokenizer,
                    "auto (jieba for Chinese, ICU words otherwise) | "
                    "jieba | icu | char")
        ->check(CLI::IsMember({"auto", "jieba", "icu", "char"}));
    app->add_option("--shingle", shingle, "words per feature (word tokenizers)")->default_str("2");
    app->add_option("--ngram", ngram, "characters per feature for --tokenizer char")
        ->default_str("4");
    app->add_option("--weighting", weighting, "tf | tfidf | uniform")
        ->check(CLI::IsMember({"tf", "tfidf", "uniform"}))
        ->default_str("tf");
    app->add_option("--top-k", top_k,
                    "keep only the K heaviest features (0 = all; keywords: 20, yanyiwu: 5)")
        ->default_str("0");
    if (with_bits) {
      app->add_option("--bits", bits, "fingerprint width: 64 or 128")
          ->check(CLI::IsMember({64, 128}));
      app->add_option("--hash", hash, "feature hash: xxh3 | jenkins")
          ->check(CLI::IsMember({"xxh3", "jenkins"}));
    }
    app->add_flag("--no-nfkc", no_nfkc, "skip Unicode NFKC normalisation");
    app->add_flag("--no-casefold,--no-case-fold", no_casefold, "skip Unicode case folding");
    app->add_flag("--no-t2s", no_t2s, "skip Traditional -> Simplified Chinese (OpenCC)");
    app->add_flag("--no-whitespace-folding", no_whitespace, "keep whitespace as it is");
    app->add_flag("--keep-markup,--no-strip-markup", keep_html,
                  "do not strip HTML/XML markup or decode entities (stripped by default)");
    app->add_flag("--replace-invalid-utf8", replace_invalid,
                  "replace invalid UTF-8 with U+FFFD instead of rejecting the document");
    app->add_option("--idf", idf_path, "IDF table (\"word idf\" lines, e.g. from `neardup idf`)");
    app->add_option("--jieba-dir", jieba_dir, "directory of jieba's dict.txt, finalseg/, analyse/");
  }

  // Whether the flag named `name` (e.g. "--shingle") was given on the command line; false when the
  // flags were never declared on a parsed app (the Python binding sets the fields directly).
  bool Given(const char* name) const {
    for (const std::string& given : given_) {
      if (given == name) return true;
    }
    for (const CLI::App* app : declared_) {
      const CLI::Option* option = app->get_option_no_throw(name);
      if (option != nullptr && option->count() > 0) return true;
    }
    return false;
  }

  // Records that the flag named `name` (its first name, e.g. "--keep-markup") was set by a caller
  // without a command line (the Python binding), for Given().
  void MarkGiven(std::string name) { given_.push_back(std::move(name)); }

  // Sets every flag that was not given from `recorded` (e.g. the options a store was created with),
  // so ToOptions() then means "the recorded options, changed by the flags given".
  void FillUnsetFrom(const FingerprintOptions& recorded) {
    static const std::map<Tokenizer, std::string> kTokenizerNames = {
        {Tokenizer::kAuto, "auto"},
        {Tokenizer::kJieba, "jieba"},
        {Tokenizer::kIcuWord, "icu"},
        {Tokenizer::kCharNgram, "char"}};
    static const std::map<Weighting, std::string> kWeightingNames = {
        {Weighting::kTermFrequency, "tf"},
        {Weighting::kTfIdf, "tfidf"},
        {Weighting::kUniform, "uniform"}};
    const bool yanyiwu = recorded.profile == HashProfile::kYanyiwuSimhash;
    if (!Given("--profile")) profile = yanyiwu ? "yanyiwu" : "neardup";
    if (!Given("--tokenizer")) tokenizer = kTokenizerNames.at(recorded.features.tokenizer);
    if (!Given("--weighting")) weighting = kWeightingNames.at(recorded.features.weighting);
    if (!Given("--shingle")) shingle = recorded.features.shingle_size;
    if (!Given("--ngram")) ngram = recorded.features.char_ngram_size;
    if (!Given("--top-k")) top_k = static_cast<int>(recorded.features.top_k);
    if (!Given("--bits")) bits = recorded.bits;
    if (!Given("--hash")) hash = recorded.hash == FeatureHash::kJenkinsLookup3 ? "jenkins" : "xxh3";
    if (!Given("--no-nfkc")) no_nfkc = !recorded.normalize.nfkc;
    if (!Given("--no-casefold")) no_casefold = !recorded.normalize.case_fold;
    if (!Given("--no-t2s")) no_t2s = !recorded.normalize.traditional_to_simplified;
    if (!Given("--no-whitespace-folding")) no_whitespace = !recorded.normalize.fold_whitespace;
    if (!Given("--keep-markup")) keep_html = !recorded.normalize.strip_markup;
    if (!Given("--idf")) idf_path = recorded.features.idf_path;
    if (!Given("--jieba-dir")) jieba_dir = recorded.features.jieba_dir;
  }

  // The flag that sets the canonical option `key` of FingerprintOptionsToString ("" if none does).
  static const char* FlagForOption(std::string_view key) {
    static const std::map<std::string_view, const char*> kFlags = {
        {"profile", "--profile"},
        {"bits", "--bits"},
        {"hash", "--hash"},
        {"tokenizer", "--tokenizer"},
        {"shingle", "--shingle"},
        {"ngram", "--ngram"},
        {"weighting", "--weighting"},
        {"top_k", "--top-k"},
        {"idf", "--idf"},
        {"jieba_dir", "--jieba-dir"},
        {"strip_markup", "--keep-markup"},
        {"nfkc", "--no-nfkc"},
        {"case_fold", "--no-casefold"},
        {"t2s", "--no-t2s"},
        {"fold_whitespace", "--no-whitespace-folding"}};
    auto it = kFlags.find(key);
    return it == kFlags.end() ? "" : it->second;
  }

  // Fills *options; InvalidArgument for contradictory flags.
  Status ToOptions(FingerprintOptions* options) const {
    if (profile == "yanyiwu") {
      *options = YanyiwuSimhashOptions(top_k >= 0 ? static_cast<size_t>(top_k) : 5);
      options->features.idf_path = idf_path;
      options->features.jieba_dir = jieba_dir;
      options->normalize.replace_invalid_utf8 = replace_invalid;
      if (bits != 64) return Status::InvalidArgument("--profile yanyiwu is 64-bit only");
      return Status::Ok();
    }
    FingerprintOptions result;
    static const std::map<std::string, Tokenizer> kTokenizers = {{"auto", Tokenizer::kAuto},
                                                                 {"jieba", Tokenizer::kJieba},
                                                                 {"icu", Tokenizer::kIcuWord},
                                                                 {"char", Tokenizer::kCharNgram}};
    static const std::map<std::string, Weighting> kWeightings = {{"tf", Weighting::kTermFrequency},
                                                                 {"tfidf", Weighting::kTfIdf},
                                                                 {"uniform", Weighting::kUniform}};
    result.features.tokenizer = kTokenizers.at(tokenizer);
    if (!weighting.empty()) result.features.weighting = kWeightings.at(weighting);
    if (shingle >= 0) result.features.shingle_size = shingle;
    if (ngram >= 0) result.features.char_ngram_size = ngram;
    if (top_k >= 0) result.features.top_k = static_cast<size_t>(top_k);
    result.features.idf_path = idf_path;
    result.features.jieba_dir = jieba_dir;
    result.bits = bits;
    result.hash = hash == "jenkins" ? FeatureHash::kJenkinsLookup3 : FeatureHash::kXxh3;
    result.normalize.nfkc = !no_nfkc;
    result.normalize.case_fold = !no_casefold;
    result.normalize.traditional_to_simplified = !no_t2s;
    result.normalize.fold_whitespace = !no_whitespace;
    result.normalize.strip_markup = !keep_html;
    result.normalize.replace_invalid_utf8 = replace_invalid;
    *options = std::move(result);
    return Status::Ok();
  }

 private:
  std::vector<std::string> given_;         // flags set through MarkGiven
  std::vector<const CLI::App*> declared_;  // the apps (subcommands) Add() declared the flags on
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
// documents (dedup, explain, eval, fingerprint, keywords, idf, index add).
struct InputFlags {
  std::vector<std::string> inputs;
  std::string id_field = "id";
  std::string text_field = "text";
  bool lines = false;
  bool stdin_text = false;
  bool strict = false;
  int threads = 0;
  bool allow_invalid_utf8_text = false;  // set from --replace-invalid-utf8, not a flag itself

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
    AddReadingFlags(app);
    app->add_option("-j,--threads", threads, "worker threads (0 = all cores)")
        ->check(ThreadCount());
  }
  void AddReadingFlags(CLI::App* app) {
    app->add_option("--id-field", id_field,
                    "JSONL field holding the document id; a dotted path reads nested objects "
                    "(meta.id)");
    app->add_option("--text-field", text_field,
                    "JSONL field holding the text; a dotted path reads nested objects "
                    "(content.text)");
    app->add_flag("--lines", lines,
                  "every input is plain text with one document per line (id: file:line)");
    app->add_flag("--stdin-text", stdin_text,
                  "standard input is one plain-text document, not JSONL");
    app->add_flag("--strict", strict,
                  "stop (exit 1) at the first malformed record, missing id or shared id instead "
                  "of warning and going on");
  }
  void ToReaderOptions(DocumentReaderOptions* options) const {
    options->id_field = id_field;
    options->text_field = text_field;
    options->strict = strict;
    options->stdin_is_text = stdin_text;
    options->text_lines = lines;
    options->allow_invalid_utf8_text = allow_invalid_utf8_text;
  }
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
  static Result<std::unique_ptr<InputBatchReader>> Open(const InputFlags& flags) {
    std::unique_ptr<InputBatchReader> reader(new InputBatchReader());
    reader->flags_ = flags;
    if (reader->flags_.inputs.empty()) reader->flags_.inputs.push_back("-");
    DocumentReaderOptions options;
    reader->flags_.ToReaderOptions(&options);
    options.on_warning = reader->warnings_.Callback();
    auto opened = DocumentReader::Open(reader->flags_.inputs, std::move(options));
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
        if (flags_.strict) {
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
      ParallelFor(batch.size(), flags_.threads, [&](size_t begin, size_t end) {
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

  InputFlags flags_;
  std::unique_ptr<DocumentReader> documents_;
  WarningPrinter warnings_;
  std::map<std::string, uint64_t> failed_;
  uint64_t documents_read_ = 0;
};

}  // namespace neardup::cli

#endif  // NEARDUP_CLI_FINGERPRINT_FLAGS_H_
