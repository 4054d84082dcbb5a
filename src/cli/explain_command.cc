// `neardup explain A B`: why two documents are (or are not) near-duplicates: their fingerprints,
// Hamming distance, shared and differing heaviest features, and the verified shingle similarity.
//
// A and B are each, in this order of preference: an id in one of the --file inputs (JSONL, text
// files, directories), a path to a text file, or literal text.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "cli/command.h"
#include "cli/dedup_flags.h"
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
  size_t show = 12;
  bool json = false;
  DedupFlags flags;
};

struct Resolved {
  std::string label;  // how the argument was resolved
  std::string text;
};

Result<std::vector<Resolved>> Resolve(const ExplainArgs& args, const DedupOptions& options) {
  std::vector<Resolved> resolved(2);
  std::vector<bool> done(2, false);
  const std::string* names[2] = {&args.a, &args.b};
  if (!args.files.empty()) {
    auto reader = DocumentReader::Open(args.files, options.reader);
    if (!reader.ok()) return reader.status();
    Document doc;
    for (;;) {
      auto got = (*reader)->Next(&doc);
      if (!got.ok()) return got.status();
      if (!*got) break;
      for (int i = 0; i < 2; ++i) {
        if (!done[i] && doc.id == *names[i]) {
          resolved[i] = {"id " + doc.id + " (" + doc.location + ")", doc.text};
          done[i] = true;
        }
      }
      if (done[0] && done[1]) break;
    }
    for (int i = 0; i < 2; ++i) {
      if (!done[i])
        return Status::NotFound("id \"" + *names[i] + "\" not found in the --file inputs");
    }
    return resolved;
  }
  for (int i = 0; i < 2; ++i) {
    std::error_code error;
    if (std::filesystem::is_regular_file(*names[i], error)) {
      auto reader = DocumentReader::Open({*names[i]}, DocumentReaderOptions{});
      if (!reader.ok()) return reader.status();
      Document doc;
      auto got = (*reader)->Next(&doc);
      if (!got.ok()) return got.status();
      if (!*got) return Status::InvalidArgument(*names[i] + ": no document in this file");
      resolved[i] = {
          "file " + *names[i] + (doc.from_jsonl ? " (first document, id " + doc.id + ")" : ""),
          doc.text};
    } else {
      resolved[i] = {"literal text", *names[i]};
    }
  }
  return resolved;
}

