// `neardup eval`: runs the real dedup over the dev corpus plus the devpairs documents and scores
// every labelled pair, side by side with two classic baselines (longest-sentences signature and
// exact shingle Jaccard at a threshold). Prints a Markdown report (docs/quality.md is one).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include "cli/command.h"
#include "cli/dedup_flags.h"
#include "common/parallel.h"
#include "neardup/dedup.h"
#include "neardup/eval.h"
#include "neardup/shingles.h"

namespace neardup::cli {
namespace {

struct EvalArgs {
  std::string corpus_dir = "../shared/corpus";
  std::string devpairs_dir = "../shared/devpairs";
  std::string markdown_path;
  std::vector<std::string> extra_inputs;
  double jaccard_threshold = 0.5;
  bool per_set = true;
  DedupFlags flags;
};

std::string Percent(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f%%", 100 * value);
  return text;
}

std::string Fixed(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", value);
  return text;
}

struct Method {
  std::string name;
  std::vector<bool> flagged;
  EvalScores scores;
};

int RunEval(const EvalArgs& args) {
  DedupOptions options;
  Status status = args.flags.ToOptions(&options);
  if (!status.ok()) {
    std::fprintf(stderr, "neardup eval: %s\n", status.message().c_str());
    return kExitUsage;
  }
  namespace fs = std::filesystem;
  std::vector<std::string> inputs;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(args.corpus_dir, error)) {
    if (entry.path().extension() == ".jsonl") inputs.push_back(entry.path().string());
  }
  if (error || inputs.empty()) {
    std::fprintf(stderr, "neardup eval: %s: no .jsonl files (%s)\n", args.corpus_dir.c_str(),
                 error.message().c_str());
    return kExitFailure;
  }
  inputs.push_back((fs::path(args.devpairs_dir) / "docs.jsonl").string());
  inputs.insert(inputs.end(), args.extra_inputs.begin(), args.extra_inputs.end());
  auto pairs = ReadLabelledPairs((fs::path(args.devpairs_dir) / "pairs.tsv").string());
  if (!pairs.ok()) {
    std::fprintf(stderr, "neardup eval: %s\n", pairs.status().ToString().c_str());
    return kExitFailure;
  }

  auto report = RunDedup(inputs, options);
  if (!report.ok()) {
    std::fprintf(stderr, "neardup eval: %s\n", report.status().ToString().c_str());
    return kExitFailure;
  }
  const auto& documents = report->documents;
  std::unordered_map<std::string, uint32_t> index_of;
  for (uint32_t i = 0; i < documents.size(); ++i) index_of.try_emplace(documents[i].id, i);
  std::vector<int64_t> cluster_of(documents.size(), -1);
  for (const DedupCluster& cluster : report->clusters) {
    cluster_of[cluster.kept] = static_cast<int64_t>(cluster.cluster_id);
    for (const ClusterMember& member : cluster.removed) {
      cluster_of[member.document] = static_cast<int64_t>(cluster.cluster_id);
    }
  }
  std::set<std::pair<uint32_t, uint32_t>> accepted;
  for (const DuplicatePair& pair : report->pairs) accepted.insert({pair.a, pair.b});

