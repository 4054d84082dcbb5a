// Command-line flags shared by `neardup dedup`, `neardup explain` and `neardup eval`: declares the
// fingerprint / dedup options on a CLI11 subcommand and turns them into DedupOptions.
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
  int k = DedupOptions().max_distance;
  std::string keep = "first";
  double verify = DedupOptions().verify_threshold;
  int threads = 0;
  bool strict = false;
  std::string id_field = "id";
  std::string text_field = "text";
  bool stdin_text = false;
  double threshold = DedupOptions().lsh.threshold;
  int bands = 0;
  int rows = 0;
  uint32_t bucket_window = DedupOptions().lsh.bucket_window;
  std::string candidates = "lsh";

  // Declares the flags on `app`. `with_keep` adds --keep (dedup only).
  void Declare(CLI::App* app, bool with_keep) {
    fingerprint.Add(app);
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
    app->add_option("-k,--distance", k,
                    "largest Hamming distance of a SimHash-join candidate pair (at most bits/8)")
        ->capture_default_str();
    if (with_keep) {
      app->add_option("--keep", keep,
                      "which document of a cluster to keep: first | longest | field:NAME")
          ->capture_default_str();
    }
    app->add_option("--verify", verify,
                    "drop candidate pairs whose shingle Jaccard is below this (default: "
                    "--threshold; 0 = no verification)");
    app->add_option("--threads", threads, "worker threads (0 = all cores)")->capture_default_str();
    app->add_flag("--strict", strict, "stop at the first malformed record instead of skipping it");
    app->add_option("--id-field", id_field, "JSONL field holding the id")->capture_default_str();
    app->add_option("--text-field", text_field, "JSONL field holding the text")
        ->capture_default_str();
    app->add_flag("--stdin-text", stdin_text,
                  "standard input is one plain-text document, not JSONL");
  }

  // Builds the options; InvalidArgument names the bad flag.
  Status ToOptions(DedupOptions* options) const {
    NEARDUP_RETURN_IF_ERROR(fingerprint.ToOptions(&options->fingerprint));
    const int bits = options->fingerprint.bits;
    options->max_distance = k;
    if (k < 0 || k > bits / 8) {
      return Status::InvalidArgument("-k: must be in [0, " + std::to_string(bits / 8) + "]");
    }
    if (!(threshold > 0 && threshold < 1)) {
      return Status::InvalidArgument("--threshold: must be in (0, 1)");
    }
    options->lsh.threshold = threshold;
    options->lsh.bands = bands;
    options->lsh.rows = rows;
    options->lsh.bucket_window = bucket_window;
    if (auto lsh = ResolveLshParameters(options->lsh); !lsh.ok()) return lsh.status();
    options->candidates = candidates == "lsh"       ? DedupOptions::Candidates::kLsh
                          : candidates == "simhash" ? DedupOptions::Candidates::kSimHash
                                                    : DedupOptions::Candidates::kLshAndSimHash;
    NEARDUP_RETURN_IF_ERROR(ParseKeepPolicy(keep, &options->keep, &options->keep_field));
    if (verify != DedupOptions::kVerifyAtThreshold && (verify < 0 || verify > 1)) {
      return Status::InvalidArgument("--verify: must be in [0, 1]");
    }
    options->verify_threshold = verify;
    options->threads = threads;
    options->reader.strict = strict;
    options->reader.id_field = id_field;
    options->reader.text_field = text_field;
    options->reader.stdin_is_text = stdin_text;
    return Status::Ok();
  }
};

}  // namespace neardup

#endif  // NEARDUP_CLI_DEDUP_FLAGS_H_
