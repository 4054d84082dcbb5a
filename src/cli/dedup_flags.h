// Command-line flags shared by `neardup dedup`, `neardup explain` and `neardup eval`: declares the
// fingerprint / reading / dedup options on a CLI11 subcommand and turns them into DedupOptions, so
// explain and eval judge pairs by exactly the rule dedup applies.
//
// Internal, header-only (CLI11 is header-only); included by src/cli/*_command.cc only.
#ifndef NEARDUP_CLI_DEDUP_FLAGS_H_
#define NEARDUP_CLI_DEDUP_FLAGS_H_

#include <CLI/CLI.hpp>
#include <map>
#include <string>

#include "cli/fingerprint_flags.h"
#include "neardup/dedup.h"

namespace neardup {

struct DedupFlags {
  cli::FingerprintFlags fingerprint;  // the same fingerprint flags as `neardup fingerprint`
  cli::InputFlags input;              // the same reading flags as every other command
  int k = DedupOptions().k;
  std::string keep = "first";
  double verify = -1;  // < 0 (not given): at --threshold
  double threshold = DedupOptions().lsh.threshold;
  int bands = 0;
  int rows = 0;
  uint32_t bucket_window = DedupOptions().lsh.bucket_window;
  std::string candidates = "lsh";
  std::string temp_dir;
  bool in_memory = false;
  double containment = DedupOptions().containment_threshold;
  double containment_min_shingles = DedupOptions().containment_min_shingles;
  double containment_min_ratio = DedupOptions().containment_min_ratio;
  bool boilerplate = DedupOptions().boilerplate;
  uint32_t boilerplate_min_documents = DedupOptions().boilerplate_options.min_documents;

  // Declares the flags on `app` (not the INPUT... arguments). `with_keep` adds --keep (dedup
  // only).
  void Declare(CLI::App* app, bool with_keep) {
    fingerprint.Add(app);
    input.Add(app, /*positional=*/false);
    app->add_option(
           "--threshold", threshold,
           "shingle Jaccard similarity of a duplicate pair; sets the LSH bands/rows and the "
           "verification threshold (see neardup plan --threshold)")
        ->capture_default_str();
    app->add_option("--bands", bands, "LSH bands (with --rows; default: chosen from --threshold)");
    app->add_option("--rows", rows, "LSH rows per band (with --bands)");
    app->add_option("--bucket-window", bucket_window,
                    "an LSH bucket pairs each document with the next N in input order")
        ->capture_default_str();
    app->add_option("--candidates", candidates,
                    "candidate stages: lsh (MinHash LSH) | lsh+simhash (also fingerprints within "
                    "-k) | simhash (fingerprints within -k only)")
        ->check(CLI::IsMember({"lsh+simhash", "lsh", "simhash"}))
        ->capture_default_str();
    app->add_option("-k,--max-distance", k,
                    "largest Hamming distance of a SimHash-join candidate pair (at most bits/8)")
        ->capture_default_str();
    if (with_keep) {
      app->add_option("--keep", keep,
                      "which document of a cluster to keep: first (first in input order) | "
                      "longest (longest normalised text) | field:NAME (highest numeric field)");
    }
    app->add_option("--temp-dir", temp_dir,
                    "directory for the run's temporary files (band keys, candidate pairs, "
                    "shingles; unlinked at once, so never left behind; default: $TMPDIR or /tmp)");
    app->add_flag("--in-memory", in_memory,
                  "keep band keys, candidate pairs and shingles in memory instead of temporary "
                  "files (same result, more memory)");
    app->add_option("--verify", verify,
                    "drop candidate pairs whose shingle Jaccard is below this (default: "
                    "--threshold; 0 = no verification)");
    app->add_option("--containment", containment,
                    "a pair whose smaller document lies at least this much inside the larger is "
                    "a duplicate (reason \"contained\"), given the size guard below; 0 = off")
        ->capture_default_str();
    app->add_option("--containment-min-shingles", containment_min_shingles,
                    "size guard of --containment: the smaller document has at least this many "
                    "shingles ...")
        ->capture_default_str();
    app->add_option("--containment-min-ratio", containment_min_ratio,
                    "... and at least this fraction of the larger one's (a quote does not "
                    "swallow an article)")
        ->capture_default_str();
    app->add_flag("--boilerplate,!--no-boilerplate", boilerplate,
                  "weigh down shingles found in many documents of the inputs (counted in the "
                  "first pass: templates, footers); off by default because the answer then "
                  "depends on the corpus (docs/quality.md)");
    app->add_option("--boilerplate-min-documents", boilerplate_min_documents,
                    "a shingle in at least this many documents (or more, when the frequency "
                    "sketch cannot resolve so few: summary.json) is boilerplate")
        ->capture_default_str();
  }

  // Builds the options; InvalidArgument names the bad option (the library's name).
  Status ToOptions(DedupOptions* options) const {
    NEARDUP_RETURN_IF_ERROR(fingerprint.ToOptions(&options->fingerprint));
    options->k = k;
    options->lsh.threshold = threshold;
    if (bands != 0 || rows != 0) options->lsh.parameters = LshParameters{bands, rows};
    options->lsh.bucket_window = bucket_window;
    options->candidates = candidates == "lsh"       ? DedupOptions::Candidates::kLsh
                          : candidates == "simhash" ? DedupOptions::Candidates::kSimHash
                                                    : DedupOptions::Candidates::kLshAndSimHash;
    NEARDUP_RETURN_IF_ERROR(ParseKeepPolicy(keep, &options->keep, &options->keep_field));
    if (verify >= 0) {
      options->verify_threshold = verify;
    } else if (verify != -1) {
      return Status::InvalidArgument("verify_threshold must be in [0, 1]");
    }
    options->containment_threshold = containment;
    options->containment_min_shingles = containment_min_shingles;
    options->containment_min_ratio = containment_min_ratio;
    options->boilerplate = boilerplate;
    options->boilerplate_options.min_documents = boilerplate_min_documents;
    options->threads = input.threads;
    options->spill = !in_memory;
    options->temp_directory = temp_dir;
    input.ToReaderOptions(&options->reader);
    options->reader.allow_invalid_utf8_text = fingerprint.replace_invalid;
    // The library's checks, with option names (the caller maps them to its own: WithFlagNames).
    return ValidateDedupOptions(*options);
  }
};

}  // namespace neardup

#endif  // NEARDUP_CLI_DEDUP_FLAGS_H_
