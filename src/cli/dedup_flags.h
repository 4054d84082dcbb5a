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
  int k = DedupOptions().max_distance;
  std::string keep = "first";
  double verify = DedupOptions().verify_threshold;
  std::string join = "auto";

  // Declares the flags on `app` (not the INPUT... arguments). `with_keep` adds --keep (dedup
  // only).
  void Declare(CLI::App* app, bool with_keep) {
    fingerprint.Add(app);
    input.Add(app, /*positional=*/false);
    app->add_option("-k,--max-distance", k,
                    "largest Hamming distance of a candidate pair; -1 = auto: 16 up to 200000 "
                    "documents, 6 above (the k = 16 join is close to all pairs)");
    if (with_keep) {
      app->add_option("--keep", keep,
                      "which document of a cluster to keep: first (first in input order) | "
                      "longest (longest normalised text) | field:NAME (highest numeric field)");
    }
    app->add_option(
        "--verify", verify,
        "drop candidate pairs whose shingle Jaccard is below this (0 = no verification)");
    app->add_option("--join", join,
                    "self-join: auto | index (permuted tables) | blocks (pigeonhole blocks)")
        ->check(CLI::IsMember({"auto", "index", "blocks"}));
  }

  // Builds the options; InvalidArgument names the bad flag.
  Status ToOptions(DedupOptions* options) const {
    NEARDUP_RETURN_IF_ERROR(fingerprint.ToOptions(&options->fingerprint));
    const int bits = options->fingerprint.bits;
    options->max_distance = k;
    if ((k < 0 && k != DedupOptions::kAutoDistance) || k > bits / 4) {
      return Status::InvalidArgument("-k/--max-distance: must be in [0, " +
                                     std::to_string(bits / 4) + "], or -1 for auto");
    }
    NEARDUP_RETURN_IF_ERROR(ParseKeepPolicy(keep, &options->keep, &options->keep_field));
    if (verify < 0 || verify > 1) return Status::InvalidArgument("--verify: must be in [0, 1]");
    options->verify_threshold = verify;
    options->threads = input.threads;
    input.ToReaderOptions(&options->reader);
    options->reader.allow_invalid_utf8_text = fingerprint.replace_invalid;
    options->join = join == "index"    ? DedupOptions::Join::kPermutedIndex
                    : join == "blocks" ? DedupOptions::Join::kBlocks
                                       : DedupOptions::Join::kAuto;
    return Status::Ok();
  }
};

}  // namespace neardup

#endif  // NEARDUP_CLI_DEDUP_FLAGS_H_
