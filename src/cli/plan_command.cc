// `neardup plan`: prints the permuted-table index design the planner picks for f, k, n and an
// optional memory budget, with its modelled costs, and (--list) every alternative it priced; with
// --threshold, the MinHash LSH plan of dedup instead: bands and rows, the detection probability
// by Jaccard similarity and the expected candidate pairs for n documents.
#include <algorithm>
#include <cstdio>
#include <span>
#include <string>

#include "cli/command.h"
#include "cli/option_flags.h"
#include "cli/report.h"
#include "neardup/dedup.h"
#include "neardup/index_planner.h"
#include "neardup/minhash_lsh.h"

namespace neardup::cli {
namespace {

std::string KeyWidths(const IndexDesign& d) {
  int lo = d.min_key_bits(), hi = d.max_key_bits();
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
}

void PrintRow(const IndexDesign& d, double n, const char* mark) {
  std::printf(
      "%s %6zu tables  key %-5s bits  radius %d  %7.1f B/fp  %10.3g GB  %9.4g probes  "
      "%11.4g candidates  %10.4g ns  | %s\n",
      mark, d.tables.size(), KeyWidths(d).c_str(), d.probe_radius[d.indexed_k],
      d.bytes_per_fingerprint, d.bytes_per_fingerprint * n / 1e9, d.probes_per_query,
      d.candidates_per_query, d.cost_ns, d.description.c_str());
}

// The plan's n when -n is not given (the store's default, 1e7, is --expected-size's).
constexpr double kPlanExpectedSize = 1e6;

struct PlanArgs {
  // The index plan's options (--bits, -k, -n, --memory-budget, --list) and the LSH plan's
  // (dedup's flags), from the option registry: the names, defaults and checks of the store's
  // --indexed-k, --expected-size and --memory-budget and of `neardup dedup`.
  RegistryFlags index_flags;
  RegistryFlags dedup_flags;
  double n = kPlanExpectedSize;  // the LSH plan's n too
};

// Dedup's options of the LSH plan. Given: whether it was asked for (a threshold, bands or rows).
constexpr std::string_view kLshPlanKeys[] = {"threshold", "bands", "rows"};
// ... and what it shows of the pair rule, which only the LSH plan uses.
constexpr std::string_view kRuleKeys[] = {"verify_threshold",         "containment_threshold",
                                          "containment_min_shingles", "containment_min_ratio",
                                          "edited_threshold",         "edited_min_jaccard"};

// The lowest Jaccard of a pair `contained` accepts (LowestAcceptedJaccard of that reason alone).
double LowestContainedJaccard(const PairRuleOptions& rule) {
  PairRuleOptions contained = rule;
  contained.jaccard_threshold = 1;
  contained.edited_threshold = 0;
  return LowestAcceptedJaccard(contained);
}

// What verification accepts under `rule`, reason by reason.
void PrintAcceptedPairs(const PairRuleOptions& rule) {
  std::printf("What verification accepts (the pair rule, neardup/pair_rule.h):\n");
  std::printf(
      "  exact_duplicate / whitespace_duplicate: identical texts, or identical but for "
      "whitespace (from hashes, whatever the candidate stage)\n");
  if (rule.jaccard_threshold > 0) {
    std::printf("  near_duplicate: shingle Jaccard >= %.2f\n", rule.jaccard_threshold);
  } else {
    std::printf("  near_duplicate: every candidate pair (verification off)\n");
  }
  if (rule.containment_threshold > 0) {
    std::printf(
        "  contained: at least %.0f%% of the smaller document's shingles in the larger one, the "
        "smaller holding >= %.0f shingles and >= %.0f%% of the larger's (a contained pair can "
        "have a Jaccard as low as %.3f)\n",
        100 * rule.containment_threshold, rule.containment_min_shingles,
        100 * rule.containment_min_ratio, LowestContainedJaccard(rule));
  } else {
    std::printf("  contained: off\n");
  }
  if (rule.edited_threshold > 0) {
    std::printf(
        "  edited: plain shingle Jaccard >= %.2f and multiset Jaccard of the units (words, Han "
        "characters) >= %.2f: a lightly edited copy (an edit breaks up to 3 shingles but 1 "
        "unit; --edited 0 turns it off)\n",
        rule.edited_min_jaccard, rule.edited_threshold);
  } else {
    std::printf("  edited: off (--edited S turns it on; the default is %.2f)\n",
                PairRuleOptions().edited_threshold);
  }
  std::printf(
      "  boilerplate: off by default (every shingle weighs 1); with --boilerplate, a shingle "
      "found in F or more documents of the corpus weighs F / df (F >= %u, counted in dedup's "
      "first pass) and the similarities above are weighted\n\n",
      BoilerplateOptions().min_documents);
}

// Dedup's plan for a threshold: the pair rule verification applies, the LSH stage that finds its
// pairs, and the probability that a pair of each similarity is found.
int PrintLshPlan(const PlanArgs& args) {
  DedupOptions options;
  OptionValues values(OptionNaming::kFlag);
  Status valid = args.dedup_flags.Collect(&values);
  if (valid.ok()) valid = values.ApplyTo(&options);  // ValidateDedupOptions, flags named
  if (!valid.ok()) {
    PrintError(valid);
    return kExitUsage;
  }
  auto lsh = ResolveDedupLsh(options);
  if (!lsh.ok()) {
    PrintError(values.Renamed(lsh.status()));
    return kExitUsage;
  }
  const PairRuleOptions rule = ResolvePairRule(options);
  const LshParameters p = *lsh->parameters;
  const double lowest = LowestAcceptedJaccard(rule);
  PrintAcceptedPairs(rule);
  std::printf(
      "MinHash LSH plan: %d bands x %d rows = %d signature values%s; pairs down to Jaccard %.3f "
      "are candidates with probability %.3f\n",
      p.bands, p.rows, p.signature_size(),
      args.dedup_flags.Given("bands") ? " (as given)"
                                      : " (chosen for the lowest Jaccard the rule accepts)",
      lowest, LshCandidateProbability(lowest, p));
  std::printf(
      "memory: %d bytes of band keys per document, in temporary files; in memory, about 7 bytes "
      "per document on each thread during the LSH stage (the band's keys, 4; its records and "
      "their sort buffer, and its run of pairs, about 1 each; docs/dedup.md)\n\n",
      4 * p.bands);
  std::printf(
      "detection probability (a pair is a candidate), 1 - (1 - J^%d)^%d, by plain Jaccard J:\n",
      p.rows, p.bands);
  std::printf("  Jaccard   ");
  for (int j = 1; j <= 9; ++j) std::printf(" %6.1f", j / 10.0);
  std::printf("\n  P(found)  ");
  for (int j = 1; j <= 9; ++j) std::printf(" %6.3f", LshCandidateProbability(j / 10.0, p));
  std::printf("\n  P(missed) ");
  for (int j = 1; j <= 9; ++j) std::printf(" %6.0e", 1 - LshCandidateProbability(j / 10.0, p));
  std::printf("\n  accepted  ");
  for (int j = 1; j <= 9; ++j) {
    const double jaccard = j / 10.0;
    const bool near = rule.jaccard_threshold <= 0 || jaccard >= rule.jaccard_threshold - 1e-9;
    const bool edited = rule.edited_threshold > 0 && jaccard >= rule.edited_min_jaccard - 1e-9;
    std::printf(" %6s", near ? "yes" : edited ? "edited" : "no");
  }
  std::printf("\n");
  if (rule.edited_threshold > 0) {
    std::printf("  (edited: accepted when the unit Jaccard also reaches %.2f)\n",
                rule.edited_threshold);
  }
  if (rule.containment_threshold > 0) {
    std::printf(
        "\ncontained pairs (the smaller set a fraction r of the larger's size, containment c): "
        "Jaccard and detection probability\n");
    for (double c : {rule.containment_threshold, 1.0}) {
      std::printf("  c = %.2f: ", c);
      for (double r = std::max(0.1, rule.containment_min_ratio); r <= 1.0 + 1e-9; r += 0.1) {
        const double j = c * r / (1 + r - c * r);
        std::printf(" r %.1f: J %.2f P %.3f;", r, j, LshCandidateProbability(j, p));
      }
      std::printf("\n");
    }
  }
  std::printf(
      "\nexpected candidate pairs among n = %.4g documents if every pair had Jaccard J "
      "(add the duplicates' own pairs; unrelated texts are usually below 0.05):\n",
      args.n);
  for (double j : {0.0, 0.01, 0.02, 0.05, 0.1, 0.2}) {
    double pairs = ExpectedCandidatePairs(args.n, p, j);
    std::printf("  J = %-5.2f %12.4g pairs  (%.3g per document)\n", j, pairs,
                args.n > 0 ? 2 * pairs / args.n : 0.0);
  }
  return kExitOk;
}

// The index plan: the designs the planner prices for f, k, n and the budget, the Pareto frontier
// and the one it picks. InvalidArgument from the planner (k > bits/4) is a usage error.
int PrintIndexPlan(const PlanArgs& args, const PlanRequest& request, bool list) {
  auto designs = EnumerateIndexDesigns(request);
  if (!designs.ok()) {
    PrintError(designs.status());
    return kExitUsage;
  }
  auto chosen = PlanIndex(request);
  const MemoryBudget& budget = request.memory_budget;
  const double n = args.n;
  std::string budget_text = "unlimited";
  if (budget.bytes > 0 && budget.bytes_per_fingerprint == 0) {
    budget_text = std::to_string(budget.bytes / 1e9) + " GB";
  } else if (budget.bytes_per_fingerprint > 0) {
    budget_text = budget.ToString() + " (" + std::to_string(budget.TotalFor(n) / 1e9) + " GB)";
  }
  std::printf("plan: f=%d bits, k=%d, n=%.4g fingerprints, memory budget %s\n", request.bits,
              request.indexed_k, n, budget_text.c_str());
  std::printf(
      "cost model: 25 ns per directory bucket fetched, 2 ns per probe key, 0.5 ns per key of a "
      "bucket of <= 32 scanned whole (larger: 3 ns per binary-search step + 1 ns per "
      "candidate), 3 ns per table; memory = 8 B id "
      "+ f/8 B fingerprint + 8 B (128-bit: 12 B) per non-identity table + directories\n");
  if (list) {
    std::printf("\nall %zu candidate designs (sorted by memory):\n", designs->size());
    for (const IndexDesign& d : *designs) PrintRow(d, n, " ");
  }
  std::printf("\nPareto frontier (the pick for each budget range):\n");
  auto frontier = ParetoFrontier(*designs);
  for (size_t i = 0; i < frontier.size(); ++i) {
    const IndexDesign& d = frontier[i];
    double from = d.bytes_per_fingerprint * n;
    std::string range = "budget >= " + std::to_string(from / 1e9) + " GB";
    if (i + 1 < frontier.size())
      range += " and < " + std::to_string(frontier[i + 1].bytes_per_fingerprint * n / 1e9) + " GB";
    PrintRow(d, n, " ");
    std::printf("      picked when %s\n", range.c_str());
  }
  if (!chosen.ok()) {
    PrintError(chosen.status());
    return kExitFailure;
  }
  std::printf("\nchosen:\n");
  PrintRow(*chosen, n, "*");
  std::printf("tables (key bit ranges, bit 0 = most significant):\n");
  for (size_t t = 0; t < chosen->tables.size() && t < 64; ++t) {
    std::printf("  table %2zu: %2d key bits:", t, chosen->tables[t].key_bits);
    for (const BitRange& r : chosen->tables[t].key_ranges)
      std::printf(" [%d,%d)", r.start, r.start + r.width);
    std::printf("\n");
  }
  if (chosen->tables.size() > 64) std::printf("  ... %zu more\n", chosen->tables.size() - 64);
  return kExitOk;
}

// The index plan's request from the flags given (the planner's own defaults otherwise).
Status IndexPlanRequest(const PlanArgs& args, PlanRequest* request, bool* list) {
  OptionValues values(OptionNaming::kFlag);
  NEARDUP_RETURN_IF_ERROR(args.index_flags.Collect(&values));
  if (const OptionValue* v = values.Find("bits"))
    request->bits = static_cast<int>(std::get<int64_t>(*v));
  if (const OptionValue* v = values.Find("indexed_k"))
    request->indexed_k = static_cast<int>(std::get<int64_t>(*v));
  request->expected_size = args.n;
  if (const OptionValue* v = values.Find("memory_budget")) {
    Result<MemoryBudget> budget = ParseMemoryBudget(std::get<std::string>(*v));
    if (!budget.ok()) return budget.status().WithContext(values.NameOf("memory_budget"));
    request->memory_budget = *budget;
  }
  const OptionValue* v = values.Find("list");
  *list = v != nullptr && std::get<bool>(*v);
  return Status::Ok();
}

// The index plan's options, in the order of --help; -k,--max-distance (the name of the distance
// limit in every command) and -n,--documents are plan's spellings of the store's --indexed-k and
// --expected-size.
constexpr std::string_view kIndexPlanKeys[] = {"bits", "indexed_k", "expected_size",
                                               "memory_budget", "list"};

RunFunction SetupPlan(CLI::App* app) {
  auto args = std::make_shared<PlanArgs>();
  args->index_flags.DeclareKeys(app, std::span(kIndexPlanKeys, 1));  // --bits
  args->index_flags.DeclareKeyAs(app, "indexed_k", "-k,--max-distance");
  args->index_flags.DeclareKeyAs(app, "expected_size", "-n,--documents,--expected-size");
  args->index_flags.DeclareKeys(app, std::span(kIndexPlanKeys + 3, 2));  // --memory-budget --list
  args->index_flags.ShowDefault("expected_size", "1e6");
  args->index_flags.ShowDefault("memory_budget", "unlimited");
  args->dedup_flags.DeclareKeys(app, kLshPlanKeys);
  args->dedup_flags.DeclareKeys(app, kRuleKeys);
  app->footer(
      "Examples:\n"
      "  neardup plan -k 3 -n 1e9\n"
      "  neardup plan --bits 128 -k 6 -n 1e8 --memory-budget 64G\n"
      "  neardup plan -k 3 -n 8e9 --list\n"
      "  neardup plan --threshold 0.5 -n 1e7");
  return [args]() {
    OptionValues n(OptionNaming::kFlag);
    if (Status status = args->index_flags.Collect(&n); !status.ok()) {
      PrintError(status);
      return kExitUsage;
    }
    if (const OptionValue* v = n.Find("expected_size")) args->n = std::get<double>(*v);
    // Each flag belongs to one of the two plans: one of the other plan is a usage error, never
    // silently ignored.
    bool lsh_plan = false;
    for (std::string_view key : kLshPlanKeys) lsh_plan |= args->dedup_flags.Given(key);
    if (lsh_plan) {
      for (std::string_view key : kIndexPlanKeys) {
        if (key != "expected_size" && args->index_flags.Given(key)) {
          PrintError(args->index_flags.OptionOf(key)->get_name() +
                     " is an option of the index plan, not of the LSH plan (--threshold, "
                     "--bands, --rows)");
          return kExitUsage;
        }
      }
      return PrintLshPlan(*args);
    }
    for (std::string_view key : kRuleKeys) {
      if (args->dedup_flags.Given(key)) {
        const OptionSpec* spec = FindOption(key);
        PrintError(OptionDisplayName(*spec, OptionNaming::kFlag) +
                   " is an option of the LSH plan: give --threshold (or --bands and --rows)");
        return kExitUsage;
      }
    }
    PlanRequest request;
    bool list = false;
    if (Status status = IndexPlanRequest(*args, &request, &list); !status.ok()) {
      PrintError(status);
      return kExitUsage;
    }
    return PrintIndexPlan(*args, request, list);
  };
}

CommandRegistrar registrar("plan",
                           "choose the permuted-table index design for f, k, n and a memory "
                           "budget, or (--threshold) show dedup's MinHash LSH plan",
                           SetupPlan);

}  // namespace
}  // namespace neardup::cli