int RunExplain(const ExplainArgs& args) {
  DedupOptions options;
  Status status = args.flags.ToOptions(&options);
  if (!status.ok()) {
    std::fprintf(stderr, "neardup explain: %s\n", status.message().c_str());
    return kExitUsage;
  }
  auto docs = Resolve(args, options);
  if (!docs.ok()) {
    std::fprintf(stderr, "neardup explain: %s\n", docs.status().ToString().c_str());
    return kExitFailure;
  }
  auto fingerprinter = Fingerprinter::Create(options.fingerprint);
  if (!fingerprinter.ok()) {
    std::fprintf(stderr, "neardup explain: %s\n", fingerprinter.status().ToString().c_str());
    return kExitFailure;
  }
  auto shingler =
      ShingleSimilarity::Create(options.fingerprint.normalize.traditional_to_simplified);
  if (!shingler.ok()) {
    std::fprintf(stderr, "neardup explain: %s\n", shingler.status().ToString().c_str());
    return kExitFailure;
  }
  std::vector<FingerprintDetails> details;
  std::vector<std::vector<uint64_t>> shingles(2);
  for (int i = 0; i < 2; ++i) {
    auto computed = (*fingerprinter)->ComputeDetails((*docs)[i].text, /*keep_features=*/true);
    if (!computed.ok()) {
      std::fprintf(stderr, "neardup explain: %s: %s\n", i == 0 ? "A" : "B",
                   computed.status().ToString().c_str());
      return kExitFailure;
    }
    details.push_back(std::move(*computed));
    status = (*shingler)->Shingles((*docs)[i].text, &shingles[i]);
    if (!status.ok()) {
      std::fprintf(stderr, "neardup explain: %s\n", status.ToString().c_str());
      return kExitFailure;
    }
  }
  // The rule of a dedup run with the same options (neardup/dedup.h JudgePair).
  auto judged = JudgePair((*docs)[0].text, (*docs)[1].text, options);
  if (!judged.ok()) {
    std::fprintf(stderr, "neardup explain: %s\n", judged.status().ToString().c_str());
    return kExitFailure;
  }
  const PairJudgement& verdict = *judged;
  const int distance = verdict.distance;
  const int k = verdict.max_distance;
  const double jaccard = verdict.jaccard;
  const double containment = ShingleSimilarity::Containment(shingles[0], shingles[1]);
  const bool duplicate = verdict.duplicate;

  // Shared and differing features among each document's heaviest `show`.
  std::unordered_map<std::string, double> weight_b;
  for (const WeightedFeature& f : details[1].features) weight_b[f.text] = f.weight;
  std::unordered_set<std::string> in_a;
  for (const WeightedFeature& f : details[0].features) in_a.insert(f.text);
  std::vector<const WeightedFeature*> shared, only_a, only_b;
  for (const WeightedFeature& f : details[0].features) {
    (weight_b.count(f.text) ? shared : only_a).push_back(&f);
  }
  for (const WeightedFeature& f : details[1].features) {
    if (!in_a.count(f.text)) only_b.push_back(&f);
  }
  auto truncate = [&](std::vector<const WeightedFeature*>* list) {
    if (list->size() > args.show) list->resize(args.show);
  };
  const size_t shared_total = shared.size();
  truncate(&shared);
  truncate(&only_a);
  truncate(&only_b);

  if (args.json) {
    std::string out;
    JsonWriter json(&out);
    json.BeginObject();
    const char* names[2] = {"a", "b"};
    for (int i = 0; i < 2; ++i) {
      json.Key(names[i]).BeginObject();
      json.Key("source").String((*docs)[i].label);
      json.Key("bytes").Uint((*docs)[i].text.size());
      json.Key("fingerprint").String(ToHex(details[i].fingerprint));
      json.Key("features").Uint(details[i].feature_count);
      json.Key("shingles").Uint(shingles[i].size());
      json.EndObject();
    }
    json.Key("distance").Int(distance).Key("k").Int(k);
    json.Key("within_k").Bool(verdict.within_k);
    json.Key("bands").Int(verdict.lsh.bands).Key("rows").Int(verdict.lsh.rows);
    json.Key("shared_bands").Int(verdict.shared_bands);
    json.Key("lsh_candidate").Bool(verdict.lsh_candidate);
    json.Key("lsh_probability").Double(LshCandidateProbability(jaccard, verdict.lsh));
    json.Key("jaccard").Double(jaccard).Key("containment").Double(containment);
    json.Key("verify_threshold").Double(verdict.verify_threshold);
    json.Key("exact").Bool(verdict.exact).Key("whitespace_only").Bool(verdict.whitespace_only);
    json.Key("near_duplicate").Bool(duplicate);
    json.Key("shared_features_total").Uint(shared_total);
    auto list = [&](const char* key, const std::vector<const WeightedFeature*>& features) {
      json.Key(key).BeginArray();
      for (const WeightedFeature* f : features) {
        json.BeginObject()
            .Key("feature")
            .String(f->text)
            .Key("weight")
            .Double(f->weight)
            .EndObject();
      }
      json.EndArray();
    };
    list("shared", shared);
    list("only_a", only_a);
    list("only_b", only_b);
    json.EndObject();
    std::printf("%s\n", out.c_str());
    return kExitOk;
  }
  const char* names[2] = {"A", "B"};
  for (int i = 0; i < 2; ++i) {
    std::printf("%s: %s, %zu bytes, %zu features, %zu shingles\n   fingerprint %s\n", names[i],
                (*docs)[i].label.c_str(), (*docs)[i].text.size(), details[i].feature_count,
                shingles[i].size(), ToHex(details[i].fingerprint).c_str());
  }
  if (k >= 0) {
    std::printf("Hamming distance: %d of %d bits (SimHash join k = %d: %s)\n", distance,
                details[0].fingerprint.bits, k, verdict.within_k ? "candidate" : "beyond");
  } else {
    std::printf("Hamming distance: %d of %d bits (SimHash join off)\n", distance,
                details[0].fingerprint.bits);
  }
  if (verdict.lsh_candidate || options.candidates != DedupOptions::Candidates::kSimHash) {
    std::printf(
        "MinHash LSH: %d of %d bands shared (%d rows each): %s; a pair at this Jaccard is a "
        "candidate with probability %.3f\n",
        verdict.shared_bands, verdict.lsh.bands, verdict.lsh.rows,
        verdict.lsh_candidate ? "candidate" : "not a candidate",
        LshCandidateProbability(jaccard, verdict.lsh));
  }
  std::printf("shingle similarity: Jaccard %.3f, containment %.3f (verify threshold %.2f: %s)\n",
              jaccard, containment, verdict.verify_threshold,
              verdict.verify_threshold <= 0 ? "off" : (verdict.verified ? "passes" : "fails"));
  std::printf("near-duplicate: %s%s\n", duplicate ? "yes" : "no",
              verdict.exact             ? " (identical texts)"
              : verdict.whitespace_only ? " (identical but for whitespace)"
                                        : "");
  auto print_list = [](const char* title, const std::vector<const WeightedFeature*>& features) {
    std::printf("%s:", title);
    if (features.empty()) std::printf(" (none)");
    for (const WeightedFeature* f : features) std::printf(" [%s %.2f]", f->text.c_str(), f->weight);
    std::printf("\n");
  };
  std::printf("shared features: %zu of %zu (A) and %zu (B)\n", shared_total,
              details[0].feature_count, details[1].feature_count);
  print_list("heaviest shared", shared);
  print_list("heaviest only in A", only_a);
  print_list("heaviest only in B", only_b);
  return kExitOk;
}

CommandRegistrar registrar(
    "explain", "show why two documents are or are not near-duplicates",
    [](CLI::App* app) -> RunFunction {
      auto args = std::make_shared<ExplainArgs>();
      app->add_option("a", args->a, "first document: an id in --file, a file path, or text")
          ->required();
      app->add_option("b", args->b, "second document: an id in --file, a file path, or text")
          ->required();
      app->add_option("--file", args->files,
                      "an input (JSONL, text file, directory) in which A and B are ids; repeatable")
          ->allow_extra_args(false)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      app->add_option("--show", args->show, "features listed per group")->capture_default_str();
      app->add_flag("--json", args->json, "print JSON instead of text");
      args->flags.Declare(app, /*with_keep=*/false);
      return [args] { return RunExplain(*args); };
    });

}  // namespace
}  // namespace neardup::cli
