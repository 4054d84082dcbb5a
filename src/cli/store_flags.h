// Opening a store from the command line with the shared fingerprint flags: a new store records the
// fingerprint options the flags choose; an existing store is used with the options it recorded, and
// a flag given with another value than the recorded one is an error naming the flag.
//
// Internal header of the command-line tool (`index` and `serve`).
#ifndef NEARDUP_CLI_STORE_FLAGS_H_
#define NEARDUP_CLI_STORE_FLAGS_H_

#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "cli/fingerprint_flags.h"
#include "cli/report.h"
#include "neardup/fingerprinter.h"
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
  bool rule_given = false, lsh_given = false;

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
  }

  // Sets options->rule and options->lsh for creation (left unset when no flag was given, so an
  // existing store is opened with its own; a given flag must agree with it).
  Status Apply(StoreOptions* options) const {
    if (rule_given || lsh_given) {
      options->rule = rule == "simhash" ? StoreRule::kSimHash : StoreRule::kDedup;
    }
    if (rule == "simhash") {
      if (lsh_given) {
        return Status::InvalidArgument(
            "--threshold, --bands, --rows and --bucket-window set the dedup rule, not --rule "
            "simhash");
      }
      return Status::Ok();
    }
    if (lsh_given) {
      MinHashLshOptions lsh;
      lsh.threshold = threshold;
      if (bands != 0 || rows != 0) lsh.parameters = LshParameters{bands, rows};
      lsh.bucket_window = bucket_window;
      NEARDUP_RETURN_IF_ERROR(ResolveLshParameters(lsh).status());
      options->lsh = lsh;
    }
    return Status::Ok();
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

// The options of canonical form `text` (FingerprintOptionsToString) by key.
inline std::map<std::string, std::string> OptionsByKey(std::string_view text) {
  std::map<std::string, std::string> values;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view pair = text.substr(pos, end - pos);
    size_t equals = pair.find('=');
    if (equals != std::string_view::npos) {
      values[std::string(pair.substr(0, equals))] = std::string(pair.substr(equals + 1));
    }
    pos = end + 1;
  }
  return values;
}

// The fingerprint options to use with a store that recorded `recorded` (FingerprintOptionsToString;
// empty for a store created without them, whose fingerprints are `store_bits` wide): the recorded
// options, and InvalidArgument naming the flag when a given flag asks for another value.
inline Result<FingerprintOptions> FingerprintOptionsForStore(const std::string& dir,
                                                             const std::string& recorded,
                                                             int store_bits,
                                                             FingerprintFlags flags) {
  FingerprintOptions base;
  if (recorded.empty()) {
    base.bits = store_bits;
  } else {
    Result<FingerprintOptions> parsed = ParseFingerprintOptions(recorded);
    if (!parsed.ok()) return parsed.status().WithContext(dir);
    base = std::move(*parsed);
  }
  flags.FillUnsetFrom(base);
  FingerprintOptions wanted;
  NEARDUP_RETURN_IF_ERROR(flags.ToOptions(&wanted));
  if (wanted.profile == base.profile) {  // options no flag sets stay as recorded
    wanted.features.sublinear_tf = base.features.sublinear_tf;
    wanted.features.drop_single_char_words = base.features.drop_single_char_words;
    wanted.features.drop_stop_words = base.features.drop_stop_words;
    wanted.features.jieba_hmm = base.features.jieba_hmm;
    wanted.normalize.opencc_config = base.normalize.opencc_config;
  }
  if (wanted.bits != store_bits) {
    return Status::InvalidArgument(dir + ": the store holds " + std::to_string(store_bits) +
                                   "-bit fingerprints, not --bits " + std::to_string(wanted.bits));
  }
  if (recorded.empty()) return wanted;
  const std::map<std::string, std::string> had = OptionsByKey(recorded);
  const std::map<std::string, std::string> want = OptionsByKey(FingerprintOptionsToString(wanted));
  std::string differences;
  for (const auto& [key, value] : want) {
    auto it = had.find(key);
    const std::string old_value = it == had.end() ? "" : it->second;
    if (old_value == value) continue;
    if (!differences.empty()) differences += ", ";
    const char* flag = FingerprintFlags::FlagForOption(key);
    differences += key + "=" + old_value + ", not " + key + "=" + value + " (" +
                   (*flag ? flag : "--profile") + ")";
  }
  if (!differences.empty()) {
    return Status::InvalidArgument(
        dir + ": the store was created with other fingerprint options: " + differences +
        "; fingerprints made with other options are not comparable (give the options the store "
        "was created with, or none to use them)");
  }
  return wanted;
}

// Creates a store at `dir` with `options`, recording the fingerprint options `flags` choose
// (checked by building a Fingerprinter first). *fingerprint gets them.
inline Result<std::unique_ptr<DocumentStore>> CreateStoreWithFingerprintOptions(
    const std::string& dir, StoreOptions options, const FingerprintFlags& flags,
    FingerprintOptions* fingerprint) {
  NEARDUP_RETURN_IF_ERROR(flags.ToOptions(fingerprint));
  options.bits = fingerprint->bits;
  options.fingerprint_options = FingerprintOptionsToString(*fingerprint);
  options.create_if_missing = true;
  return DocumentStore::Open(dir, options);
}

// A damaged or torn last log record dropped at open is never silent: "neardup: warning:
// DIR/wal-N.ndwal: B bytes dropped at offset O: why; kept in FILE".
inline void WarnIfLogTailDropped(const DocumentStore& store) {
  const StoreStats stats = store.Stats();
  if (stats.wal_dropped_bytes > 0) PrintWarning(stats.wal_dropped);
}

// Opens the store at `dir`: an existing one with the fingerprint options it recorded (a given
// flag must agree), a missing one (only if options.create_if_missing) created with the options
// `flags` choose. *fingerprint gets the options to fingerprint texts for this store with.
inline Result<std::unique_ptr<DocumentStore>> OpenStoreWithFingerprintOptions(
    const std::string& dir, StoreOptions options, const FingerprintFlags& flags,
    FingerprintOptions* fingerprint) {
  const bool create = options.create_if_missing;
  options.create_if_missing = false;
  options.fingerprint_options.clear();
  auto opened = DocumentStore::Open(dir, options);
  if (opened.ok()) WarnIfLogTailDropped(**opened);
  if (!opened.ok()) {
    if (create && opened.status().code() == StatusCode::kNotFound) {
      return CreateStoreWithFingerprintOptions(dir, options, flags, fingerprint);
    }
    return opened.status();
  }
  const StoreStats stats = (*opened)->Stats();
  Result<FingerprintOptions> resolved =
      FingerprintOptionsForStore(dir, stats.fingerprint_options, stats.bits, flags);
  if (!resolved.ok()) {
    (void)(*opened)->Close();
    return resolved.status();
  }
  *fingerprint = std::move(*resolved);
  return opened;
}

}  // namespace neardup::cli

#endif  // NEARDUP_CLI_STORE_FLAGS_H_
