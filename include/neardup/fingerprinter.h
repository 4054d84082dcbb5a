// Fingerprinter: text in, SimHash fingerprint out. Ties normalisation (neardup/text.h), feature
// extraction (neardup/features.h) and SimHash (neardup/simhash.h) together behind one options
// struct whose defaults work for near-duplicate detection.
//
// Thread safety: a Fingerprinter is immutable after Create(); every const method may be called
// concurrently from any number of threads.
//
// Two profiles:
//   kNeardup        - the options below as given (defaults: markup stripping, NFKC, case
//                     folding, whitespace folding, Traditional->Simplified, jieba words for
//                     Chinese, ICU words elsewhere, word 2-shingles, sublinear TF weights,
//                     xxHash3, 64 bits).
//   kYanyiwuSimhash - reproduces the C++ library yanyiwu/simhash (cppjieba): no normalisation,
//                     jieba TF-IDF keywords (raw count x IDF, words missing from the IDF table get
//                     the table's average IDF, single-character words and stop words dropped, top
//                     `top_k`, default 5), Jenkins lookup3 (c << 32) | b, 64 bits, bit set when
//                     its sum > 0. Only FingerprintOptions::top_k, jieba_dir and idf_path are read.
//                     Where it can still differ from that library: keywords with EQUAL weight at
//                     the top-K cut keep their order of first occurrence here (as jieba), while
//                     cppjieba's partial_sort leaves the order of equal weights unspecified, so the
//                     word chosen at the cut (and hence the fingerprint) can differ; cppjieba's
//                     dictionary/segmentation must also be jieba's (dict.txt, idf.txt) for the
//                     values to agree.
#ifndef NEARDUP_FINGERPRINTER_H_
#define NEARDUP_FINGERPRINTER_H_

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/export.h"
#include "neardup/features.h"
#include "neardup/fingerprint.h"
#include "neardup/simhash.h"
#include "neardup/status.h"
#include "neardup/text.h"

namespace neardup {

enum class HashProfile {
  kNeardup,
  kYanyiwuSimhash,
};

struct FingerprintOptions {
  HashProfile profile = HashProfile::kNeardup;
  NormalizeOptions normalize;  // see neardup/text.h
  FeatureOptions features;     // see neardup/features.h (tokenizer, shingles, weighting, top_k)
  int bits = 64;               // 64 or 128
  FeatureHash hash = FeatureHash::kXxh3;
  // Texts longer than this are rejected with kResourceExhausted (0 = no limit).
  size_t max_text_bytes = size_t{256} << 20;
};

// The compatibility options of yanyiwu/simhash with `top_k` keywords.
NEARDUP_EXPORT FingerprintOptions YanyiwuSimhashOptions(size_t top_k = 5);

// The options that decide what a fingerprint means, as one canonical line of space-separated
// key=value pairs ("profile=neardup bits=64 hash=xxh3 tokenizer=auto shingle=2 ..."), to record
// beside stored fingerprints (StoreOptions::fingerprint_options). Values are percent-escaped
// (space, '%', '=', control bytes). Options that never change the fingerprint of an accepted text
// (fast_paths, replace_invalid_utf8, max_text_bytes) are left out.
NEARDUP_EXPORT std::string FingerprintOptionsToString(const FingerprintOptions& options);

// The inverse of FingerprintOptionsToString: keys not present keep their defaults.
// InvalidArgument naming the key for an unknown key or a malformed value.
NEARDUP_EXPORT Result<FingerprintOptions> ParseFingerprintOptions(std::string_view text);

// A fingerprint with what it was computed from.
struct FingerprintDetails {
  Fingerprint fingerprint;
  // Number of distinct weighted features hashed. 0 only for a text that is empty after
  // normalisation (its fingerprint is then all zero bits). A non-empty text without any
  // word/character feature (e.g. only punctuation) is hashed as one feature: its whole normalised
  // form, so such texts do not all collapse to one fingerprint; feature_count is then 1 and
  // `whole_text_fallback` true.
  size_t feature_count = 0;
  bool whole_text_fallback = false;
  // The weighted features, heaviest first (only when asked for).
  std::vector<WeightedFeature> features;
  // The normalised text (only when asked for).
  std::string normalized_text;
};

class NEARDUP_EXPORT Fingerprinter {
 public:
  // Validates the options and loads dictionaries/tables. Errors name the option or file.
  static Result<std::unique_ptr<Fingerprinter>> Create(const FingerprintOptions& options);
  ~Fingerprinter();
  Fingerprinter(const Fingerprinter&) = delete;
  Fingerprinter& operator=(const Fingerprinter&) = delete;

  // The fingerprint of `text` (UTF-8). kInvalidUtf8 ("invalid UTF-8 at byte N") for invalid input
  // unless NormalizeOptions::replace_invalid_utf8; kResourceExhausted beyond max_text_bytes;
  // kInvalidArgument "no features: ..." for a text that normalises to nothing (only whitespace,
  // markup or control characters), which has no fingerprint (it would be all zeros, the same for
  // every such text).
  Result<Fingerprint> Compute(std::string_view text) const;
  // Whether `status` is Compute's "no features" refusal (dedup counts it as skip reason
  // "no_features", the service answers 400).
  static bool IsNoFeatures(const Status& status) {
    return status.code() == StatusCode::kInvalidArgument &&
           status.message().rfind("no features", 0) == 0;
  }

  // Like Compute, and writes the normalised text into *normalized_text (its old contents are
  // replaced, its capacity reused): for a caller that fingerprints many texts and also needs each
  // one's normalised text, without an allocation per text. `text` must not view *normalized_text.
  // Left unspecified on an error.
  Result<Fingerprint> Compute(std::string_view text, std::string* normalized_text) const;

  // Like Compute, with the feature count and optionally the features and normalised text.
  Result<FingerprintDetails> ComputeDetails(std::string_view text, bool keep_features = false,
                                            bool keep_normalized_text = false) const;

  // The weighted features of `text` (heaviest first), as Compute would hash them; empty for a
  // text with no features (which Compute refuses).
  Result<std::vector<WeightedFeature>> Features(std::string_view text) const;

  // The fingerprint of caller-supplied (feature, weight) pairs, hashed with the configured hash
  // and width (no normalisation or tokenisation). Weights must be finite (kInvalidArgument).
  Result<Fingerprint> ComputeFromFeatures(std::span<const WeightedFeature> features) const;

  const FingerprintOptions& options() const;

 private:
  struct NEARDUP_HIDDEN Impl;
  explicit Fingerprinter(const FingerprintOptions& options);
  // ComputeDetails' work; the normalised text goes to *normalized_text when it is not null.
  Status ComputeInto(std::string_view text, bool keep_features, std::string* normalized_text,
                     FingerprintDetails* details) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace neardup

#endif  // NEARDUP_FINGERPRINTER_H_
