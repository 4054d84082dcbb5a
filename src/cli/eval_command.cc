// `neardup eval`: runs the real dedup over the dev corpus plus the devpairs documents and scores
// every labelled pair, side by side with two classic baselines (longest-sentences signature and
// exact shingle Jaccard at a threshold). Prints a Markdown report (docs/quality.md is one).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include "cli/command.h"
#include "cli/dedup_flags.h"
#include "cli/report.h"
#include "common/parallel.h"
#include "eval/eval.h"
#include "neardup/dedup.h"
#include "neardup/output_file.h"
#include "neardup/shingles.h"

namespace neardup::cli {
namespace {

// The shared data folder: $NEARDUP_SHARED, else the `shared` folder beside the source tree this
// binary was built from (an absolute path, so the result does not depend on the current directory).
std::string DefaultSharedDir() {
  const char* env = std::getenv("NEARDUP_SHARED");
  if (env && *env) return env;
  return NEARDUP_DEFAULT_SHARED_DIR;
}

struct EvalArgs {
  std::string corpus_dir = DefaultSharedDir() + "/corpus";
  std::string devpairs_dir = DefaultSharedDir() + "/devpairs";
  std::string markdown_path;
  std::vector<std::string> extra_inputs;
  double jaccard_threshold = 0.5;
  bool force = false;
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
    PrintError(status);
    return kExitUsage;
  }
  namespace fs = std::filesystem;
  std::vector<std::string> inputs;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(args.corpus_dir, error)) {
    if (entry.path().extension() == ".jsonl") inputs.push_back(entry.path().string());
  }
  if (error) {
    PrintError(args.corpus_dir + ": cannot list: " + error.message() +
               " (set --corpus, or NEARDUP_SHARED to the shared data folder)");
    return kExitFailure;
  }
  if (inputs.empty()) {
    PrintError(args.corpus_dir + ": no .jsonl files in this folder");
    return kExitFailure;
  }
  std::sort(inputs.begin(), inputs.end());
  inputs.push_back((fs::path(args.devpairs_dir) / "docs.jsonl").string());
  inputs.insert(inputs.end(), args.extra_inputs.begin(), args.extra_inputs.end());
  auto pairs = ReadLabelledPairs((fs::path(args.devpairs_dir) / "pairs.tsv").string());
  if (!pairs.ok()) {
    PrintError(pairs.status());
    return kExitFailure;
  }

  WarningPrinter warnings;
  options.reader.on_warning = warnings.Callback();
  auto report = RunDedup(inputs, options);
  options.reader.on_warning = nullptr;  // the texts are read again below: warned once
  if (!report.ok()) {
    PrintError(report.status());
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
      PrintError(reader.status());
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
    PrintError(shingler.status());
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
  {
    uint64_t unknown = 0;
    std::set<std::string> unknown_labels;
    for (const LabelledPair& pair : *pairs) {
      if (ClassifyLabel(pair.label) == LabelClass::kUnknown) {
        ++unknown;
        unknown_labels.insert(pair.label);
      }
    }
    if (unknown > 0) {
      std::string names;
      for (const std::string& label : unknown_labels) names += (names.empty() ? "" : ", ") + label;
      PrintWarning(Count(unknown, "labelled pair") + " with unknown labels (" + names +
                   ") are reported per label but not scored");
    }
  }
  std::vector<Method*> methods = {&cluster, &pair_level, &longest, &jaccard};
  for (Method* method : methods) {
    auto scores = ScorePairs(*pairs, method->flagged, found);
    if (!scores.ok()) {
      PrintError(scores.status());
      return kExitFailure;
    }
    method->scores = std::move(*scores);
  }

  {
    const PairCounts& overall = cluster.scores.overall;
    if (overall.positives + overall.negatives == 0) {
      PrintError("no labelled pair could be scored: " + Count(overall.missing, "pair") +
                 " name documents not in the inputs, the rest " +
                 "have graded or unknown labels (pairs.tsv format: see neardup eval --help)");
      return kExitFailure;
    }
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
    const bool any_flagged = o.flagged_positives + o.flagged_negatives > 0;
    line("| " + method->name + " | " + (any_flagged ? Fixed(o.precision()) : "n/a") + " | " +
         (o.positives > 0 ? Fixed(o.recall()) : "n/a") + " | " +
         (any_flagged && o.positives > 0 ? Fixed(o.f1()) : "n/a") + " | " +
         (o.negatives > 0 ? Percent(o.false_positive_rate()) : "n/a") + " | " +
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
    OutputFileOptions output_options;
    output_options.force = args.force;
    output_options.inputs = report->input_files;
    Status written = WriteOutputFile(args.markdown_path, md, output_options);
    if (!written.ok()) {
      PrintError(written);
      return kExitFailure;
    }
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
      app->add_flag("-f,--force", args->force,
                    "replace an existing --markdown file (never an input file)");
      app->add_option("--add", args->extra_inputs,
                      "more inputs mixed into the dedup run, e.g. distractors from "
                      "bench/generate_distractors.py (their ids must not clash with devpairs)");
      app->add_option("--jaccard", args->jaccard_threshold,
                      "threshold of the exact shingle Jaccard baseline")
          ->capture_default_str();
      args->flags.Declare(app, /*with_keep=*/false);
      app->footer(
          "Inputs: every *.jsonl of --corpus plus DEVPAIRS/docs.jsonl, deduplicated with the "
          "given options; DEVPAIRS/pairs.tsv lists the labelled pairs, one a line, tab-separated "
          "(a first line starting with \"set\" is a header):\n"
          "  set  id_a  id_b  label  [reference similarity]  [note]\n"
          "Labels: exact, exact_ws, near_dup_real, near_dup_template, syn_* (positive: must be "
          "flagged); negative_*, paraphrase (must not be flagged); syn_script_*, cross_script, "
          "diacritic_variant (scored apart); graded labels and unknown ones are only reported.\n"
          "Examples:\n"
          "  neardup eval                                  # ../shared beside the source tree\n"
          "  NEARDUP_SHARED=/data/shared neardup eval --verify 0.6\n"
          "  neardup eval --corpus my/corpus --devpairs my/pairs --markdown report.md");
      return [args] { return RunEval(*args); };
    });

}  // namespace
}  // namespace neardup::cli
