// `neardup idf [INPUT...] -o FILE`: learns an IDF table from a corpus and writes it in jieba's
// "word idf" format (usable with --idf and FeatureOptions::idf_path).
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/fingerprint_flags.h"
#include "cli/report.h"
#include "common/parallel.h"
#include "neardup/features.h"
#include "neardup/output_file.h"
#include "neardup/text.h"

namespace neardup::cli {
namespace {

struct IdfCommandArgs {
  FingerprintFlags fingerprint;
  InputFlags input;
  std::string output = "-";
  uint64_t min_df = 2;
  bool force = false;
};

int RunIdfCommand(const IdfCommandArgs& args) {
  FingerprintOptions options;
  Status status = args.fingerprint.ToOptions(&options);
  if (!status.ok()) {
    PrintError(status);
    return kExitUsage;
  }
  options.features.shingle_size = 1;  // IDF is per word
  options.features.weighting = Weighting::kTermFrequency;
  options.features.idf_path.clear();
  auto normalizer = TextNormalizer::Create(options.normalize);
  if (!normalizer.ok()) {
    PrintError(normalizer.status());
    return kExitFailure;
  }
  auto extractor = FeatureExtractor::Create(options.features);
  if (!extractor.ok()) {
    PrintError(extractor.status());
    return kExitFailure;
  }
  auto reader = InputBatchReader::Open(args.input, &args.fingerprint);
  if (!reader.ok()) {
    PrintError(reader.status());
    return kExitFailure;
  }
  {
    OutputFileOptions check;
    check.force = args.force;
    check.inputs = (*reader)->files();
    Status refused = CheckOutputPath(args.output, check);
    if (!refused.ok()) {
      PrintError(refused);
      return kExitFailure;
    }
  }
  IdfTableBuilder total;
  std::mutex total_mutex;
  std::vector<InputDocument> batch;
  std::vector<Status> errors;
  for (;;) {
    auto more = (*reader)->NextBatch(kBatchDocuments, &batch);
    if (!more.ok()) {
      PrintError(more.status());
      return kExitFailure;
    }
    if (!*more) break;
    errors.assign(batch.size(), Status::Ok());
    ParallelFor(batch.size(), args.input.threads(), [&](size_t begin, size_t end) {
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
    if (!(*reader)->WriteBatch(batch, errors, /*lines=*/{})) return kExitFailure;
  }
  if ((*reader)->Finish() != kExitOk) return kExitFailure;
  OutputFileOptions output_options;
  output_options.force = args.force;
  output_options.inputs = (*reader)->files();
  Status written = WriteOutputFile(args.output, total.ToText(args.min_df), output_options);
  if (!written.ok()) {
    PrintError(written);
    return kExitFailure;
  }
  return kExitOk;
}

const CommandRegistrar kRegistrar(
    "idf", "learn an IDF table (jieba's \"word idf\" format) from a corpus",
    [](CLI::App* app) -> RunFunction {
      auto args = std::make_shared<IdfCommandArgs>();
      args->input.Add(app);
      args->fingerprint.Add(app, /*with_bits=*/false);
      app->add_option("-o,--output", args->output, "output file (- = standard output)");
      app->add_flag("-f,--force", args->force,
                    "replace an existing output file (never an input file)");
      app->add_option("--min-df", args->min_df, "leave out words found in fewer documents");
      app->footer(
          "idf(word) = ln(N / df(word)) over the N documents read; words come from the same "
          "normalisation and tokenizer as `neardup fingerprint` (single words, no shingles).\n"
          "Examples:\n"
          "  neardup idf corpus.jsonl -o idf.txt\n"
          "  neardup fingerprint corpus.jsonl --weighting tfidf --idf idf.txt");
      return [args] { return RunIdfCommand(*args); };
    });

}  // namespace
}  // namespace neardup::cli
