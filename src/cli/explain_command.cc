// `neardup explain A B`: why two documents are (or are not) near-duplicates: their fingerprints,
// Hamming distance, shared and differing heaviest features, and the verified shingle similarity.
//
// A and B are both ids in the --file inputs (JSONL, text files, directories), both plain text
// files, or with --text both literal texts; anything else (an unknown id, a missing file) is an
// error, never silently treated as text.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "cli/command.h"
#include "cli/dedup_flags.h"
#include "cli/report.h"
#include "common/json_writer.h"
#include "neardup/dedup.h"
#include "neardup/document_reader.h"
#include "neardup/fingerprinter.h"
#include "neardup/shingles.h"

namespace neardup::cli {
namespace {

struct ExplainArgs {
  std::string a;
  std::string b;
  std::vector<std::string> files;
  bool texts = false;
  size_t show = 12;
  bool json = false;
  DedupFlags flags;
};

struct Resolved {
  std::string label;  // how the argument was resolved
  std::string text;
};

struct ResolvedPair {
  std::vector<Resolved> documents;
  size_t corpus_documents = 0;  // documents read from the --file inputs (0 without --file)
  // The shingle frequencies a dedup run over the --file inputs counts (boilerplate weights).
  std::optional<ShingleFrequencies> frequencies;
};

// Finds A and B: ids in the --file inputs (plain, or id@file:line for a shared id), files, or
// literal texts with --text. An unknown id or a missing file is an error, never literal text.
Result<ResolvedPair> Resolve(const ExplainArgs& args, const DedupOptions& options) {
  ResolvedPair result;
  result.documents.resize(2);
  const std::string* names[2] = {&args.a, &args.b};
  if (args.texts) {
    if (!args.files.empty()) return Status::InvalidArgument("--text and --file exclude each other");
    for (int i = 0; i < 2; ++i) result.documents[i] = {"literal text", *names[i]};
    return result;
  }
  if (!args.files.empty()) {
    DocumentReaderOptions reader_options = options.reader;
    WarningPrinter warnings;
    reader_options.on_warning = warnings.Callback();
    auto reader = DocumentReader::Open(args.files, reader_options);
    if (!reader.ok()) return reader.status();
    std::vector<std::vector<std::string>> matches(2);
    Document doc;
    for (;;) {
      auto got = (*reader)->Next(&doc);
      if (!got.ok()) return got.status();
      if (!*got) break;
      ++result.corpus_documents;
      for (int i = 0; i < 2; ++i) {
        if (doc.id == *names[i] || doc.id + "@" + doc.location == *names[i]) {
          matches[i].push_back(doc.location);
          if (matches[i].size() == 1) {
            result.documents[i] = {"id " + doc.id + " (" + doc.location + ")", doc.text};
          }
        }
      }
    }
    if (options.boilerplate) {
      // The boilerplate weights of a dedup run over the same inputs.
      DedupOptions quiet = options;
      quiet.reader.on_warning = nullptr;  // warned once above
      auto frequencies = CountShingleFrequencies(args.files, quiet);
      if (!frequencies.ok()) return frequencies.status();
      result.frequencies.emplace(std::move(*frequencies));
    }
    for (int i = 0; i < 2; ++i) {
      if (matches[i].empty()) {
        return Status::NotFound("id \"" + *names[i] + "\" not found in the --file inputs");
      }
      if (matches[i].size() > 1) {
        return Status::InvalidArgument(
            "id \"" + *names[i] + "\" is used by " + Count(matches[i].size(), "document") + " (" +
            matches[i][0] + ", " + matches[i][1] + (matches[i].size() > 2 ? ", ..." : "") +
            "); name one as " + *names[i] + "@" + matches[i][0]);
      }
    }
    return result;
  }
  for (int i = 0; i < 2; ++i) {
    std::error_code error;
    if (!std::filesystem::is_regular_file(*names[i], error)) {
      return Status::NotFound("\"" + *names[i] +
                              "\": no such file; give --file INPUT to look up ids, or --text to "
                              "compare literal texts");
    }
    DocumentReaderOptions reader_options = options.reader;
    reader_options.on_warning = WarningPrinter().Callback();
    auto reader = DocumentReader::Open({*names[i]}, reader_options);
    if (!reader.ok()) return reader.status();
    Document doc;
    auto got = (*reader)->Next(&doc);
    if (!got.ok()) return got.status();
    if (!*got) return Status::InvalidArgument(*names[i] + ": no document in this file");
    if (doc.from_jsonl) {
      return Status::InvalidArgument(*names[i] + " is a JSONL file: give it as --file " +
                                     *names[i] + " and name the two ids");
    }
    result.documents[i] = {"file " + *names[i], doc.text};
  }
  return result;
}

// Each document's heaviest `show` features: shared with the other document, or only in one.
struct FeatureComparison {
  std::vector<const WeightedFeature*> shared, only_a, only_b;
  size_t shared_total = 0;  // shared features before truncation to `show`
};

// What explain reports about the pair.
struct Explanation {
  const std::vector<Resolved>* docs = nullptr;
  std::vector<FingerprintDetails> details;  // A, B (with features)
  std::vector<std::vector<uint64_t>> shingles;
  PairJudgement verdict;  // the rule of a dedup run with the same options
  FeatureComparison features;
};

FeatureComparison CompareFeatures(const FingerprintDetails& a, const FingerprintDetails& b,
                                  size_t show) {
  FeatureComparison result;
  std::unordered_map<std::string, double> weight_b;
  for (const WeightedFeature& f : b.features) weight_b[f.text] = f.weight;
  std::unordered_set<std::string> in_a;
  for (const WeightedFeature& f : a.features) in_a.insert(f.text);
  for (const WeightedFeature& f : a.features) {
    (weight_b.count(f.text) ? result.shared : result.only_a).push_back(&f);
  }
  for (const WeightedFeature& f : b.features) {
    if (!in_a.count(f.text)) result.only_b.push_back(&f);
  }
  result.shared_total = result.shared.size();
  for (auto* list : {&result.shared, &result.only_a, &result.only_b}) {
    if (list->size() > show) list->resize(show);
  }
  return result;
}

// Fingerprints, shingles and the dedup verdict of the two resolved documents.
Result<Explanation> Explain(const ResolvedPair& resolved, const DedupOptions& options,
                            size_t show) {
  Explanation result;
  result.docs = &resolved.documents;
  auto fingerprinter = Fingerprinter::Create(options.fingerprint);
  if (!fingerprinter.ok()) return fingerprinter.status();
  auto shingler =
      ShingleSimilarity::Create(options.fingerprint.normalize.traditional_to_simplified);
  if (!shingler.ok()) return shingler.status();
  result.shingles.resize(2);
  for (int i = 0; i < 2; ++i) {
    const std::string& text = resolved.documents[i].text;
    auto computed = (*fingerprinter)->ComputeDetails(text, /*keep_features=*/true);
    if (!computed.ok()) return computed.status().WithContext(i == 0 ? "A" : "B");
    result.details.push_back(std::move(*computed));
    NEARDUP_RETURN_IF_ERROR((*shingler)->Shingles(text, &result.shingles[i]));
  }
  auto judged = JudgePair(resolved.documents[0].text, resolved.documents[1].text, options,
                          resolved.frequencies ? &*resolved.frequencies : nullptr);
  if (!judged.ok()) return judged.status();
  result.verdict = std::move(*judged);
  result.features = CompareFeatures(result.details[0], result.details[1], show);
  return result;
}

void PrintJson(const Explanation& e) {
  const PairJudgement& verdict = e.verdict;
  std::string out;
  JsonWriter json(&out);
  json.BeginObject();
  const char* names[2] = {"a", "b"};
  for (int i = 0; i < 2; ++i) {
    json.Key(names[i]).BeginObject();
    json.Key("source").String((*e.docs)[i].label);
    json.Key("bytes").Uint((*e.docs)[i].text.size());
    json.Key("fingerprint").String(ToHex(e.details[i].fingerprint));
    json.Key("features").Uint(e.details[i].feature_count);
    json.Key("shingles").Uint(e.shingles[i].size());
    json.EndObject();
  }
  json.Key("distance").Int(verdict.distance).Key("k").Int(verdict.k.value_or(-1));
  json.Key("within_k").Bool(verdict.within_k);
  json.Key("bands").Int(verdict.lsh.bands).Key("rows").Int(verdict.lsh.rows);
  json.Key("shared_bands").Int(verdict.shared_bands);
  json.Key("lsh_candidate").Bool(verdict.lsh_candidate);
  json.Key("lsh_probability").Double(LshCandidateProbability(verdict.plain_jaccard, verdict.lsh));
  json.Key("jaccard").Double(verdict.jaccard).Key("containment").Double(verdict.containment);
  json.Key("plain_jaccard").Double(verdict.plain_jaccard);
  json.Key("size_guard").Bool(verdict.size_guard);
  json.Key("boilerplate_min_documents").Uint(verdict.boilerplate_documents);
  json.Key("verify_threshold").Double(verdict.verify_threshold);
  json.Key("containment_threshold").Double(verdict.rule.containment_threshold);
  json.Key("unit_jaccard").Double(verdict.unit_jaccard);
  json.Key("edited_threshold").Double(verdict.rule.edited_threshold);
  json.Key("edited_min_jaccard").Double(verdict.rule.edited_min_jaccard);
  json.Key("reason").String(DuplicateReasonName(verdict.reason));
  json.Key("exact").Bool(verdict.exact).Key("whitespace_only").Bool(verdict.whitespace_only);
  json.Key("near_duplicate").Bool(verdict.duplicate);
  json.Key("shared_features_total").Uint(e.features.shared_total);
  auto list = [&](const char* key, const std::vector<const WeightedFeature*>& features) {
    json.Key(key).BeginArray();
    for (const WeightedFeature* f : features) {
      json.BeginObject().Key("feature").String(f->text).Key("weight").Double(f->weight).EndObject();
    }
    json.EndArray();
  };
  list("shared", e.features.shared);
  list("only_a", e.features.only_a);
  list("only_b", e.features.only_b);
  json.EndObject();
  std::printf("%s\n", out.c_str());
}

void PrintText(const Explanation& e, const DedupOptions& options) {
  const PairJudgement& verdict = e.verdict;
  const int k = verdict.k.value_or(-1);
  const char* names[2] = {"A", "B"};
  for (int i = 0; i < 2; ++i) {
    std::printf("%s: %s, %s, %s, %s\n   fingerprint %s\n", names[i], (*e.docs)[i].label.c_str(),
                Count((*e.docs)[i].text.size(), "byte").c_str(),
                Count(e.details[i].feature_count, "feature").c_str(),
                Count(e.shingles[i].size(), "shingle").c_str(),
                ToHex(e.details[i].fingerprint).c_str());
  }
  if (k >= 0) {
    std::printf("Hamming distance: %d of %d bits (SimHash join k = %d: %s)\n", verdict.distance,
                e.details[0].fingerprint.bits, k, verdict.within_k ? "candidate" : "beyond");
  } else {
    std::printf("Hamming distance: %d of %d bits (SimHash join off)\n", verdict.distance,
                e.details[0].fingerprint.bits);
  }
  if (verdict.lsh_candidate || options.candidates != DedupOptions::Candidates::kSimHash) {
    std::printf(
        "MinHash LSH: %d of %d bands shared (%d rows each): %s; a pair at this Jaccard is a "
        "candidate with probability %.3f\n",
        verdict.shared_bands, verdict.lsh.bands, verdict.lsh.rows,
        verdict.lsh_candidate ? "candidate" : "not a candidate",
        LshCandidateProbability(verdict.plain_jaccard, verdict.lsh));
  }
  if (verdict.boilerplate_documents > 0) {
    std::printf(
        "boilerplate weights: a shingle in F >= %u documents of the --file inputs weighs F / df "
        "(plain Jaccard %.3f)\n",
        verdict.boilerplate_documents, verdict.plain_jaccard);
  }
  std::printf(
      "shingle similarity: Jaccard %.3f (near_duplicate at >= %.2f), containment %.3f "
      "(contained at >= %.2f, size guard %s)\n",
      verdict.jaccard, verdict.verify_threshold, verdict.containment,
      verdict.rule.containment_threshold, verdict.size_guard ? "met" : "not met");
  if (verdict.rule.edited_threshold > 0) {
    std::printf(
        "unit similarity: Jaccard %.3f of the word / character sets (edited at >= %.2f with "
        "plain shingle Jaccard >= %.2f; plain shingle Jaccard %.3f)\n",
        verdict.unit_jaccard, verdict.rule.edited_threshold, verdict.rule.edited_min_jaccard,
        verdict.plain_jaccard);
  } else {
    std::printf("unit similarity: Jaccard %.3f of the word / character sets (edited off)\n",
                verdict.unit_jaccard);
  }
  std::printf("pair rule: %s\n", verdict.verify_threshold <= 0
                                     ? "verification off"
                                     : DuplicateReasonName(verdict.reason));
  std::printf("near-duplicate: %s%s\n", verdict.duplicate ? "yes" : "no",
              verdict.exact             ? " (identical texts)"
              : verdict.whitespace_only ? " (identical but for whitespace)"
              : verdict.duplicate && verdict.reason == DuplicateReason::kContained ? " (contained)"
              : verdict.duplicate && verdict.reason == DuplicateReason::kEdited    ? " (edited)"
                                                                                   : "");
  auto print_list = [](const char* title, const std::vector<const WeightedFeature*>& features) {
    std::printf("%s:", title);
    if (features.empty()) std::printf(" (none)");
    for (const WeightedFeature* f : features) std::printf(" [%s %.2f]", f->text.c_str(), f->weight);
    std::printf("\n");
  };
  std::printf("shared features: %zu of %zu (A) and %zu (B)\n", e.features.shared_total,
              e.details[0].feature_count, e.details[1].feature_count);
  print_list("heaviest shared", e.features.shared);
  print_list("heaviest only in A", e.features.only_a);
  print_list("heaviest only in B", e.features.only_b);
}

int RunExplain(const ExplainArgs& args) {
  DedupOptions options;
  Status status = args.flags.ToOptions(&options);
  if (!status.ok()) {
    PrintError(status);
    return kExitUsage;
  }
  auto resolved = Resolve(args, options);
  if (!resolved.ok()) {
    PrintError(resolved.status());
    return kExitFailure;
  }
  auto explanation = Explain(*resolved, options, args.show);
  if (!explanation.ok()) {
    PrintError(explanation.status());
    return kExitFailure;
  }
  if (args.json) {
    PrintJson(*explanation);
  } else {
    PrintText(*explanation, options);
  }
  return kExitOk;
}

CommandRegistrar registrar(
    "explain", "show why two documents are or are not near-duplicates",
    [](CLI::App* app) -> RunFunction {
      auto args = std::make_shared<ExplainArgs>();
      app->add_option("a", args->a,
                      "first document: an id in the --file inputs (id@file:line for a shared "
                      "id), a plain text file, or with --text the text itself")
          ->required();
      app->add_option("b", args->b, "second document, like A")->required();
      app->add_flag("--text", args->texts, "A and B are literal texts");
      app->add_option("--file", args->files,
                      "an input (JSONL, text file, directory) in which A and B are ids; repeatable")
          ->allow_extra_args(false)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      app->add_option("--show", args->show, "features listed per group");
      app->add_flag("--json", args->json, "print JSON instead of text");
      args->flags.Declare(app, /*with_keep=*/false);
      app->footer(
          "The verdict applies the rule of `neardup dedup` with the same options over the --file "
          "inputs (the same -k, --verify, fingerprint flags).\n"
          "Examples:\n"
          "  neardup explain --file corpus.jsonl doc17 doc912\n"
          "  neardup explain a.txt b.txt --json\n"
          "  neardup explain --text \"the quick brown fox\" \"the quick brown fox jumps\"");
      return [args] { return RunExplain(*args); };
    });

}  // namespace
}  // namespace neardup::cli
