// `neardup eval`: runs the real dedup over labelled pairs' documents (and, optionally, a corpus
// mixed in) and scores every labelled pair, side by side with two classic baselines
// (longest-sentences signature and exact shingle Jaccard at a threshold). Prints a Markdown report
// (docs/quality.md is one) or, with --json, the same figures as one JSON object.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

#include "cli/command.h"
#include "cli/dedup_flags.h"
#include "cli/report.h"
#include "common/json_writer.h"
#include "common/parallel.h"
#include "eval/eval.h"
#include "neardup/dedup.h"
#include "neardup/options.h"
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
  // Unset options mean: the shared devpairs (and, when neither --pairs nor --devpairs is given,
  // the shared corpus mixed in).
  std::optional<std::string> corpus_dir;
  std::optional<std::string> devpairs_dir;
  std::string pairs_path;         // --pairs: a labelled pairs file
  std::vector<std::string> docs;  // --docs: the documents the pairs name
  std::string markdown_path;
  std::string output_dir;  // -o: the dedup outputs plus eval.json (for `neardup report`)
  std::vector<std::string> extra_inputs;
  double jaccard_threshold = 0.5;
  bool force = false;
  bool json = false;
  bool per_set = true;
  DedupFlags flags;
};

// What an eval run reads, resolved from the options.
struct EvalSources {
  std::string pairs;                // the labelled pairs file
  std::vector<std::string> inputs;  // dedup's inputs: corpus files, documents, --add
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

// The pairs file and the dedup inputs: the corpus folder's .jsonl files (sorted), the labelled
// documents and any extra inputs.
Result<EvalSources> ResolveSources(const EvalArgs& args) {
  namespace fs = std::filesystem;
  EvalSources sources;
  const bool explicit_pairs = !args.pairs_path.empty() || args.devpairs_dir.has_value();
  if (!args.pairs_path.empty() && args.docs.empty() && !args.devpairs_dir) {
    return Status::InvalidArgument(
        "--pairs needs the documents the pairs name: give them with --docs (files, "
        "directories or -)");
  }
  const std::string devpairs = args.devpairs_dir.value_or(DefaultSharedDir() + "/devpairs");
  sources.pairs =
      !args.pairs_path.empty() ? args.pairs_path : (fs::path(devpairs) / "pairs.tsv").string();
  // The corpus is mixed in when asked for, or by default in the default setting only.
  const std::string corpus =
      args.corpus_dir ? *args.corpus_dir : (explicit_pairs ? "" : DefaultSharedDir() + "/corpus");
  if (!corpus.empty()) {
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(corpus, error)) {
      if (entry.path().extension() == ".jsonl") sources.inputs.push_back(entry.path().string());
    }
    if (error) {
      return Status::IoError(corpus + ": cannot list: " + error.message() +
                             (args.corpus_dir ? std::string(" (--corpus)")
                                              : " (set --corpus, or NEARDUP_SHARED to the shared "
                                                "data folder)"));
    }
    if (sources.inputs.empty()) {
      return Status::NotFound(corpus +
                              ": no .jsonl files in this folder (--corpus \"\" mixes "
                              "no corpus in)");
    }
    std::sort(sources.inputs.begin(), sources.inputs.end());
  }
  for (const std::string& input : args.docs) {
    if (IsStreamInput(input)) {
      return Status::InvalidArgument("--docs " + input +
                                     ": eval reads its documents twice; give a file or directory, "
                                     "not standard input or a pipe");
    }
  }
  if (args.devpairs_dir || args.pairs_path.empty()) {
    sources.inputs.push_back((fs::path(devpairs) / "docs.jsonl").string());
  }
  sources.inputs.insert(sources.inputs.end(), args.docs.begin(), args.docs.end());
  sources.inputs.insert(sources.inputs.end(), args.extra_inputs.begin(), args.extra_inputs.end());
  return sources;
}

// Everything the report is made from.
struct EvalRun {
  DedupOptions options;
  DedupReport report;
  std::vector<LabelledPair> pairs;
  std::unordered_map<std::string, uint32_t> index_of;  // document id -> report->documents index
  std::vector<bool> found;                             // both documents of pair i were read
  std::vector<double> jaccard;                         // exact shingle Jaccard of pair i
  std::vector<Method> methods;  // dedup cluster, dedup pair, longest sentences, shingle Jaccard
};

