// Stage 1 of dedup, the per-document pass: DocumentPass and ComputeDocumentColumns; see
// neardup/dedup_stages.h.
#include <xxhash.h>

#include <mutex>

#include "common/parallel.h"
#include "dedup/document_hashes.h"
#include "dedup/shingle_hashes.h"
#include "neardup/dedup_stages.h"

namespace neardup {

struct DocumentPass::Impl {
  DedupOptions options;
  std::unique_ptr<Fingerprinter> fingerprinter;
  std::unique_ptr<ShingleSimilarity> shingler;
  std::optional<MinHashLsh> lsh;
  bool use_lsh = false;
  int bands = 0;
  // The shingles are cut from the Fingerprinter's normalised text (the default options) instead
  // of normalising every document twice.
  bool share_normalization = false;
  // The normalised text is kept: for the shingles, or for keep longest.
  bool need_normalized = false;
  // The pair rule's `edited` reason is on: sets come with their unit sets.
  bool with_units = false;
};

DocumentPass::DocumentPass(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DocumentPass::~DocumentPass() = default;

Result<std::unique_ptr<DocumentPass>> DocumentPass::Create(const DedupOptions& options) {
  NEARDUP_RETURN_IF_ERROR(ValidateDedupOptions(options));
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  auto fingerprinter = Fingerprinter::Create(options.fingerprint);
  if (!fingerprinter.ok()) return fingerprinter.status().WithContext("fingerprint options");
  impl->fingerprinter = std::move(*fingerprinter);
  auto shingler =
      ShingleSimilarity::Create(options.fingerprint.normalize.traditional_to_simplified);
  if (!shingler.ok()) return shingler.status();
  impl->shingler = std::move(*shingler);
  auto lsh_options = ResolveDedupLsh(options);  // bands and rows for the pair rule's lowest Jaccard
  if (!lsh_options.ok()) return lsh_options.status();
  auto lsh = MinHashLsh::Create(*lsh_options);
  if (!lsh.ok()) return lsh.status();
  impl->lsh.emplace(std::move(*lsh));
  impl->use_lsh = options.candidates != DedupOptions::Candidates::kSimHash;
  impl->bands = impl->use_lsh ? impl->lsh->parameters().bands : 0;
  impl->share_normalization =
      impl->use_lsh && SameNormalization(options.fingerprint, impl->shingler->normalize_options());
  impl->need_normalized = impl->share_normalization || options.keep == KeepPolicy::kLongest;
  impl->with_units = options.edited_threshold > 0;
  return std::unique_ptr<DocumentPass>(new DocumentPass(std::move(impl)));
}

Status DocumentPass::Fingerprint(std::string_view text, Scratch* scratch,
                                 DedupDocument* facts) const {
  facts->text_bytes = text.size();
  facts->content_hash = XXH3_64bits(text.data(), text.size());
  facts->squeezed_hash = SqueezedHash(text);
  facts->normalized_bytes = 0;
  Result<neardup::Fingerprint> fingerprint =
      impl_->need_normalized ? impl_->fingerprinter->Compute(text, &scratch->normalized)
                             : impl_->fingerprinter->Compute(text);
  if (!fingerprint.ok()) return fingerprint.status();
  facts->fingerprint = *fingerprint;
  if (impl_->need_normalized) facts->normalized_bytes = scratch->normalized.size();
  return Status::Ok();
}

bool DocumentPass::Sketch(std::string_view text, Scratch* scratch, std::span<uint32_t> keys,
                          bool want_set, bool want_units) const {
  scratch->set.clear();
  scratch->unit_set.clear();
  scratch->shingled = false;
  const bool with_units = want_set && want_units && impl_->with_units;
  if (impl_->share_normalization) {
    // The shingle hashes in text order: the signature and the narrowed set ignore order and
    // repeats, so the 64-bit set is never sorted.
    ShingleHashesInOrder(scratch->normalized, &scratch->units, &scratch->shingles);
  } else if (!(with_units
                   ? impl_->shingler->ShinglesAndUnits(text, &scratch->shingles, &scratch->units)
                   : impl_->shingler->Shingles(text, &scratch->shingles))
                  .ok()) {
    return false;  // a text that cannot be shingled has no shingles
  }
  scratch->shingled = true;
  const bool has_keys = impl_->lsh->BandKeysOf(scratch->shingles, keys);
  if (want_set) NarrowedSet(scratch->shingles, &scratch->set);
  if (with_units) {
    // In text order from the shared cut, else ShinglesAndUnits' sorted unit set.
    if (impl_->share_normalization) {
      NarrowedUnitSet(scratch->units, &scratch->unit_set);
    } else {
      ShingleSimilarity::NarrowUnits(scratch->units, &scratch->unit_set);
    }
  }
  return has_keys;
}

bool DocumentPass::uses_lsh() const { return impl_->use_lsh; }
int DocumentPass::bands() const { return impl_->bands; }
const DedupOptions& DocumentPass::options() const { return impl_->options; }
const Fingerprinter& DocumentPass::fingerprinter() const { return *impl_->fingerprinter; }
const ShingleSimilarity& DocumentPass::shingler() const { return *impl_->shingler; }
const MinHashLsh& DocumentPass::lsh() const { return *impl_->lsh; }

namespace {

// The CSR (offsets, values) of n documents' sets from their sizes and the chunks' arenas.
void JoinArenas(const std::vector<uint64_t>& sizes,
                const std::vector<std::pair<size_t, std::vector<uint32_t>>>& arenas,
                std::vector<uint64_t>* offsets, std::vector<uint32_t>* values) {
  const size_t n = sizes.size();
  offsets->resize(n + 1);
  (*offsets)[0] = 0;
  for (size_t i = 0; i < n; ++i) (*offsets)[i + 1] = (*offsets)[i] + sizes[i];
  values->resize((*offsets)[n]);
  for (const auto& [first, chunk] : arenas) {
    std::copy(chunk.begin(), chunk.end(), values->begin() + (*offsets)[first]);
  }
}

}  // namespace

void ComputeDocumentColumns(const DocumentPass& pass, std::span<const std::string_view> texts,
                            bool with_sets, int threads, DocumentColumns* columns) {
  const size_t n = texts.size();
  const int bands = pass.bands();
  with_sets = with_sets && pass.uses_lsh();
  DocumentColumns& out = *columns;
  out.bands = bands;
  out.status.assign(n, Status::Ok());
  out.fingerprints.assign(n, Fingerprint{0, 0, pass.options().fingerprint.bits});
  out.text_bytes.assign(n, 0);
  out.normalized_bytes.assign(n, 0);
  out.content_hashes.assign(n, 0);
  out.squeezed_hashes.assign(n, 0);
  out.band_keys.assign(n * bands, 0);
  out.has_keys.assign(n, 0);
  out.set_offsets.clear();
  out.set_values.clear();
  out.unit_offsets.clear();
  out.unit_values.clear();
  const bool with_units = with_sets && pass.options().edited_threshold > 0;
  // Each chunk's sets (and unit sets) go to an arena of its own, joined in document order at the
  // end.
  std::vector<uint64_t> set_sizes(with_sets ? n : 0, 0), unit_sizes(with_units ? n : 0, 0);
  std::mutex arenas_mutex;
  std::vector<std::pair<size_t, std::vector<uint32_t>>> arenas, unit_arenas;  // (first, values)
  ParallelFor(
      n, threads > 0 ? threads : DefaultThreadCount(),
      [&](size_t begin, size_t end) {
        DocumentPass::Scratch scratch;
        DedupDocument facts;
        std::vector<uint32_t> arena, unit_arena;
        for (size_t i = begin; i < end; ++i) {
          out.status[i] = pass.Fingerprint(texts[i], &scratch, &facts);
          out.text_bytes[i] = facts.text_bytes;
          out.content_hashes[i] = facts.content_hash;
          out.squeezed_hashes[i] = facts.squeezed_hash;
          if (!out.status[i].ok()) continue;
          out.fingerprints[i] = facts.fingerprint;
          out.normalized_bytes[i] = facts.normalized_bytes;
          if (!pass.uses_lsh()) continue;
          std::span<uint32_t> keys(out.band_keys.data() + i * bands, bands);
          out.has_keys[i] = pass.Sketch(texts[i], &scratch, keys, with_sets) ? 1 : 0;
          if (!out.has_keys[i]) std::fill(keys.begin(), keys.end(), 0);
          if (with_sets) {
            set_sizes[i] = scratch.set.size();
            arena.insert(arena.end(), scratch.set.begin(), scratch.set.end());
          }
          if (with_units) {
            unit_sizes[i] = scratch.unit_set.size();
            unit_arena.insert(unit_arena.end(), scratch.unit_set.begin(), scratch.unit_set.end());
          }
        }
        if (with_sets) {
          std::lock_guard<std::mutex> lock(arenas_mutex);
          arenas.emplace_back(begin, std::move(arena));
          if (with_units) unit_arenas.emplace_back(begin, std::move(unit_arena));
        }
      },
      16);
  if (!with_sets) return;
  JoinArenas(set_sizes, arenas, &out.set_offsets, &out.set_values);
  if (with_units) JoinArenas(unit_sizes, unit_arenas, &out.unit_offsets, &out.unit_values);
}

}  // namespace neardup
