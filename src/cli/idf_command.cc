// `neardup idf [INPUT...] -o FILE`: learns an IDF table from a corpus and writes it in jieba's
// "word idf" format (usable with --idf and FeatureOptions::idf_path).
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/fingerprint_flags.h"
#include "common/parallel.h"
#include "neardup/features.h"
#include "neardup/text.h"

namespace neardup::cli {
namespace {

struct IdfCommandArgs {
  FingerprintFlags fingerprint;
  InputFlags input;
  std::string output = "-";
  uint64_t min_df = 2;
};

int RunIdfCommand(const IdfCommandArgs& args) {
  FingerprintOptions options;
  Status status = args.fingerprint.ToOptions(&options);
  if (!status.ok()) {
    std::fprintf(stderr, "neardup idf: %s\n", status.message().c_str());
    return kExitUsage;
  }
  options.features.shingle_size = 1;  // IDF is per word
  options.features.weighting = Weighting::kTermFrequency;
  options.features.idf_path.clear();
  auto normalizer = TextNormalizer::Create(options.normalize);
  if (!normalizer.ok()) {
    std::fprintf(stderr, "neardup idf: %s\n", normalizer.status().ToString().c_str());
    return kExitFailure;
  }
  auto extractor = FeatureExtractor::Create(options.features);
  if (!extractor.ok()) {
    std::fprintf(stderr, "neardup idf: %s\n", extractor.status().ToString().c_str());
    return kExitFailure;
  }
  auto reader = InputBatchReader::Open(args.input);
  if (!reader.ok()) {
    std::fprintf(stderr, "neardup idf: %s\n", reader.status().message().c_str());
    return kExitFailure;
  }
  IdfTableBuilder total;
  std::mutex total_mutex;
  std::vector<InputDocument> batch;
  std::vector<Status> errors;
  for (;;) {
    auto more = (*reader)->NextBatch(kBatchDocuments, &batch);
    if (!more.ok()) {
      std::fprintf(stderr, "neardup idf: %s\n", more.status().message().c_str());
      return kExitFailure;
    }
    if (!*more) break;
    errors.assign(batch.size(), Status::Ok());
    ParallelFor(batch.size(), args.input.threads, [&](size_t begin, size_t end) {
      IdfTableBuilder local;
      std::string normalized;
      std::vector<std::string> tokens;
      for (size_t i = begin; i < end; ++i) {
        Status s = (*normalizer)->Normalize(batch[i].text, &normalized);
        if (s.ok()) s = (*extractor)->Tokenize(normalized, &tokens);
        if (!s.ok()) {
          errors[i] = s;
          continue;
        }
        local.AddDocument(tokens);
      }
      std::lock_guard<std::mutex> lock(total_mutex);
      total.Merge(local);  // sums of counts: the same whatever the chunking
    });
    if (!(*reader)->WriteBatch("neardup idf", batch, errors, /*lines=*/{})) return kExitFailure;
  }
  if (total.document_count == 0) {
    std::fprintf(stderr, "neardup idf: no documents read\n");
    return kExitFailure;
  }
  if (args.output == "-") {
    std::string text = total.ToText(args.min_df);
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (std::fflush(stdout) != 0) {
      std::fprintf(stderr, "neardup idf: error writing standard output\n");
      return kExitFailure;
    }
  } else {
    Status written = total.Write(args.output, args.min_df);
    if (!written.ok()) {
      std::fprintf(stderr, "neardup idf: %s\n", written.message().c_str());
      return kExitFailure;
    }
  }
  std::fprintf(stderr, "neardup idf: %llu documents\n",
               static_cast<unsigned long long>(total.document_count));
  return kExitOk;
}

const CommandRegistrar kRegistrar(
    "idf", "learn an IDF table (jieba's \"word idf\" format) from a corpus",
    [](CLI::App* app) -> RunFunction {
      auto args = std::make_shared<IdfCommandArgs>();
      args->input.Add(app);
      args->fingerprint.Add(app, /*with_bits=*/false);
      app->add_option("--output,-o", args->output, "output file (default: standard output)");
      app->add_option("--min-df", args->min_df,
                      "leave out words found in fewer documents (default 2)");
      app->footer(
          "idf(word) = ln(N / df(word)) over the N documents read; words come from the same "
          "normalisation and tokenizer as `neardup fingerprint` (single words, no shingles).");
      return [args] { return RunIdfCommand(*args); };
    });

}  // namespace
}  // namespace neardup::cli
