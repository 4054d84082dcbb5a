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
#include <span>
#include <string>
#include <string_view>

#include "cli/fingerprint_flags.h"
#include "cli/option_flags.h"
#include "cli/report.h"
#include "neardup/options.h"
#include "neardup/sketch.h"
#include "neardup/status.h"
#include "neardup/store.h"

namespace neardup::cli {

// The store's flags, made from the option registry (neardup/options.h, kStoreScope and dedup's
// LSH, containment and edited options for the rule of a new store): --rule, --threshold, --bands,
// --rows, --bucket-window, --containment, --containment-min-shingles, --containment-min-ratio,
// --edited, --edited-min-jaccard, --indexed-k,
// --memory-budget, --expected-size, --sync, --group-commit-ms, --memtable-limit,
// --wal-flush-bytes, --no-verify (the old names --max-k and --expected-documents work, with a
// warning); names, help, defaults and checks are the registry's, as Python's Store keywords.
class StoreFlags {
 public:
  // The rule and index design of a new store (`index create`, `serve`).
  static constexpr std::string_view kCreation[] = {"rule",
                                                   "threshold",
                                                   "bands",
                                                   "rows",
                                                   "bucket_window",
                                                   "containment_threshold",
                                                   "containment_min_shingles",
                                                   "containment_min_ratio",
                                                   "edited_threshold",
                                                   "edited_min_jaccard",
                                                   "indexed_k",
                                                   "memory_budget",
                                                   "expected_size"};
  // How a store writes (`index add`, `serve`). --group-commit-ms without group commit (given, or
  // the command's default sync mode) is a usage error (OptionValues::ApplyTo).
  static constexpr std::string_view kWriting[] = {"sync", "group_commit_ms", "memtable_limit",
                                                  "wal_flush_bytes"};
  // How a store is opened (`serve`, `index stats`).
  static constexpr std::string_view kOpening[] = {"verify_checksums"};

  void Declare(CLI::App* app, std::span<const std::string_view> keys) {
    flags_.DeclareKeys(app, keys);
  }
  // See RegistryFlags::ShowDefault.
  void ShowDefault(std::string_view key, const std::string& text) { flags_.ShowDefault(key, text); }

  // The flags given, checked by the registry (errors name the flag).
  Status Values(OptionValues* values) const { return flags_.Collect(values); }

  // Sets the StoreOptions fields of the flags given (OptionValues::ApplyTo(StoreOptions*)): the
  // others keep their values, so the rule stays unset when no rule flag is given and an existing
  // store is opened with its own (a given one must agree). InvalidArgument for contradictory
  // flags (--rule simhash with --threshold): a usage error.
  Status Apply(StoreOptions* options) const {
    OptionValues values(OptionNaming::kFlag);
    NEARDUP_RETURN_IF_ERROR(Values(&values));
    return values.ApplyTo(options);
  }

  bool Given(std::string_view key) const { return flags_.Given(key); }

 private:
  RegistryFlags flags_;
};

// The sketcher of texts for `store` (kDedup: its LSH options, and unit sets when its pair rule
// needs them), with the fingerprint options the store recorded; null for a kSimHash store.
inline Result<std::unique_ptr<DocumentSketcher>> SketcherForStore(
    const DocumentStore& store, const FingerprintOptions& fingerprint) {
  const std::optional<MinHashLshOptions> lsh = store.LshOptions();
  if (!lsh) return std::unique_ptr<DocumentSketcher>();
  return DocumentSketcher::Create(
      fingerprint, *lsh, store.SketchesNeedUnits(),
      store.SketchesNeedUnits() ? store.SketchUnitBits() : ShingleSimilarity::kUnitBits);
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