// The baselines' inputs for each labelled document: shingles and longest-sentences signature.
struct Baselines {
  std::unordered_map<std::string, uint32_t> slot;  // labelled document id -> index below
  std::vector<std::vector<uint64_t>> shingles;
  std::vector<uint64_t> signatures;
};

// Reads the labelled documents' texts again and computes the baselines' inputs.
Result<Baselines> ComputeBaselines(const std::vector<std::string>& inputs, const EvalRun& run) {
  Baselines result;
  for (const LabelledPair& pair : run.pairs) {
    result.slot.try_emplace(pair.id_a, result.slot.size());
    result.slot.try_emplace(pair.id_b, result.slot.size());
  }
  std::vector<std::string> texts(result.slot.size());
  std::vector<bool> have_text(result.slot.size(), false);
  auto reader = DocumentReader::Open(inputs, run.options.reader);
  if (!reader.ok()) return reader.status();
  Document doc;
  for (;;) {
    auto got = (*reader)->Next(&doc);
    if (!got.ok() || !*got) break;
    auto it = result.slot.find(doc.id);
    if (it != result.slot.end() && !have_text[it->second]) {
      texts[it->second] = std::move(doc.text);
      have_text[it->second] = true;
    }
  }
  auto shingler =
      ShingleSimilarity::Create(run.options.fingerprint.normalize.traditional_to_simplified);
  if (!shingler.ok()) return shingler.status();
  result.shingles.resize(texts.size());
  result.signatures.resize(texts.size());
  ParallelFor(texts.size(), run.options.threads, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      if (!(*shingler)->Shingles(texts[i], &result.shingles[i]).ok()) result.shingles[i].clear();
      result.signatures[i] = LongestSentencesSignature(texts[i]);
    }
  });
  return result;
}

// Which labelled pairs each method flags, then their scores.
Status FlagAndScore(const Baselines& baselines, double jaccard_threshold, EvalRun* run) {
  const std::vector<DedupDocument>& documents = run->report.documents;
  for (uint32_t i = 0; i < documents.size(); ++i) run->index_of.try_emplace(documents[i].id, i);
  std::vector<int64_t> cluster_of(documents.size(), -1);
  for (const DedupCluster& cluster : run->report.clusters) {
    cluster_of[cluster.kept] = static_cast<int64_t>(cluster.cluster_id);
    for (const ClusterMember& member : cluster.removed) {
      cluster_of[member.document] = static_cast<int64_t>(cluster.cluster_id);
    }
  }
  std::set<std::pair<uint32_t, uint32_t>> accepted;
  for (const DuplicatePair& pair : run->report.pairs) accepted.insert({pair.a, pair.b});

  const size_t n = run->pairs.size();
  run->found.assign(n, false);
  run->jaccard.assign(n, -1);
  run->methods = {
      {"dedup: same cluster", std::vector<bool>(n), {}},
      {"dedup: candidate pair (+verified)", std::vector<bool>(n), {}},
      {"longest-3-sentences signature", std::vector<bool>(n), {}},
      {"exact shingle Jaccard >= " + Fixed(jaccard_threshold), std::vector<bool>(n), {}}};
  for (size_t i = 0; i < n; ++i) {
    const LabelledPair& pair = run->pairs[i];
    auto a = run->index_of.find(pair.id_a);
    auto b = run->index_of.find(pair.id_b);
    run->found[i] = a != run->index_of.end() && b != run->index_of.end();
    if (!run->found[i]) continue;
    uint32_t x = std::min(a->second, b->second), y = std::max(a->second, b->second);
    run->methods[0].flagged[i] = cluster_of[x] >= 0 && cluster_of[x] == cluster_of[y];
    run->methods[1].flagged[i] = accepted.count({x, y}) > 0;
    uint32_t sa = baselines.slot.at(pair.id_a), sb = baselines.slot.at(pair.id_b);
    run->methods[2].flagged[i] =
        baselines.signatures[sa] != 0 && baselines.signatures[sa] == baselines.signatures[sb];
    run->jaccard[i] = ShingleSimilarity::Jaccard(baselines.shingles[sa], baselines.shingles[sb]);
    run->methods[3].flagged[i] = run->jaccard[i] >= jaccard_threshold;
  }
  for (Method& method : run->methods) {
    auto scores = ScorePairs(run->pairs, method.flagged, run->found);
    if (!scores.ok()) return scores.status();
    method.scores = std::move(*scores);
  }
  return Status::Ok();
}

