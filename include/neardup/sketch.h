// DocumentSketch: what neardup's duplicate rule (neardup/dedup.h: exact, whitespace-only, or a
// MinHash LSH candidate whose shingle Jaccard reaches the threshold) needs to know of one text,
// so that a store can apply the rule to texts it no longer has. DocumentSketcher computes it,
// with the fingerprint, in one pass over the text, with the very steps `neardup dedup` runs per
// document (the Fingerprinter's normalised text cut into shingles, their narrowed set, the MinHash
// band keys of MinHashLsh).
//
//   text --DocumentSketcher::Sketch--> fingerprint + DocumentSketch --DocumentStore::Check...
//
// Thread safety: a DocumentSketcher is immutable after Create(); Sketch() may run on any number of
// threads at once. A DocumentSketch is a plain value.
#ifndef NEARDUP_SKETCH_H_
#define NEARDUP_SKETCH_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "neardup/export.h"
#include "neardup/fingerprint.h"
#include "neardup/fingerprinter.h"
#include "neardup/minhash_lsh.h"
#include "neardup/shingles.h"
#include "neardup/status.h"

namespace neardup {

struct DocumentSketch {
  uint64_t content_hash = 0;   // XXH3-64 of the raw text (with text_bytes: exact duplicates)
  uint64_t text_bytes = 0;     // bytes of the raw text
  uint64_t squeezed_hash = 0;  // XXH3-64 of the text without whitespace (whitespace-only copies)
  // The `bands` MinHash LSH band keys of the verification shingles, or empty when the text has no
  // shingles (empty once normalised): such a text is a duplicate only by the two hashes above.
  std::vector<uint32_t> band_keys;
  // The narrowed shingle set (ShingleSimilarity::Narrow: sorted distinct 32-bit values) that the
  // Jaccard verification compares.
  std::vector<uint32_t> shingles;
  // The narrowed unit set (words, Han characters: ShingleSimilarity's units) that the pair rule's
  // `edited` reason compares; made only by a sketcher created with units (a store whose rule has
  // the reason on needs them), else empty.
  std::vector<uint32_t> units;
  bool has_units = false;  // the sketcher made `units`
  int unit_bits = 0;       // ... of values this wide (DocumentSketcher::unit_bits); else 0
  // Which LSH parameters made band_keys (LshTag, neardup/minhash_lsh.h); a store refuses a
  // sketch made with others.
  uint64_t lsh_tag = 0;
};

class NEARDUP_EXPORT DocumentSketcher {
 public:
  // InvalidArgument naming the option for bad fingerprint or LSH options. `with_units`: Sketch
  // also makes the unit set (for a store whose pair rule has the `edited` reason on) of
  // `unit_bits`-bit values (ShingleSimilarity::NarrowUnits): kUnitBits, what the pair rule
  // compares everywhere, or 32 for a store of verification form 2 (as
  // DocumentStore::SketchUnitBits() says); any other width is InvalidArgument.
  static Result<std::unique_ptr<DocumentSketcher>> Create(
      const FingerprintOptions& fingerprint, const MinHashLshOptions& lsh, bool with_units = false,
      int unit_bits = ShingleSimilarity::kUnitBits);
  ~DocumentSketcher();
  DocumentSketcher(const DocumentSketcher&) = delete;
  DocumentSketcher& operator=(const DocumentSketcher&) = delete;

  // The fingerprint and sketch of `text`; the Fingerprinter's errors (e.g. invalid UTF-8).
  Status Sketch(std::string_view text, Fingerprint* fingerprint, DocumentSketch* sketch) const;

  const Fingerprinter& fingerprinter() const;
  const MinHashLsh& lsh() const;
  uint64_t lsh_tag() const;
  bool with_units() const;
  int unit_bits() const;  // the width of the unit sets made (0 without units)

 private:
  struct NEARDUP_HIDDEN Impl;
  explicit DocumentSketcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace neardup

#endif  // NEARDUP_SKETCH_H_
