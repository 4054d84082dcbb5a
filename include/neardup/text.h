// Text normalisation: the first stage of fingerprinting, turning raw UTF-8 into the canonical form
// features are taken from (Unicode NFKC, case folding, whitespace folding, Traditional to
// Simplified Chinese, HTML/XML markup stripping and entity decoding), each step switchable.
//
// Thread safety: a TextNormalizer is immutable after Create(); Normalize() may be called from any
// number of threads at once.
#ifndef NEARDUP_TEXT_H_
#define NEARDUP_TEXT_H_

#include <memory>
#include <string>
#include <string_view>

#include "neardup/export.h"
#include "neardup/status.h"

namespace neardup {

struct NormalizeOptions {
  // Invalid UTF-8 is an error (kInvalidUtf8 naming the byte offset) unless this is true, in which
  // case every invalid byte becomes U+FFFD and normalisation continues.
  bool replace_invalid_utf8 = false;
  // Remove HTML/XML tags, comments, <script>/<style> bodies and decode character entities
  // (&amp; &lt; &#x4E2D; ...). Block-level tags become a line break so words do not run together.
  // A '<' with no '>' after it stays text. On by default: on the devpairs set it lifts recall of
  // HTML-wrapped copies without false positives (it also drops "<stdio.h>"-like text, the same
  // way in every document).
  bool strip_markup = true;
  // Unicode NFKC (full-width ASCII -> ASCII, half-width katakana -> full-width, ligatures ...).
  bool nfkc = true;
  // Unicode full case folding ("Straße" -> "strasse", "ΣΊΣΥΦΟΣ" -> "σίσυφοσ").
  bool case_fold = true;
  // Traditional -> Simplified Chinese with OpenCC (config below). Costs time on Han text only.
  // A NUL byte cuts the text into pieces converted one by one (OpenCC itself would stop there).
  bool traditional_to_simplified = true;
  // Every run of Unicode whitespace becomes one ASCII space; leading/trailing space is dropped.
  bool fold_whitespace = true;
  // OpenCC configuration file; empty means NEARDUP_DEFAULT_OPENCC_DIR "/t2s.json".
  std::string opencc_config;
  // Shortcuts that give the same output as the plain path: no markup pass over text without '<'
  // or '&', NFKC / case folding code point by code point from tables built once from ICU (text
  // cut where ICU's Normalizer2::hasBoundaryBefore allows; ICU itself only on the pieces the
  // tables do not cover, such as combining sequences), OpenCC only on the pieces of text that
  // hold a character it may convert (cut at characters outside every dictionary key), reused
  // per-thread buffers.
  // false runs every step over the whole text as ICU/OpenCC do (the reference for differential
  // tests and benchmarks).
  bool fast_paths = true;
};

class NEARDUP_EXPORT TextNormalizer {
 public:
  // Builds a normalizer; fails (kNotFound / kInvalidArgument) if the OpenCC configuration cannot
  // be loaded while traditional_to_simplified is on.
  static Result<std::unique_ptr<TextNormalizer>> Create(const NormalizeOptions& options);
  ~TextNormalizer();
  TextNormalizer(const TextNormalizer&) = delete;
  TextNormalizer& operator=(const TextNormalizer&) = delete;

  // Writes the normalised form of `text` to *out (replacing its contents). Returns kInvalidUtf8
  // "invalid UTF-8 at byte N" when `text` is not valid UTF-8 and replacement is off.
  Status Normalize(std::string_view text, std::string* out) const;

  const NormalizeOptions& options() const;

  struct NEARDUP_HIDDEN Impl;  // internal (opaque)

 private:
  explicit TextNormalizer(const NormalizeOptions& options);
  std::unique_ptr<Impl> impl_;
};

// Markup stripping on its own: removes tags, comments, <script>/<style> content and decodes
// entities. Input must be valid UTF-8; the output is valid UTF-8.
NEARDUP_EXPORT std::string StripMarkup(std::string_view html);
// The same, writing into *out (replacing its contents; its capacity is reused).
NEARDUP_EXPORT void StripMarkupTo(std::string_view html, std::string* out);

// Whitespace folding on its own (see NormalizeOptions::fold_whitespace). Input must be valid UTF-8.
NEARDUP_EXPORT std::string FoldWhitespace(std::string_view text);
// The same, writing into *out (replacing its contents; its capacity is reused).
NEARDUP_EXPORT void FoldWhitespaceTo(std::string_view text, std::string* out);

}  // namespace neardup

#endif  // NEARDUP_TEXT_H_
