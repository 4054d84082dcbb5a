// Opening a store from the command line with the shared fingerprint flags: a new store records the
// fingerprint options the flags choose; an existing store is used with the options it recorded,
// and a flag given with another value than the recorded one is an error naming the flag (the
// library's OpenStoreWithFingerprintOptions, neardup/options.h, with the flags given).
//
// Internal header of the command-line tool (`index` and `serve`).
#ifndef NEARDUP_CLI_STORE_FLAGS_H_
#define NEARDUP_CLI_STORE_FLAGS_H_

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "cli/fingerprint_flags.h"
#include "cli/report.h"
#include "neardup/options.h"
#include "neardup/sketch.h"
#include "neardup/status.h"
#include "neardup/store.h"

namespace neardup::cli {

// The duplicate rule of a store being created (`index create`, `serve` of a new directory):
// --rule, and for the dedup rule the LSH flags `neardup dedup` takes (same names and defaults).
struct RuleFlags {
  std::string rule = "dedup";
  double threshold = MinHashLshOptions().threshold;
  int bands = 0;
  int rows = 0;
  uint32_t bucket_window = MinHashLshOptions().bucket_window;
  // The `contained` reason of a new dedup-rule store (recorded in its MANIFEST).
  double containment = PairRuleOptions().containment_threshold;
  double containment_min_shingles = PairRuleOptions().containment_min_shingles;
  double containment_min_ratio = PairRuleOptions().containment_min_ratio;
  bool rule_given = false, lsh_given = false;
  bool containment_given = false, min_shingles_given = false, min_ratio_given = false;

  void Declare(CLI::App* app) {
    app->add_option("--rule", rule,
                    "duplicate rule of a new store: dedup (the rule of `neardup dedup`: exact, "
                    "whitespace-only, or MinHash LSH candidates with verified shingle Jaccard >= "
                    "--threshold) | simhash (fingerprints within -k only; stores bare "
                    "fingerprints)")
        ->check(CLI::IsMember({"dedup", "simhash"}))
        ->capture_default_str()
        ->each([this](const std::string&) { rule_given = true; });
    auto lsh = [this](const std::string&) { lsh_given = true; };
    app->add_option("--threshold", threshold,
                    "dedup rule of a new store: shingle Jaccard similarity of a duplicate (sets "
                    "the LSH bands/rows, as `neardup dedup --threshold`)")
        ->capture_default_str()
        ->each(lsh);
    app->add_option("--bands", bands,
                    "dedup rule: LSH bands (with --rows; default: chosen from "
                    "--threshold)")
        ->each(lsh);
    app->add_option("--rows", rows, "dedup rule: LSH rows per band (with --bands)")->each(lsh);
    app->add_option("--bucket-window", bucket_window,
                    "dedup rule: a check looks at the newest N documents of each LSH bucket")
        ->capture_default_str()
        ->each(lsh);
    app->add_option("--containment", containment,
                    "dedup rule of a new store: a pair whose smaller document lies at least this "
                    "much inside the larger is a duplicate (\"contained\"), given the size guard "
                    "below; 0 = off (as `neardup dedup --containment`)")
        ->capture_default_str()
        ->each([this](const std::string&) { containment_given = true; });
    app->add_option("--containment-min-shingles", containment_min_shingles,
                    "dedup rule: size guard of --containment: the smaller document has at least "
                    "this many shingles ...")
        ->capture_default_str()
        ->each([this](const std::string&) { min_shingles_given = true; });
    app->add_option("--containment-min-ratio", containment_min_ratio,
                    "... and at least this fraction of the larger one's")
        ->capture_default_str()
        ->each([this](const std::string&) { min_ratio_given = true; });
  }

  // Sets options->rule and options->lsh for creation (left unset when no flag was given, so an
  // existing store is opened with its own; a given flag must agree with it): the registry's
  // OptionValues::ApplyTo(StoreOptions*), as Python's Store keywords.
  Status Apply(StoreOptions* options) const {
    OptionValues values(OptionNaming::kFlag);
    if (rule_given) NEARDUP_RETURN_IF_ERROR(values.SetText("rule", rule));
    if (lsh_given) {
      NEARDUP_RETURN_IF_ERROR(values.Set("threshold", threshold));
      if (bands != 0) NEARDUP_RETURN_IF_ERROR(values.Set("bands", int64_t{bands}));
      if (rows != 0) NEARDUP_RETURN_IF_ERROR(values.Set("rows", int64_t{rows}));
      NEARDUP_RETURN_IF_ERROR(values.Set("bucket_window", int64_t{bucket_window}));
    }
    if (containment_given) NEARDUP_RETURN_IF_ERROR(values.Set("containment", containment));
    if (min_shingles_given) {
      NEARDUP_RETURN_IF_ERROR(values.Set("containment_min_shingles", containment_min_shingles));
    }
    if (min_ratio_given)
      NEARDUP_RETURN_IF_ERROR(values.Set("containment_min_ratio", containment_min_ratio));
    return values.ApplyTo(options);
  }
};

// The sketcher of texts for `store` (kDedup: its LSH options), with the fingerprint options the
// store recorded; null for a kSimHash store.
inline Result<std::unique_ptr<DocumentSketcher>> SketcherForStore(
    const DocumentStore& store, const FingerprintOptions& fingerprint) {
  const std::optional<MinHashLshOptions> lsh = store.LshOptions();
  if (!lsh) return std::unique_ptr<DocumentSketcher>();
  return DocumentSketcher::Create(fingerprint, *lsh);
}

// Creates a store at `dir` with `options`, recording the fingerprint options `flags` choose.
inline Result<std::unique_ptr<DocumentStore>> CreateStoreWithFingerprintOptions(
    const std::string& dir, StoreOptions options, const FingerprintFlags& flags,
    FingerprintOptions* fingerprint) {
  OptionValues given(OptionNaming::kFlag);
  NEARDUP_RETURN_IF_ERROR(flags.Values(&given));
  return neardup::CreateStoreWithFingerprintOptions(dir, std::move(options), given, fingerprint);
}

// A damaged or torn last log record dropped at open is never silent: "neardup: warning:
// DIR/wal-N.ndwal: B bytes dropped at offset O: why; kept in FILE".
inline void WarnIfLogTailDropped(const DocumentStore& store) {
  const StoreStats stats = store.Stats();
  if (stats.wal_dropped_bytes > 0) PrintWarning(stats.wal_dropped);
}

// Opens the store at `dir` to fingerprint text for it (see neardup/options.h); a log tail dropped
// at open is warned about.
inline Result<std::unique_ptr<DocumentStore>> OpenStoreWithFingerprintOptions(
    const std::string& dir, StoreOptions options, const FingerprintFlags& flags,
    FingerprintOptions* fingerprint) {
  OptionValues given(OptionNaming::kFlag);
  NEARDUP_RETURN_IF_ERROR(flags.Values(&given));
  auto opened =
      neardup::OpenStoreWithFingerprintOptions(dir, std::move(options), given, fingerprint);
  if (opened.ok()) WarnIfLogTailDropped(**opened);
  return opened;
}

}  // namespace neardup::cli

#endif  // NEARDUP_CLI_STORE_FLAGS_H_