void WarnUnknownLabels(const std::vector<LabelledPair>& pairs) {
  uint64_t unknown = 0;
  std::set<std::string> unknown_labels;
  for (const LabelledPair& pair : pairs) {
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

// Runs dedup over the inputs and scores every labelled pair with dedup and the baselines.
Result<EvalRun> RunAndScore(const EvalArgs& args, DedupOptions options) {
  auto sources = ResolveSources(args);
  if (!sources.ok()) return sources.status();
  const std::vector<std::string>* inputs = &sources->inputs;
  auto pairs = ReadLabelledPairs(sources->pairs);
  if (!pairs.ok()) return pairs.status();
  EvalRun run;
  run.pairs = std::move(*pairs);
  WarningPrinter warnings;
  options.reader.on_warning = warnings.Callback();
  auto report = RunDedup(*inputs, options);
  options.reader.on_warning = nullptr;  // the texts are read again below: warned once
  if (!report.ok()) return report.status();
  run.report = std::move(*report);
  run.options = std::move(options);
  auto baselines = ComputeBaselines(*inputs, run);
  if (!baselines.ok()) return baselines.status();
  NEARDUP_RETURN_IF_ERROR(FlagAndScore(*baselines, args.jaccard_threshold, &run));
  WarnUnknownLabels(run.pairs);
  const PairCounts& overall = run.methods[0].scores.overall;
  if (overall.positives + overall.negatives == 0) {
    return Status::InvalidArgument(
        "no labelled pair could be scored: " + Count(overall.missing, "pair") +
        " name documents not in the inputs, the rest " +
        "have graded or unknown labels (pairs.tsv format: see neardup eval --help)");
  }
  return run;
}

// The report's markdown, a section at a time.
class EvalMarkdown {
 public:
  EvalMarkdown(const EvalArgs& args, const EvalRun& run) : args_(args), run_(run) {}

  std::string Build() {
    Settings();
    Overall();
    PerLabel();
    Distances();
    if (args_.per_set) PerSet();
    Line("");
    Line("Dedup run time: " + Fixed(run_.report.total_seconds) + " s over " +
         std::to_string(run_.report.documents.size()) + " documents.");
    return md_;
  }

 private:
  void Line(const std::string& text) { md_ += text + "\n"; }

  void Settings() {
    const DedupOptions& options = run_.options;
    const DedupReport& report = run_.report;
    // The fingerprint options by name, as a store records them.
    const auto named = ParseOptionString(FingerprintOptionsToString(options.fingerprint));
    auto name_of = [&](const char* key) { return named.ok() ? named->at(key) : std::string(); };
    Line("Dedup settings: bits=" + std::to_string(options.fingerprint.bits) +
         ", threshold=" + Fixed(options.lsh.threshold) +
         ", LSH bands x rows=" + std::to_string(report.lsh ? report.lsh->bands : 0) + "x" +
         std::to_string(report.lsh ? report.lsh->rows : 0) +
         ", SimHash join k=" + (report.k ? std::to_string(*report.k) : std::string("off")) +
         ", tokenizer=" + name_of("tokenizer") + ", weighting=" + name_of("weighting") +
         ", top-k=" + std::to_string(options.fingerprint.features.top_k) +
         ", shingle=" + std::to_string(options.fingerprint.features.shingle_size) +
         ", verify=" + Fixed(report.verify_threshold) +
         ", containment=" + Fixed(report.rule.containment_threshold) +
         (report.rule.edited_threshold > 0
              ? ", edited=" + Fixed(report.rule.edited_threshold) +
                    " (shingle Jaccard >= " + Fixed(report.rule.edited_min_jaccard) + ")"
              : std::string(", edited=off")) +
         ", t2s=" + (options.fingerprint.normalize.traditional_to_simplified ? "on" : "off") +
         ", strip-markup=" + (options.fingerprint.normalize.strip_markup ? "on" : "off"));
    Line("");
    Line("Documents: " + std::to_string(report.documents.size()) + " (" +
         std::to_string(report.text_bytes / 1000000) +
         " MB), candidate pairs: " + std::to_string(report.candidate_pairs) + " (LSH " +
         std::to_string(report.lsh_candidate_pairs) + ", SimHash join " +
         std::to_string(report.simhash_candidate_pairs) + ")" +
         ", accepted pairs: " + std::to_string(report.pairs.size()) +
         ", clusters: " + std::to_string(report.clusters.size()) +
         ", removed: " + std::to_string(report.removed_count()) +
         ", labelled pairs: " + std::to_string(run_.pairs.size()) +
         " (missing: " + std::to_string(run_.methods[0].scores.overall.missing) + ")");
    std::string reasons;
    for (const auto& [reason, count] : report.pairs_by_reason) {
      reasons += (reasons.empty() ? "" : ", ") + reason + " " + std::to_string(count);
    }
    Line("");
    Line("Accepted pairs by reason: " + (reasons.empty() ? std::string("none") : reasons));
  }

  void Overall() {
    Line("");
    Line("### Overall (positive + negative labels)");
    Line("");
    Line("| method | precision | recall | F1 | false-positive rate | after-normalisation recall |");
    Line("|---|---|---|---|---|---|");
    for (const Method& method : run_.methods) {
      const PairCounts& o = method.scores.overall;
      const bool any_flagged = o.flagged_positives + o.flagged_negatives > 0;
      Line("| " + method.name + " | " + (any_flagged ? Fixed(o.precision()) : "n/a") + " | " +
           (o.positives > 0 ? Fixed(o.recall()) : "n/a") + " | " +
           (any_flagged && o.positives > 0 ? Fixed(o.f1()) : "n/a") + " | " +
           (o.negatives > 0 ? Percent(o.false_positive_rate()) : "n/a") + " | " +
           (method.scores.after_normalisation.positives > 0
                ? Fixed(method.scores.after_normalisation.recall())
                : std::string("n/a")) +
           " (" + std::to_string(method.scores.after_normalisation.flagged_positives) + "/" +
           std::to_string(method.scores.after_normalisation.positives) + ") |");
    }
  }

  void PerLabel() {
    Line("");
    Line("### Per label: fraction of pairs flagged");
    Line("");
    Line(
        "Positive labels: the fraction is the recall. Negative labels: it is the false-positive "
        "rate. "
        "Graded and after-normalisation labels: reported only.");
    Line("");
    std::string header = "| label | class | pairs |";
    std::string rule = "|---|---|---|";
    for (const Method& method : run_.methods) {
      header += " " + method.name + " |";
      rule += "---|";
    }
    Line(header);
    Line(rule);
    for (const auto& [label, counts] : run_.methods[0].scores.by_label) {
      LabelClass label_class = ClassifyLabel(label);
      const uint64_t total = counts.positives + counts.negatives + counts.graded;
      std::string row = "| ";  // appended piece by piece: GCC 12 warns falsely on "| " + label
      row.append(label).append(" | ").append(LabelClassName(label_class)).append(" | ");
      row.append(std::to_string(total)).append(" |");
      for (const Method& method : run_.methods) {
        auto it = method.scores.by_label.find(label);
        const PairCounts c = it == method.scores.by_label.end() ? PairCounts() : it->second;
        double rate = label_class == LabelClass::kPositive   ? c.recall()
                      : label_class == LabelClass::kNegative ? c.false_positive_rate()
                                                             : c.graded_flag_rate();
        row.append(" ").append(Percent(rate)).append(" |");
      }
      Line(row);
    }
  }

  // Fingerprint distance of each labelled pair, per label (what -k has to cover).
  void Distances() {
    std::map<std::string, std::vector<int>> distances;
    const std::vector<DedupDocument>& documents = run_.report.documents;
    for (size_t i = 0; i < run_.pairs.size(); ++i) {
      if (!run_.found[i]) continue;
      const LabelledPair& pair = run_.pairs[i];
      distances[pair.label].push_back(
          HammingDistance(documents[run_.index_of.at(pair.id_a)].fingerprint,
                          documents[run_.index_of.at(pair.id_b)].fingerprint));
    }
    Line("");
    Line("### Fingerprint Hamming distance of the labelled pairs (p10 / p50 / p90 / max)");
    Line("");
    Line("| label | class | p10 | p50 | p90 | max |");
    Line("|---|---|---|---|---|---|");
    for (auto& [label, values] : distances) {
      std::sort(values.begin(), values.end());
      auto at = [&values](double q) {
        return std::to_string(values[static_cast<size_t>(q * (values.size() - 1))]);
      };
      Line("| " + label + " | " + LabelClassName(ClassifyLabel(label)) + " | " + at(0.1) + " | " +
           at(0.5) + " | " + at(0.9) + " | " + at(1.0) + " |");
    }
  }

  void PerSet() {
    Line("");
    Line("### Per set (dedup: same cluster | dedup: candidate pair)");
    Line("");
    Line(
        "| set | positives | negatives | graded | precision | recall | FP rate | graded flagged | "
        "pair-level precision | pair-level recall |");
    Line("|---|---|---|---|---|---|---|---|---|---|");
    const auto& pair_by_set = run_.methods[1].scores.by_set;
    for (const auto& [set, c] : run_.methods[0].scores.by_set) {
      auto it = pair_by_set.find(set);
      const PairCounts p = it == pair_by_set.end() ? PairCounts() : it->second;
      Line("| " + set + " | " + std::to_string(c.positives) + " | " + std::to_string(c.negatives) +
           " | " + std::to_string(c.graded) + " | " + Fixed(c.precision()) + " | " +
           Fixed(c.recall()) + " | " + Percent(c.false_positive_rate()) + " | " +
           Percent(c.graded_flag_rate()) + " | " + Fixed(p.precision()) + " | " +
           Fixed(p.recall()) + " |");
    }
  }

  const EvalArgs& args_;
  const EvalRun& run_;
  std::string md_;
};

// eval.json (with -o): the per-label table of every method and the pairs the dedup run got
// wrong (positives not in one cluster, negatives in one), with their documents' locations, for
// `neardup report`; and, as pair_errors, the pairs its candidate stage and pair rule got wrong.
std::string EvalOutputJson(const EvalRun& run) {
  std::string out;
  JsonWriter json(&out);
  json.BeginObject().Key("methods").BeginArray();
  for (const Method& method : run.methods) json.String(method.name);
  json.EndArray();
  json.Key("labels").BeginArray();
  for (const auto& [label, counts] : run.methods[0].scores.by_label) {
    const LabelClass label_class = ClassifyLabel(label);
    json.BeginObject().Key("label").String(label).Key("class").String(LabelClassName(label_class));
    json.Key("pairs").Uint(counts.positives + counts.negatives + counts.graded);
    json.Key("rates").BeginArray();
    for (const Method& method : run.methods) {
      auto it = method.scores.by_label.find(label);
      const PairCounts c = it == method.scores.by_label.end() ? PairCounts() : it->second;
      json.Double(label_class == LabelClass::kPositive   ? c.recall()
                  : label_class == LabelClass::kNegative ? c.false_positive_rate()
                                                         : c.graded_flag_rate());
    }
    json.EndArray().EndObject();
  }
  json.EndArray();
  const PairCounts& overall = run.methods[0].scores.overall;
  json.Key("overall").BeginObject();
  json.Key("method").String(run.methods[0].name);
  json.Key("precision").Double(overall.precision()).Key("recall").Double(overall.recall());
  json.Key("f1").Double(overall.f1());
  json.Key("false_positive_rate").Double(overall.false_positive_rate());
  json.Key("positives").Uint(overall.positives).Key("negatives").Uint(overall.negatives);
  json.Key("missing").Uint(overall.missing);
  json.EndObject();
  const std::vector<DedupDocument>& documents = run.report.documents;
  auto location = [&](uint32_t index) {
    const DedupDocument& doc = documents[index];
    std::string where = doc.file_index < run.report.input_files.size()
                            ? run.report.input_files[doc.file_index]
                            : std::string("?");
    if (doc.line > 0) where += ":" + std::to_string(doc.line);
    return where;
  };
  json.Key("missed").BeginArray();
  for (size_t i = 0; i < run.pairs.size(); ++i) {
    if (!run.found[i]) continue;
    const LabelClass label_class = ClassifyLabel(run.pairs[i].label);
    const bool flagged = run.methods[0].flagged[i];
    const char* kind = label_class == LabelClass::kPositive && !flagged  ? "missed"
                       : label_class == LabelClass::kNegative && flagged ? "false_positive"
                                                                         : nullptr;
    if (!kind) continue;
    const LabelledPair& pair = run.pairs[i];
    const uint32_t a = run.index_of.at(pair.id_a), b = run.index_of.at(pair.id_b);
    json.BeginObject().Key("kind").String(kind).Key("set").String(pair.set);
    json.Key("label").String(pair.label);
    json.Key("reference_similarity").Double(pair.reference_similarity);
    json.Key("jaccard").Double(run.jaccard[i]);
    json.Key("distance").Int(HammingDistance(documents[a].fingerprint, documents[b].fingerprint));
    json.Key("a").BeginObject().Key("id").String(documents[a].id);
    json.Key("location").String(location(a)).Key("bytes").Uint(documents[a].text_bytes);
    json.EndObject();
    json.Key("b").BeginObject().Key("id").String(documents[b].id);
    json.Key("location").String(location(b)).Key("bytes").Uint(documents[b].text_bytes);
    json.EndObject().EndObject();
  }
  json.EndArray();
  // The same for the pairs themselves (method 1: the pair was a candidate and the pair rule
  // accepted it), without cluster transitivity: bench/heldout_eval.py scores both.
  json.Key("pair_errors").BeginArray();
  for (size_t i = 0; i < run.pairs.size(); ++i) {
    if (!run.found[i]) continue;
    const LabelClass label_class = ClassifyLabel(run.pairs[i].label);
    const bool flagged = run.methods[1].flagged[i];
    const char* kind = label_class == LabelClass::kPositive && !flagged  ? "missed"
                       : label_class == LabelClass::kNegative && flagged ? "false_positive"
                                                                         : nullptr;
    if (!kind) continue;
    const LabelledPair& pair = run.pairs[i];
    json.BeginObject().Key("kind").String(kind).Key("set").String(pair.set);
    json.Key("label").String(pair.label).Key("jaccard").Double(run.jaccard[i]);
    json.Key("a").String(pair.id_a).Key("b").String(pair.id_b).EndObject();
  }
  json.EndArray().EndObject();
  out.push_back('\n');
  return out;
}

// The report as one JSON object: the same figures as the Markdown, n/a as null.
std::string EvalJson(const EvalRun& run) {
  std::string out;
  JsonWriter json(&out);
  auto ratio = [&json](bool defined, double value) -> JsonWriter& {
    return defined ? json.Double(value) : json.Null();
  };
  auto counts = [&](const PairCounts& c) {
    json.BeginObject();
    json.Key("positives").Uint(c.positives).Key("flagged_positives").Uint(c.flagged_positives);
    json.Key("negatives").Uint(c.negatives).Key("flagged_negatives").Uint(c.flagged_negatives);
    json.Key("graded").Uint(c.graded).Key("flagged_graded").Uint(c.flagged_graded);
    json.Key("missing").Uint(c.missing);
    const bool any_flagged = c.flagged_positives + c.flagged_negatives > 0;
    json.Key("precision");
    ratio(any_flagged, c.precision());
    json.Key("recall");
    ratio(c.positives > 0, c.recall());
    json.Key("f1");
    ratio(any_flagged && c.positives > 0, c.f1());
    json.Key("false_positive_rate");
    ratio(c.negatives > 0, c.false_positive_rate());
    json.Key("graded_flag_rate");
    ratio(c.graded > 0, c.graded_flag_rate());
    json.EndObject();
  };
  const DedupOptions& options = run.options;
  const DedupReport& report = run.report;
  json.BeginObject();
  json.Key("settings").BeginObject();
  json.Key("bits").Int(options.fingerprint.bits).Key("threshold").Double(options.lsh.threshold);
  json.Key("bands").Int(report.lsh ? report.lsh->bands : 0);
  json.Key("rows").Int(report.lsh ? report.lsh->rows : 0);
  json.Key("k");
  if (report.k) {
    json.Int(*report.k);
  } else {
    json.Null();
  }
  json.Key("verify").Double(report.verify_threshold);
  json.Key("shingle").Int(options.fingerprint.features.shingle_size);
  json.Key("t2s").Bool(options.fingerprint.normalize.traditional_to_simplified);
  json.Key("containment").Double(report.rule.containment_threshold);
  json.Key("edited").Double(report.rule.edited_threshold);
  json.Key("edited_min_jaccard").Double(report.rule.edited_min_jaccard);
  json.EndObject();
  json.Key("documents").Uint(report.documents.size());
  json.Key("text_bytes").Uint(report.text_bytes);
  json.Key("candidate_pairs").Uint(report.candidate_pairs);
  json.Key("accepted_pairs").Uint(report.pairs.size());
  json.Key("accepted_pairs_by_reason").BeginObject();
  for (const auto& [reason, count] : report.pairs_by_reason) json.Key(reason).Uint(count);
  json.EndObject();
  json.Key("clusters").Uint(report.clusters.size());
  json.Key("removed").Uint(report.removed_count());
  json.Key("labelled_pairs").Uint(run.pairs.size());
  json.Key("missing_pairs").Uint(run.methods[0].scores.overall.missing);
  json.Key("methods").BeginArray();
  for (const Method& method : run.methods) {
    json.BeginObject().Key("method").String(method.name);
    json.Key("overall");
    counts(method.scores.overall);
    json.Key("after_normalisation");
    counts(method.scores.after_normalisation);
    json.Key("by_label").BeginObject();
    for (const auto& [label, c] : method.scores.by_label) {
      json.Key(label);
      counts(c);
    }
    json.EndObject();
    json.Key("by_set").BeginObject();
    for (const auto& [set, c] : method.scores.by_set) {
      json.Key(set);
      counts(c);
    }
    json.EndObject();
    json.EndObject();
  }
  json.EndArray();
  json.Key("label_classes").BeginObject();
  for (const auto& [label, c] : run.methods[0].scores.by_label) {
    json.Key(label).String(LabelClassName(ClassifyLabel(label)));
  }
  json.EndObject();
  json.Key("dedup_seconds").Double(report.total_seconds);
  json.EndObject();
  out.push_back('\n');
  return out;
}

int RunEval(const EvalArgs& args) {
  DedupOptions options;
  Status status = args.flags.ToOptions(&options);
  if (!status.ok()) {
    PrintError(status);
    return kExitUsage;
  }
  if (!args.markdown_path.empty() || !args.output_dir.empty()) {
    // Refuse an unwritable report file or existing outputs before the (long) run, not after
    // it: never one of the files eval reads.
    auto sources = ResolveSources(args);
    if (!sources.ok()) {
      PrintError(sources.status());
      return kExitUsage;
    }
    NoteInput(sources->pairs);
    auto expanded = DocumentReader::Open(sources->inputs, DocumentReaderOptions{});
    OutputFileOptions check;
    check.force = args.force;
    if (expanded.ok()) check.inputs = (*expanded)->files();
    std::vector<std::string> paths;
    if (!args.markdown_path.empty()) paths.push_back(args.markdown_path);
    if (!args.output_dir.empty()) {
      for (const char* name :
           {"clusters.jsonl", "keep.txt", "remove.txt", "summary.json", "eval.json"}) {
        paths.push_back((std::filesystem::path(args.output_dir) / name).string());
      }
    }
    status = CheckOutputPaths(paths, check);
    if (!status.ok()) {
      PrintError(status);
      return kExitFailure;
    }
  }
  auto run = RunAndScore(args, std::move(options));
  if (!run.ok()) {
    PrintError(run.status());
    return kExitFailure;
  }
  const std::string md = EvalMarkdown(args, *run).Build();
  std::fputs(args.json ? EvalJson(*run).c_str() : md.c_str(), stdout);
  if (!args.output_dir.empty()) {
    DedupOutputOptions output;
    output.directory = args.output_dir;
    output.force = args.force;
    output.options = &run->options;
    OutputFileOptions output_options;
    output_options.force = args.force;
    output_options.inputs = run->report.input_files;
    const std::string eval_path = (std::filesystem::path(args.output_dir) / "eval.json").string();
    status = CheckOutputPath(eval_path, output_options);
    if (status.ok()) status = WriteDedupOutputs(run->report, output);
    if (status.ok()) status = WriteOutputFile(eval_path, EvalOutputJson(*run), output_options);
    if (!status.ok()) {
      PrintError(status);
      return kExitFailure;
    }
  }
  if (!args.markdown_path.empty()) {
    OutputFileOptions output_options;
    output_options.force = args.force;
    output_options.inputs = run->report.input_files;
    Status written = WriteOutputFile(args.markdown_path, md, output_options);
    if (!written.ok()) {
      PrintError(written);
      return kExitFailure;
    }
  }
  return kExitOk;
}

CommandRegistrar registrar(
    "eval", "score dedup on labelled pairs (precision / recall per label and set)",
    [](CLI::App* app) -> RunFunction {
      auto args = std::make_shared<EvalArgs>();
      app->add_option("--pairs", args->pairs_path,
                      "labelled pairs file (tab-separated: set, id_a, id_b, label, ...); its "
                      "documents come from --docs");
      app->add_option("--docs", args->docs,
                      "the documents the pairs name: files or directories, read like dedup's "
                      "inputs (JSONL, CSV/TSV, text; compressed or not)");
      app->add_option("--devpairs", args->devpairs_dir,
                      "directory holding pairs.tsv and docs.jsonl (default: $NEARDUP_SHARED/"
                      "devpairs, else the shared folder beside the source tree)");
      app->add_option("--corpus", args->corpus_dir,
                      "directory of *.jsonl files mixed into the dedup run (default: "
                      "$NEARDUP_SHARED/corpus when neither --pairs nor --devpairs is given, "
                      "else none; \"\" for none)");
      app->add_flag("--json", args->json,
                    "print the report as one JSON object instead of Markdown");
      app->add_option("--markdown", args->markdown_path, "also write the report to this file");
      app->add_option("-o,--output", args->output_dir,
                      "also write the dedup outputs and eval.json (per-label table, missed "
                      "pairs) to this folder, for `neardup report`");
      app->add_flag("-f,--force", args->force,
                    "replace existing output files (never an input file)");
      app->add_option("--add", args->extra_inputs,
                      "more inputs mixed into the dedup run, e.g. distractors from "
                      "bench/generate_distractors.py (their ids must not clash with devpairs)");
      app->add_option("--jaccard", args->jaccard_threshold,
                      "threshold of the exact shingle Jaccard baseline")
          ->capture_default_str();
      args->flags.Declare(app, /*with_keep=*/false);
      app->footer(
          "Inputs: the documents of --docs (or DEVPAIRS/docs.jsonl) plus every *.jsonl of "
          "--corpus, deduplicated with the given options; the pairs file (--pairs, or "
          "DEVPAIRS/pairs.tsv) lists the labelled pairs, one a line, tab-separated (a first line "
          "starting with \"set\" is a header):\n"
          "  set  id_a  id_b  label  [reference similarity]  [note]\n"
          "Labels: exact, exact_ws, near_dup_real, near_dup_template, syn_* (positive: must be "
          "flagged); negative_*, paraphrase (must not be flagged); syn_script_*, cross_script, "
          "diacritic_variant (scored apart); graded labels and unknown ones are only reported.\n"
          "Examples:\n"
          "  neardup eval                                  # ../shared beside the source tree\n"
          "  NEARDUP_SHARED=/data/shared neardup eval --verify 0.6\n"
          "  neardup eval --corpus my/corpus --devpairs my/pairs --markdown report.md\n"
          "  neardup eval --pairs labels.tsv --docs docs.jsonl --json | jq .methods[0].overall\n"
          "  neardup eval -o out/eval && neardup report out/eval   # missed pairs with diffs");
      return [args] { return RunEval(*args); };
    });

}  // namespace
}  // namespace neardup::cli