  // The labelled documents' texts, for the baselines.
  std::unordered_map<std::string, uint32_t> needed;  // id -> slot
  for (const LabelledPair& pair : *pairs) {
    needed.try_emplace(pair.id_a, needed.size());
    needed.try_emplace(pair.id_b, needed.size());
  }
  std::vector<std::string> texts(needed.size());
  std::vector<bool> have_text(needed.size(), false);
  {
    auto reader = DocumentReader::Open(inputs, options.reader);
    if (!reader.ok()) {
      std::fprintf(stderr, "neardup eval: %s\n", reader.status().ToString().c_str());
      return kExitFailure;
    }
    Document doc;
    for (;;) {
      auto got = (*reader)->Next(&doc);
      if (!got.ok() || !*got) break;
      auto it = needed.find(doc.id);
      if (it != needed.end() && !have_text[it->second]) {
        texts[it->second] = std::move(doc.text);
        have_text[it->second] = true;
      }
    }
  }
  auto shingler =
      ShingleSimilarity::Create(options.fingerprint.normalize.traditional_to_simplified);
  if (!shingler.ok()) {
    std::fprintf(stderr, "neardup eval: %s\n", shingler.status().ToString().c_str());
    return kExitFailure;
  }
  std::vector<std::vector<uint64_t>> shingles(texts.size());
  std::vector<uint64_t> signatures(texts.size());
  ParallelFor(texts.size(), options.threads, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      if (!(*shingler)->Shingles(texts[i], &shingles[i]).ok()) shingles[i].clear();
      signatures[i] = LongestSentencesSignature(texts[i]);
    }
  });

  const size_t n = pairs->size();
  std::vector<bool> found(n);
  Method cluster{"dedup: same cluster", std::vector<bool>(n), {}};
  Method pair_level{"dedup: candidate pair (+verified)", std::vector<bool>(n), {}};
  Method longest{"longest-3-sentences signature", std::vector<bool>(n), {}};
  Method jaccard{
      "exact shingle Jaccard >= " + Fixed(args.jaccard_threshold), std::vector<bool>(n), {}};
  for (size_t i = 0; i < n; ++i) {
    const LabelledPair& pair = (*pairs)[i];
    auto a = index_of.find(pair.id_a);
    auto b = index_of.find(pair.id_b);
    found[i] = a != index_of.end() && b != index_of.end();
    if (!found[i]) continue;
    uint32_t x = std::min(a->second, b->second), y = std::max(a->second, b->second);
    cluster.flagged[i] = cluster_of[x] >= 0 && cluster_of[x] == cluster_of[y];
    pair_level.flagged[i] = accepted.count({x, y}) > 0;
    uint32_t sa = needed[pair.id_a], sb = needed[pair.id_b];
    longest.flagged[i] = signatures[sa] != 0 && signatures[sa] == signatures[sb];
    jaccard.flagged[i] =
        ShingleSimilarity::Jaccard(shingles[sa], shingles[sb]) >= args.jaccard_threshold;
  }
  std::vector<Method*> methods = {&cluster, &pair_level, &longest, &jaccard};
  for (Method* method : methods) {
    auto scores = ScorePairs(*pairs, method->flagged, found);
    if (!scores.ok()) {
      std::fprintf(stderr, "neardup eval: %s\n", scores.status().ToString().c_str());
      return kExitFailure;
    }
    method->scores = std::move(*scores);
  }

  std::string md;
  auto line = [&md](const std::string& text) { md += text + "\n"; };
  line("Dedup settings: bits=" + std::to_string(options.fingerprint.bits) + ", threshold=" +
       Fixed(options.lsh.threshold) + ", LSH bands x rows=" + std::to_string(report->lsh.bands) +
       "x" + std::to_string(report->lsh.rows) + ", SimHash join k=" +
       (report->max_distance >= 0 ? std::to_string(report->max_distance) : std::string("off")) +
       ", tokenizer=" + args.flags.fingerprint.tokenizer + ", weighting=" +
       (args.flags.fingerprint.weighting.empty() ? std::string("tf")
                                                 : args.flags.fingerprint.weighting) +
       ", top-k=" + std::to_string(options.fingerprint.features.top_k) +
       ", shingle=" + std::to_string(options.fingerprint.features.shingle_size) +
       ", verify=" + Fixed(report->verify_threshold) +
       ", t2s=" + (options.fingerprint.normalize.traditional_to_simplified ? "on" : "off") +
       ", strip-markup=" + (options.fingerprint.normalize.strip_markup ? "on" : "off"));
  line("");
  line("Documents: " + std::to_string(documents.size()) + " (" +
       std::to_string(report->text_bytes / 1000000) +
       " MB), candidate pairs: " + std::to_string(report->candidate_pairs) + " (LSH " +
       std::to_string(report->lsh_candidate_pairs) + ", SimHash join " +
       std::to_string(report->simhash_candidate_pairs) + ")" +
       ", accepted pairs: " + std::to_string(report->pairs.size()) +
       ", clusters: " + std::to_string(report->clusters.size()) + ", removed: " +
       std::to_string(report->removed_count()) + ", labelled pairs: " + std::to_string(n) +
       " (missing: " + std::to_string(cluster.scores.overall.missing) + ")");
  line("");
  line("### Overall (positive + negative labels)");
  line("");
  line("| method | precision | recall | F1 | false-positive rate | after-normalisation recall |");
  line("|---|---|---|---|---|---|");
  for (Method* method : methods) {
    const PairCounts& o = method->scores.overall;
    line("| " + method->name + " | " + Fixed(o.precision()) + " | " + Fixed(o.recall()) + " | " +
         Fixed(o.f1()) + " | " + Percent(o.false_positive_rate()) + " | " +
         Fixed(method->scores.after_normalisation.recall()) + " (" +
         std::to_string(method->scores.after_normalisation.flagged_positives) + "/" +
         std::to_string(method->scores.after_normalisation.positives) + ") |");
  }
  line("");
  line("### Per label: fraction of pairs flagged");
  line("");
  line(
      "Positive labels: the fraction is the recall. Negative labels: it is the false-positive "
      "rate. "
      "Graded and after-normalisation labels: reported only.");
  line("");
  std::string header = "| label | class | pairs |";
  std::string rule = "|---|---|---|";
  for (Method* method : methods) {
    header += " " + method->name + " |";
    rule += "---|";
  }
  line(header);
  line(rule);
  for (const auto& [label, counts] : cluster.scores.by_label) {
    LabelClass label_class = ClassifyLabel(label);
    std::string row = "| " + label + " | " + LabelClassName(label_class) + " | ";
    uint64_t total = counts.positives + counts.negatives + counts.graded;
    row += std::to_string(total) + " |";
    for (Method* method : methods) {
      const PairCounts& c = method->scores.by_label[label];
      double rate = label_class == LabelClass::kPositive   ? c.recall()
                    : label_class == LabelClass::kNegative ? c.false_positive_rate()
                                                           : c.graded_flag_rate();
      row += " " + Percent(rate) + " |";
    }
    line(row);
  }
  {
    // Fingerprint distance of each labelled pair, per label (what -k has to cover).
    std::map<std::string, std::vector<int>> distances;
    for (size_t i = 0; i < n; ++i) {
      if (!found[i]) continue;
      const LabelledPair& pair = (*pairs)[i];
      distances[pair.label].push_back(HammingDistance(documents[index_of[pair.id_a]].fingerprint,
                                                      documents[index_of[pair.id_b]].fingerprint));
    }
    line("");
    line("### Fingerprint Hamming distance of the labelled pairs (p10 / p50 / p90 / max)");
    line("");
    line("| label | class | p10 | p50 | p90 | max |");
    line("|---|---|---|---|---|---|");
    for (auto& [label, values] : distances) {
      std::sort(values.begin(), values.end());
      auto at = [&values](double q) {
        return std::to_string(values[static_cast<size_t>(q * (values.size() - 1))]);
      };
      line("| " + label + " | " + LabelClassName(ClassifyLabel(label)) + " | " + at(0.1) + " | " +
           at(0.5) + " | " + at(0.9) + " | " + at(1.0) + " |");
    }
  }
  if (args.per_set) {
    line("");
    line("### Per set (dedup: same cluster | dedup: candidate pair)");
    line("");
    line(
        "| set | positives | negatives | graded | precision | recall | FP rate | graded flagged | "
        "pair-level precision | pair-level recall |");
    line("|---|---|---|---|---|---|---|---|---|---|");
    for (const auto& [set, c] : cluster.scores.by_set) {
      const PairCounts& p = pair_level.scores.by_set[set];
      line("| " + set + " | " + std::to_string(c.positives) + " | " + std::to_string(c.negatives) +
           " | " + std::to_string(c.graded) + " | " + Fixed(c.precision()) + " | " +
           Fixed(c.recall()) + " | " + Percent(c.false_positive_rate()) + " | " +
           Percent(c.graded_flag_rate()) + " | " + Fixed(p.precision()) + " | " +
           Fixed(p.recall()) + " |");
    }
  }
  line("");
  line("Dedup run time: " + Fixed(report->total_seconds) + " s over " +
       std::to_string(documents.size()) + " documents.");
  std::fputs(md.c_str(), stdout);
  if (!args.markdown_path.empty()) {
    FILE* file = std::fopen(args.markdown_path.c_str(), "wb");
    if (!file || std::fwrite(md.data(), 1, md.size(), file) != md.size()) {
      std::fprintf(stderr, "neardup eval: %s: cannot write\n", args.markdown_path.c_str());
      if (file) std::fclose(file);
      return kExitFailure;
    }
    std::fclose(file);
  }
  return kExitOk;
}

CommandRegistrar registrar(
    "eval", "score dedup on the labelled devpairs (precision / recall per label and set)",
    [](CLI::App* app) -> RunFunction {
      auto args = std::make_shared<EvalArgs>();
      app->add_option("--corpus", args->corpus_dir, "directory of the dev corpus *.jsonl files")
          ->capture_default_str();
      app->add_option("--devpairs", args->devpairs_dir,
                      "directory holding docs.jsonl and pairs.tsv")
          ->capture_default_str();
      app->add_option("--markdown", args->markdown_path, "also write the report to this file");
      app->add_option("--add", args->extra_inputs,
                      "more inputs mixed into the dedup run, e.g. distractors from "
                      "bench/generate_distractors.py (their ids must not clash with devpairs)");
      app->add_option("--jaccard", args->jaccard_threshold,
                      "threshold of the exact shingle Jaccard baseline")
          ->capture_default_str();
      args->flags.Declare(app, /*with_keep=*/false);
      return [args] { return RunEval(*args); };
    });

}  // namespace
}  // namespace neardup::cli
