// Command-line flags shared by `neardup dedup`, `neardup explain` and `neardup eval`: declares the
// fingerprint / dedup options on a CLI11 subcommand and turns them into DedupOptions.
//
// Internal, header-only (CLI11 is header-only); included by src/cli/*_command.cc only.
#ifndef NEARDUP_DEDUP_DEDUP_FLAGS_H_
#define NEARDUP_DEDUP_DEDUP_FLAGS_H_

#include <CLI/CLI.hpp>
#include <map>
#include <string>

#include "neardup/dedup.h"

namespace neardup {

struct DedupFlags {
  std::string tokenizer = "auto";
  std::string weighting = "tf";
  int shingle_size = -1;  // -1: library default
  int ngram = -1;
  size_t top_k = 0;
  int bits = 64;
  int k = DedupOptions().max_distance;
  std::string keep = "first";
  double verify = DedupOptions().verify_threshold;
  int threads = 0;
  bool strict = false;
  bool no_t2s = false;
  bool no_strip_markup = false;
  bool no_nfkc = false;
  bool no_case_fold = false;
  std::string id_field = "id";
  std::string text_field = "text";
  bool stdin_text = false;
  std::string join = "auto";

  // Declares the flags on `app`. `with_keep` adds --keep (dedup only).
  void Declare(CLI::App* app, bool with_keep) {
    app->add_option("--tokenizer", tokenizer, "auto (by script) | jieba | icu | char")
        ->check(CLI::IsMember({"auto", "jieba", "icu", "char"}))
        ->capture_default_str();
    app->add_option("--weighting", weighting, "tf | tfidf | uniform")
        ->check(CLI::IsMember({"tf", "tfidf", "uniform"}))
        ->capture_default_str();
    app->add_option("--shingle", shingle_size, "words per feature shingle (default: library's)");
    app->add_option("--ngram", ngram, "characters per n-gram for --tokenizer char");
    app->add_option("--top-k", top_k, "hash only the K heaviest features (0 = all features)")
        ->capture_default_str();
    app->add_option("--bits", bits, "fingerprint width: 64 or 128")
        ->check(CLI::IsMember({64, 128}))
        ->capture_default_str();
    app->add_option("-k,--distance", k,
                    "largest Hamming distance of a duplicate pair; default auto: 16 up to 200000 "
                    "documents, 6 above (the k = 16 join is close to all pairs)");
    if (with_keep) {
      app->add_option("--keep", keep,
                      "which document of a cluster to keep: first | longest | field:NAME")
          ->capture_default_str();
    }
    app->add_option(
           "--verify", verify,
           "drop candidate pairs whose shingle Jaccard is below this (0 = no verification)")
        ->capture_default_str();
    app->add_option("--threads", threads, "worker threads (0 = all cores)")->capture_default_str();
    app->add_flag("--strict", strict, "stop at the first malformed record instead of skipping it");
    app->add_flag("--no-t2s", no_t2s, "do not fold Traditional Chinese to Simplified");
    app->add_flag("--no-strip-markup", no_strip_markup, "do not strip HTML/XML markup");
    app->add_flag("--no-nfkc", no_nfkc, "do not apply Unicode NFKC");
    app->add_flag("--no-case-fold", no_case_fold, "do not fold case");
    app->add_option("--id-field", id_field, "JSONL field holding the id")->capture_default_str();
    app->add_option("--text-field", text_field, "JSONL field holding the text")
        ->capture_default_str();
    app->add_option("--join", join,
                    "self-join: auto | index (permuted tables) | blocks (pigeonhole blocks)")
        ->check(CLI::IsMember({"auto", "index", "blocks"}))
        ->capture_default_str();
    app->add_flag("--stdin-text", stdin_text,
                  "standard input is one plain-text document, not JSONL");
  }

  // Builds the options; InvalidArgument names the bad flag.
  Status ToOptions(DedupOptions* options) const {
    FingerprintOptions& fp = options->fingerprint;
    static const std::map<std::string, Tokenizer> kTokenizers = {{"auto", Tokenizer::kAuto},
                                                                 {"jieba", Tokenizer::kJieba},
                                                                 {"icu", Tokenizer::kIcuWord},
                                                                 {"char", Tokenizer::kCharNgram}};
    static const std::map<std::string, Weighting> kWeightings = {{"tf", Weighting::kTermFrequency},
                                                                 {"tfidf", Weighting::kTfIdf},
                                                                 {"uniform", Weighting::kUniform}};
    fp.features.tokenizer = kTokenizers.at(tokenizer);
    fp.features.weighting = kWeightings.at(weighting);
    if (shingle_size >= 0) fp.features.shingle_size = shingle_size;
    if (ngram >= 0) fp.features.char_ngram_size = ngram;
    fp.features.top_k = top_k;
    fp.bits = bits;
    if (no_t2s) fp.normalize.traditional_to_simplified = false;
    if (no_strip_markup) fp.normalize.strip_markup = false;
    if (no_nfkc) fp.normalize.nfkc = false;
    if (no_case_fold) fp.normalize.case_fold = false;
    options->max_distance = k;
    if ((k < 0 && k != DedupOptions::kAutoDistance) || k > bits / 4) {
      return Status::InvalidArgument("-k: must be in [0, " + std::to_string(bits / 4) +
                                     "], or -1 for auto");
    }
    NEARDUP_RETURN_IF_ERROR(ParseKeepPolicy(keep, &options->keep, &options->keep_field));
    if (verify < 0 || verify > 1) return Status::InvalidArgument("--verify: must be in [0, 1]");
    options->verify_threshold = verify;
    options->threads = threads;
    options->reader.strict = strict;
    options->reader.id_field = id_field;
    options->reader.text_field = text_field;
    options->reader.stdin_is_text = stdin_text;
    options->join = join == "index"    ? DedupOptions::Join::kPermutedIndex
                    : join == "blocks" ? DedupOptions::Join::kBlocks
                                       : DedupOptions::Join::kAuto;
    return Status::Ok();
  }
};

}  // namespace neardup

#endif  // NEARDUP_DEDUP_DEDUP_FLAGS_H_
