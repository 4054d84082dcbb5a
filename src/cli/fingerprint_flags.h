// Shared pieces of the `fingerprint`, `keywords` and `idf` commands: the fingerprinting flags
// (normalisation, tokenizer, weighting, width, profile), the input flags and a batch reader over
// JSONL / plain-text inputs that keeps the input order.
//
// Internal header of the command-line tool; not thread-safe (one command runs at a time).
#ifndef NEARDUP_CLI_FINGERPRINT_FLAGS_H_
#define NEARDUP_CLI_FINGERPRINT_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

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

  void Add(CLI::App* app, bool with_bits = true) {
    app->add_option("--profile", profile,
                    "neardup (the options below) | yanyiwu (reproduce yanyiwu/simhash: jieba "
                    "keywords, Jenkins hash; default --top-k 5)")
        ->check(CLI::IsMember({"neardup", "yanyiwu"}));
    app->add_option("--tokenizer", tokenizer,
                    "auto (jieba for Chinese, ICU words otherwise) | "
                    "jieba | icu | char")
        ->check(CLI::IsMember({"auto", "jieba", "icu", "char"}));
    app->add_option("--shingle", shingle, "words per feature (word tokenizers; default 2)");
    app->add_option("--ngram", ngram, "characters per feature for --tokenizer char (default 4)");
    app->add_option("--weighting", weighting, "tf (default) | tfidf | uniform")
        ->check(CLI::IsMember({"tf", "tfidf", "uniform"}));
    app->add_option("--top-k", top_k, "keep only the K heaviest features (0 = all)");
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
};

// Flags that choose the inputs.
struct InputFlags {
  std::vector<std::string> inputs;
  std::string id_field = "id";
  std::string text_field = "text";
  bool lines = false;
  bool strict = false;
  int threads = 0;

  void Add(CLI::App* app) {
    app->add_option("inputs", inputs,
                    "JSONL files (.jsonl/.ndjson, optionally .gz/.zst), plain text files, "
                    "directories, or - for standard input (default: -)");
    app->add_option("--id-field", id_field, "JSONL field holding the document id");
    app->add_option("--text-field", text_field, "JSONL field holding the text");
    app->add_flag("--lines", lines,
                  "inputs are plain text with one document per line (id: line number)");
    app->add_flag("--strict", strict, "stop at the first malformed record (exit 1)");
    app->add_option("--threads,-j", threads, "worker threads (default: all cores)");
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

// Reads documents in input order, either through DocumentReader or one per line of plain text.
// Malformed records are reported on stderr (file:line: why) and skipped.
class InputBatchReader {
 public:
  static Result<std::unique_ptr<InputBatchReader>> Open(const InputFlags& flags) {
    std::unique_ptr<InputBatchReader> reader(new InputBatchReader());
    reader->flags_ = flags;
    if (reader->flags_.inputs.empty()) reader->flags_.inputs.push_back("-");
    if (!flags.lines) {
      DocumentReaderOptions options;
      options.id_field = flags.id_field;
      options.text_field = flags.text_field;
      options.strict = flags.strict;
      InputBatchReader* raw = reader.get();
      options.on_warning = [raw](const std::string& message) {
        ++raw->skipped_;
        std::fprintf(stderr, "warning: %s (skipped)\n", message.c_str());
      };
      auto opened = DocumentReader::Open(reader->flags_.inputs, std::move(options));
      if (!opened.ok()) return opened.status();
      reader->documents_ = std::move(*opened);
    }
    return reader;
  }

  // Appends up to `max_documents` documents to *batch (cleared first). Returns false at the end.
  Result<bool> NextBatch(size_t max_documents, std::vector<InputDocument>* batch) {
    batch->clear();
    while (batch->size() < max_documents) {
      InputDocument doc;
      auto got = flags_.lines ? NextLine(&doc) : NextDocument(&doc);
      if (!got.ok()) return got.status();
      if (!*got) break;
      batch->push_back(std::move(doc));
    }
    return !batch->empty();
  }

  // Writes the output lines of a processed batch to standard output in input order (`lines` may
  // be empty when the command writes nothing per document). A document whose processing failed is
  // reported and skipped or, with --strict, ends the command: then it prints
  // "<command>: <location>: <why>" and returns false.
  bool WriteBatch(const char* command, const std::vector<InputDocument>& batch,
                  const std::vector<Status>& errors, const std::vector<std::string>& lines) {
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!errors[i].ok()) {
        if (flags_.strict) {
          std::fprintf(stderr, "%s: %s: %s\n", command, batch[i].location.c_str(),
                       errors[i].message().c_str());
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
  // to call concurrently. Returns the exit status: 0, or 1 after printing "<command>: <why>".
  using ProcessFunction = std::function<Status(const InputDocument&, std::string* line)>;
  int ProcessAll(const char* command, const ProcessFunction& process) {
    std::vector<InputDocument> batch;
    std::vector<std::string> lines;
    std::vector<Status> errors;
    for (;;) {
      auto more = NextBatch(kBatchDocuments, &batch);
      if (!more.ok()) {
        std::fprintf(stderr, "%s: %s\n", command, more.status().message().c_str());
        return 1;
      }
      if (!*more) break;
      lines.assign(batch.size(), std::string());
      errors.assign(batch.size(), Status::Ok());
      ParallelFor(batch.size(), flags_.threads, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) errors[i] = process(batch[i], &lines[i]);
      });
      if (!WriteBatch(command, batch, errors, lines)) return 1;
    }
    if (std::fflush(stdout) != 0) {
      std::fprintf(stderr, "%s: error writing standard output\n", command);
      return 1;
    }
    return 0;
  }

  uint64_t skipped() const { return skipped_; }
  // Reports a record that failed later (e.g. while fingerprinting) the same way.
  void ReportSkipped(const std::string& location, const Status& status) {
    ++skipped_;
    std::fprintf(stderr, "warning: %s: %s (skipped)\n", location.c_str(), status.message().c_str());
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

  Result<bool> NextLine(InputDocument* doc) {
    for (;;) {
      if (stream_ == nullptr) {
        if (next_input_ >= flags_.inputs.size()) return false;
        current_name_ = flags_.inputs[next_input_++];
        line_number_ = 0;
        if (current_name_ == "-") {
          stream_ = &std::cin;
        } else {
          file_ = std::make_unique<std::ifstream>(current_name_, std::ios::binary);
          if (!*file_) return Status::NotFound("cannot open " + current_name_);
          stream_ = file_.get();
        }
      }
      std::string line;
      if (!std::getline(*stream_, line)) {
        if (stream_->bad()) return Status::IoError("error reading " + current_name_);
        stream_ = nullptr;
        file_.reset();
        continue;
      }
      ++line_number_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      doc->location = current_name_ + ":" + std::to_string(line_number_);
      doc->id = flags_.inputs.size() == 1 ? std::to_string(line_number_) : doc->location;
      doc->text = std::move(line);
      return true;
    }
  }

  InputFlags flags_;
  std::unique_ptr<DocumentReader> documents_;
  size_t next_input_ = 0;
  std::istream* stream_ = nullptr;
  std::unique_ptr<std::ifstream> file_;
  std::string current_name_;
  uint64_t line_number_ = 0;
  uint64_t skipped_ = 0;
};

}  // namespace neardup::cli

#endif  // NEARDUP_CLI_FINGERPRINT_FLAGS_H_
