// `neardup keywords [INPUT...]`: writes the heaviest weighted features of each document (the ones
// its fingerprint is made of), or with --extract-tags exactly jieba.analyse.extract_tags' keywords.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/fingerprint_flags.h"
#include "cli/report.h"
#include "common/json_writer.h"
#include "common/parallel.h"
#include "common/utf8.h"
#include "neardup/fingerprinter.h"
#include "neardup/jieba.h"

namespace neardup::cli {
namespace {

struct KeywordsCommandArgs {
  FingerprintFlags fingerprint;
  InputFlags input;
  bool extract_tags = false;
};

void WritePairs(const std::string& id, const std::vector<std::pair<std::string, double>>& pairs,
                std::string* line) {
  JsonWriter json(line);
  json.BeginObject();
  json.Key("id").String(id);
  json.Key("keywords").BeginArray();
  for (const auto& [word, weight] : pairs) json.BeginArray().String(word).Double(weight).EndArray();
  json.EndArray();
  json.EndObject();
  line->push_back('\n');
}

int RunKeywordsCommand(const KeywordsCommandArgs& args) {
  // 20 keywords unless told (the yanyiwu profile's own default is 5).
  OptionValues values(OptionNaming::kFlag);
  Status status = args.fingerprint.Values(&values);
  const OptionValue* profile = values.Find("profile");
  const bool yanyiwu = profile != nullptr && std::get<std::string>(*profile) == "yanyiwu";
  if (status.ok() && !values.Has("top_k") && !yanyiwu) status = values.Set("top_k", int64_t{20});
  FingerprintOptions options;
  if (status.ok()) status = values.ApplyTo(&options);
  if (!status.ok()) {
    PrintError(status);
    return kExitUsage;
  }
  std::unique_ptr<Fingerprinter> fingerprinter;
  std::shared_ptr<const KeywordExtractor> extractor;
  if (args.extract_tags) {
    Result<std::shared_ptr<const KeywordExtractor>> loaded = Status::Internal("unset");
    const FeatureOptions& features = options.features;
    if (features.idf_path.empty() && features.jieba_dir.empty()) {
      loaded = KeywordExtractor::Default();
    } else {
      JiebaOptions jieba = JiebaOptionsForDirectory(features.jieba_dir);
      if (!features.idf_path.empty()) jieba.idf_path = features.idf_path;
      auto segmenter = JiebaSegmenter::Create(jieba);
      loaded = segmenter.ok() ? KeywordExtractor::Create(*segmenter, jieba)
                              : Result<std::shared_ptr<const KeywordExtractor>>(segmenter.status());
    }
    if (!loaded.ok()) {
      PrintError(loaded.status());
      return kExitFailure;
    }
    extractor = *loaded;
  } else {
    auto created = Fingerprinter::Create(options);
    if (!created.ok()) {
      PrintError(created.status());
      return kExitFailure;
    }
    fingerprinter = std::move(*created);
  }
  auto reader = InputBatchReader::Open(args.input, &args.fingerprint);
  if (!reader.ok()) {
    PrintError(reader.status());
    return kExitFailure;
  }
  const size_t top_k = options.features.top_k;
  return (*reader)->ProcessAll([&](const InputDocument& document, std::string* line) -> Status {
    std::vector<std::pair<std::string, double>> pairs;
    if (extractor != nullptr) {
      size_t invalid = utf8::FindInvalid(document.text);
      if (invalid != std::string_view::npos) {
        return Status::InvalidUtf8("invalid UTF-8 at byte " + std::to_string(invalid));
      }
      for (Keyword& keyword : extractor->ExtractTags(document.text, top_k)) {
        pairs.emplace_back(std::move(keyword.word), keyword.weight);
      }
    } else {
      auto features = fingerprinter->Features(document.text);
      if (!features.ok()) return features.status();
      for (WeightedFeature& feature : *features) {
        pairs.emplace_back(std::move(feature.text), feature.weight);
      }
    }
    WritePairs(document.id, pairs, line);
    return Status::Ok();
  });
}

const CommandRegistrar kRegistrar(
    "keywords", "print the weighted features (keywords) of documents (JSONL out)",
    [](CLI::App* app) -> RunFunction {
      auto args = std::make_shared<KeywordsCommandArgs>();
      args->fingerprint.Add(app, /*with_bits=*/false);
      app->get_option("--top-k")->default_str("20");  // keywords lists 20 unless told
      args->input.Add(app);
      app->add_flag("--extract-tags", args->extract_tags,
                    "jieba.analyse.extract_tags keywords (tf / total x idf) of the raw text "
                    "instead of the fingerprint features");
      app->footer(
          "Without --extract-tags this prints the fingerprint's features: the normalised text "
          "(Traditional -> Simplified, case folding, NFKC, markup stripped; see the --no-* flags) "
          "in --shingle word shingles, weighted. --extract-tags reproduces Python jieba exactly, "
          "so it sees the text as given (no normalisation), as jieba does.\n"
          "Output: {\"id\":\"...\",\"keywords\":[[\"word\",weight],...]} per document, heaviest "
          "first; --top-k defaults to 20 (5 with --profile yanyiwu).\n"
          "Examples:\n"
          "  neardup keywords corpus.jsonl --top-k 10\n"
          "  neardup keywords --extract-tags --lines zh.txt\n"
          "  neardup keywords --shingle 1 --no-t2s docs/");
      return [args] { return RunKeywordsCommand(*args); };
    });

}  // namespace
}  // namespace neardup::cli
