// DocumentSketcher: the fingerprint and the duplicate rule's sketch of one text; see
// neardup/sketch.h. The steps are dedup's per-document pass (dedup.cc, FingerprintBatch): the
// same functions, called in the same order.
#include "neardup/sketch.h"

#include <xxhash.h>

#include "dedup/shingle_hashes.h"
#include "neardup/pair_rule.h"
#include "neardup/shingles.h"

namespace neardup {

struct DocumentSketcher::Impl {
  std::unique_ptr<Fingerprinter> fingerprinter;
  std::unique_ptr<ShingleSimilarity> similarity;
  MinHashLsh lsh;
  bool share_normalization = false;
  uint64_t tag = 0;
  bool with_units = false;
  int unit_bits = 0;  // the width of the unit elements when with_units
};

DocumentSketcher::DocumentSketcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DocumentSketcher::~DocumentSketcher() = default;

Result<std::unique_ptr<DocumentSketcher>> DocumentSketcher::Create(
    const FingerprintOptions& fingerprint, const MinHashLshOptions& lsh_options, bool with_units,
    int unit_bits) {
  if (unit_bits != ShingleSimilarity::kUnitBits && unit_bits != 32) {
    return Status::InvalidArgument("unit_bits: " + std::to_string(unit_bits) + ", not " +
                                   std::to_string(ShingleSimilarity::kUnitBits) +
                                   " (the pair rule's) or 32 (a store of verification form 2)");
  }
  auto fingerprinter = Fingerprinter::Create(fingerprint);
  if (!fingerprinter.ok()) return fingerprinter.status().WithContext("fingerprint options");
  auto similarity = ShingleSimilarity::Create(fingerprint.normalize.traditional_to_simplified);
  if (!similarity.ok()) return similarity.status();
  auto lsh = MinHashLsh::Create(lsh_options);
  if (!lsh.ok()) return lsh.status();
  auto impl = std::unique_ptr<Impl>(new Impl{std::move(*fingerprinter), std::move(*similarity),
                                             std::move(*lsh), false, 0, with_units,
                                             with_units ? unit_bits : 0});
  impl->share_normalization = SameNormalization(fingerprint, impl->similarity->normalize_options());
  impl->tag = LshTag(impl->lsh.parameters(), lsh_options.seed);
  return std::unique_ptr<DocumentSketcher>(new DocumentSketcher(std::move(impl)));
}

Status DocumentSketcher::Sketch(std::string_view text, Fingerprint* fingerprint,
                                DocumentSketch* sketch) const {
  thread_local std::string normalized;
  thread_local std::vector<uint64_t> units, shingles, unit_set;
  // The pair rule's hash facts (PairDocument), as dedup's per-document pass computes them.
  sketch->content_hash = XXH3_64bits(text.data(), text.size());
  sketch->text_bytes = text.size();
  sketch->squeezed_hash = WhitespaceFreeHash(text);
  sketch->lsh_tag = impl_->tag;
  Result<Fingerprint> fp = impl_->share_normalization
                               ? impl_->fingerprinter->Compute(text, &normalized)
                               : impl_->fingerprinter->Compute(text);
  if (!fp.ok()) return fp.status();
  *fingerprint = *fp;
  sketch->has_units = impl_->with_units;
  sketch->unit_bits = impl_->unit_bits;
  sketch->units.clear();
  if (impl_->share_normalization) {
    ShingleHashesInOrder(normalized, &units, &shingles);
    if (impl_->with_units) NarrowedUnitSet(units, &sketch->units, impl_->unit_bits);
  } else if (impl_->with_units) {
    if (impl_->similarity->ShinglesAndUnits(text, &shingles, &unit_set).ok()) {
      ShingleSimilarity::NarrowUnits(unit_set, &sketch->units, impl_->unit_bits);
    } else {
      shingles.clear();
    }
  } else if (!impl_->similarity->Shingles(text, &shingles).ok()) {
    shingles.clear();  // as dedup: a text that cannot be shingled has no shingles
  }
  NarrowedSet(shingles, &sketch->shingles);
  sketch->band_keys.resize(impl_->lsh.parameters().bands);
  if (!impl_->lsh.BandKeysOf(shingles, sketch->band_keys)) sketch->band_keys.clear();
  return Status::Ok();
}

const Fingerprinter& DocumentSketcher::fingerprinter() const { return *impl_->fingerprinter; }
const MinHashLsh& DocumentSketcher::lsh() const { return impl_->lsh; }
uint64_t DocumentSketcher::lsh_tag() const { return impl_->tag; }
bool DocumentSketcher::with_units() const { return impl_->with_units; }
int DocumentSketcher::unit_bits() const { return impl_->unit_bits; }

}  // namespace neardup
