// MinHash LSH: signatures by one-permutation hashing with densification, band keys, and candidate
// pairs from radix-sorted band-key records; see neardup/minhash_lsh.h.
#include "neardup/minhash_lsh.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <mutex>
#include <numeric>

#include "common/parallel.h"
#include "index/lsh_band_pairs.h"

namespace neardup {

namespace {

// The 64-bit finaliser of MurmurHash3: a bijection that mixes every input bit into every output
// bit.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// floor(x * n / 2^32): maps a uniform 32-bit value onto [0, n) without a division.
inline uint32_t FastRange(uint32_t x, uint32_t n) {
  return static_cast<uint32_t>((static_cast<uint64_t>(x) * n) >> 32);
}

constexpr uint64_t kDonorSalt = 0x64656e7369667921ULL;

// Stable LSD radix sort of `records` by bits [low_bit, 64) in 16-bit digits, using `scratch`
// (resized). Digits on which all records agree are skipped.
void RadixSort(std::vector<uint64_t>* records, std::vector<uint64_t>* scratch, int low_bit) {
  const size_t n = records->size();
  if (n < 4096) {
    // Small inputs: a comparison sort on the same bits (records with equal high bits keep their
    // order because the low bits, the document number, increase with position).
    const uint64_t mask = low_bit >= 64 ? 0 : ~uint64_t{0} << low_bit;
    std::stable_sort(records->begin(), records->end(),
                     [mask](uint64_t x, uint64_t y) { return (x & mask) < (y & mask); });
    return;
  }
  scratch->resize(n);
  std::vector<size_t> counts(1 << 16);
  for (int shift = low_bit; shift < 64; shift += 16) {
    std::fill(counts.begin(), counts.end(), 0);
    for (uint64_t r : *records) ++counts[(r >> shift) & 0xFFFF];
    if (std::any_of(counts.begin(), counts.end(), [n](size_t c) { return c == n; })) continue;
    size_t total = 0;
    for (size_t& c : counts) {
      size_t here = c;
      c = total;
      total += here;
    }
    for (uint64_t r : *records) (*scratch)[counts[(r >> shift) & 0xFFFF]++] = r;
    records->swap(*scratch);
  }
}

// Sorts packed pairs (a << 32 | b) and removes repeats.
void SortUnique(std::vector<uint64_t>* pairs, std::vector<uint64_t>* scratch) {
  RadixSort(pairs, scratch, 0);
  pairs->erase(std::unique(pairs->begin(), pairs->end()), pairs->end());
}

// The bucket rule over any sorted member type, appending emit(a, b) for every pair.
template <typename T, typename Emit>
void ForEachBucketPair(const T* members, size_t m, uint32_t window, Emit emit) {
  for (size_t i = 0; i + 1 < m; ++i) {
    const size_t last = std::min(m - 1, i + static_cast<size_t>(window));
    for (size_t j = i + 1; j <= last; ++j) emit(members[i], members[j]);
  }
}

}  // namespace

double LshCandidateProbability(double jaccard, const LshParameters& parameters) {
  const double j = std::clamp(jaccard, 0.0, 1.0);
  const double band = std::pow(j, parameters.rows);
  if (band >= 1.0) return 1.0;
  // 1 - (1 - band)^bands, computed without cancellation for small `band`.
  return -std::expm1(parameters.bands * std::log1p(-band));
}

Result<LshParameters> ChooseLshParameters(double threshold, const LshPlanOptions& options) {
  if (!(threshold > 0 && threshold < 1)) {
    return Status::InvalidArgument("threshold must be in (0, 1), got " + std::to_string(threshold));
  }
  if (options.max_signature < 1) {
    return Status::InvalidArgument("the signature size must be at least 1");
  }
  if (!(options.recall_at_threshold > 0 && options.recall_at_threshold < 1)) {
    return Status::InvalidArgument("the recall at the threshold must be in (0, 1)");
  }
  for (int rows = options.max_signature; rows >= 1; --rows) {
    const int max_bands = options.max_signature / rows;
    for (int bands = 1; bands <= max_bands; ++bands) {
      if (LshCandidateProbability(threshold, {bands, rows}) >= options.recall_at_threshold) {
        return LshParameters{bands, rows};
      }
    }
  }
  return LshParameters{options.max_signature, 1};
}

double ExpectedCandidatePairs(double n, const LshParameters& parameters,
                              double background_jaccard) {
  if (n < 2) return 0;
  const double band = std::pow(std::clamp(background_jaccard, 0.0, 1.0), parameters.rows);
  const double collision = std::ldexp(1.0, -32);
  const double p = band + (1 - band) * collision;
  const double per_pair = p >= 1 ? 1.0 : -std::expm1(parameters.bands * std::log1p(-p));
  return n * (n - 1) / 2 * per_pair;
}

Result<LshParameters> ResolveLshParameters(const MinHashLshOptions& options) {
  if (!(options.threshold > 0 && options.threshold < 1)) {
    return Status::InvalidArgument("threshold must be in (0, 1), got " +
                                   std::to_string(options.threshold));
  }
  if (options.bucket_window < 1) {
    return Status::InvalidArgument("the LSH bucket window must be at least 1");
  }
  if (!options.parameters) return ChooseLshParameters(options.threshold);
  const LshParameters& given = *options.parameters;
  if (given.bands < 1 || given.rows < 1 || given.bands > 1024 || given.rows > 64) {
    return Status::InvalidArgument(
        "bands and rows must be given together, bands in [1, 1024] and rows in [1, 64]");
  }
  return given;
}

uint64_t LshTag(const LshParameters& parameters, uint64_t seed) {
  const uint64_t words[3] = {static_cast<uint64_t>(parameters.bands),
                             static_cast<uint64_t>(parameters.rows), seed};
  return XXH3_64bits(words, sizeof(words));
}

struct MinHashLsh::Impl {
  MinHashLshOptions options;
  LshParameters parameters;
};

MinHashLsh::MinHashLsh(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

const LshParameters& MinHashLsh::parameters() const { return impl_->parameters; }
const MinHashLshOptions& MinHashLsh::options() const { return impl_->options; }

Result<MinHashLsh> MinHashLsh::Create(const MinHashLshOptions& options) {
  auto parameters = ResolveLshParameters(options);
  if (!parameters.ok()) return parameters.status();
  return MinHashLsh(std::make_shared<const Impl>(Impl{options, *parameters}));
}

bool MinHashLsh::Signature(std::span<const uint64_t> shingles,
                           std::vector<uint32_t>* signature) const {
  signature->clear();
  if (shingles.empty()) return false;
  const uint32_t size = static_cast<uint32_t>(impl_->parameters.signature_size());
  const uint64_t seed = impl_->options.seed;
  constexpr uint32_t kEmpty = UINT32_MAX;
  // Each bin holds its smallest 32-bit value; UINT64_MAX marks an empty bin.
  thread_local std::vector<uint64_t> bins;
  bins.assign(size, UINT64_MAX);
  for (uint64_t shingle : shingles) {
    const uint64_t h = Mix64(shingle ^ seed);
    const uint32_t bin = FastRange(static_cast<uint32_t>(h >> 32), size);
    const uint64_t value = static_cast<uint32_t>(h);
    // Branch-free: whether a shingle lowers its bin is close to a coin toss early on.
    bins[bin] = std::min(bins[bin], value);
  }
  signature->resize(size);
  for (uint32_t i = 0; i < size; ++i) {
    if (bins[i] != UINT64_MAX) {
      (*signature)[i] = static_cast<uint32_t>(bins[i]);
      continue;
    }
    // Optimal densification: the donor of bin i at attempt t depends only on (seed, i, t), so
    // two documents borrow from the same bins and agree with probability ~ their Jaccard.
    uint32_t donor = kEmpty;
    const uint32_t limit = 64 * size;  // ~e^-64 chance of needing more when one bin is filled
    for (uint32_t t = 0; t < limit; ++t) {
      const uint64_t h = Mix64((static_cast<uint64_t>(i) << 32 | t) ^ seed ^ kDonorSalt);
      const uint32_t candidate = FastRange(static_cast<uint32_t>(h), size);
      if (bins[candidate] != UINT64_MAX) {
        donor = candidate;
        break;
      }
    }
    if (donor == kEmpty) {
      // Deterministic fallback: the next filled bin (there is one since the set is not empty).
      donor = (i + 1) % size;
      while (bins[donor] == UINT64_MAX) donor = (donor + 1) % size;
    }
    (*signature)[i] = static_cast<uint32_t>(bins[donor]);
  }
  return true;
}

void MinHashLsh::BandKeys(std::span<const uint32_t> signature, std::span<uint32_t> keys) const {
  const int rows = impl_->parameters.rows;
  const int bands = impl_->parameters.bands;
  const uint64_t seed = impl_->options.seed;
  for (int b = 0; b < bands; ++b) {
    keys[b] = static_cast<uint32_t>(
        XXH3_64bits_withSeed(signature.data() + static_cast<size_t>(b) * rows,
                             sizeof(uint32_t) * rows, seed + static_cast<uint64_t>(b)));
  }
}

bool MinHashLsh::BandKeysOf(std::span<const uint64_t> shingles, std::span<uint32_t> keys) const {
  thread_local std::vector<uint32_t> signature;
  if (!Signature(shingles, &signature)) return false;
  BandKeys(signature, keys);
  return true;
}

int MinHashLsh::SharedBands(std::span<const uint32_t> keys_a, std::span<const uint32_t> keys_b) {
  int shared = 0;
  for (size_t i = 0; i < keys_a.size() && i < keys_b.size(); ++i) shared += keys_a[i] == keys_b[i];
  return shared;
}

void BucketPairs(std::span<const uint64_t> members, uint32_t window, std::vector<LshPair>* pairs) {
  ForEachBucketPair(members.data(), members.size(), window, [pairs](uint64_t a, uint64_t b) {
    pairs->push_back({a, b});
  });
}

uint64_t BucketPairCount(uint64_t members, uint32_t window) {
  if (members < 2) return 0;
  const uint64_t w = window;
  if (members <= w + 1) return members * (members - 1) / 2;
  // Members 0 .. m-w-1 have w partners each; the last w members have w-1, w-2, ..., 0.
  return (members - w) * w + w * (w - 1) / 2;
}

struct BandKeyTable::Impl {
  int bands = 0;
  std::vector<std::vector<uint32_t>> keys;
  std::vector<bool> has_keys;
};

BandKeyTable::BandKeyTable(int bands) : impl_(std::make_unique<Impl>()) {
  assert(bands >= 0);
  impl_->bands = std::max(bands, 0);
  impl_->keys.resize(static_cast<size_t>(impl_->bands));
}
BandKeyTable::~BandKeyTable() = default;
BandKeyTable::BandKeyTable(BandKeyTable&&) noexcept = default;
BandKeyTable& BandKeyTable::operator=(BandKeyTable&&) noexcept = default;

int BandKeyTable::bands() const { return impl_->bands; }
size_t BandKeyTable::size() const { return impl_->has_keys.size(); }
bool BandKeyTable::has_keys(size_t document) const { return impl_->has_keys[document]; }
const std::vector<bool>& BandKeyTable::has_keys_bits() const { return impl_->has_keys; }
std::span<const uint32_t> BandKeyTable::band_keys(int band) const { return impl_->keys[band]; }

void BandKeyTable::Append(std::span<const uint32_t> keys) {
  const bool present = !keys.empty();
  impl_->has_keys.push_back(present);
  for (int b = 0; b < impl_->bands; ++b) impl_->keys[b].push_back(present ? keys[b] : 0);
}

void BandKeyTable::Reserve(size_t documents) {
  impl_->has_keys.reserve(documents);
  for (auto& band : impl_->keys) band.reserve(documents);
}

size_t BandKeyTable::MemoryBytes() const {
  size_t bytes = impl_->has_keys.capacity() / 8;
  for (const auto& band : impl_->keys) bytes += band.capacity() * sizeof(uint32_t);
  return bytes;
}

void LshBandPairRuns(std::span<const uint32_t> keys, const std::vector<bool>& has_keys,
                     uint32_t window, size_t max_run_pairs,
                     const std::function<void(std::span<const uint64_t>)>& emit_run,
                     LshJoinStats* stats, std::vector<uint64_t>* pairs,
                     std::vector<uint64_t>* records, std::vector<uint64_t>* scratch) {
  const size_t n = keys.size();
  window = std::max<uint32_t>(window, 1);
  max_run_pairs = std::max<size_t>(max_run_pairs, 1);
  pairs->clear();
  // The records are built and sorted one key slice at a time (the top slice_bits bits of the
  // key; up to 8 slices of at least 64 Ki documents), so the records and their sort buffer hold
  // about 2 bytes per document instead of 16. A bucket lies in one slice, so the pairs are the
  // same. Pairs within a band are distinct (each document has one key, so one bucket): a run
  // needs sorting only. The scratch buffer is shared with the records' sort.
  int slice_bits = 0;
  while (slice_bits < 3 && (n >> (slice_bits + 1)) >= (size_t{1} << 16)) ++slice_bits;
  auto flush = [&] {
    RadixSort(pairs, scratch, 0);
    emit_run(*pairs);
  };
  std::vector<uint32_t> members;
  for (uint32_t slice = 0; slice < (1u << slice_bits); ++slice) {
    records->clear();
    records->reserve((n >> slice_bits) + (n >> (slice_bits + 3)));
    for (size_t d = 0; d < n; ++d) {
      if (has_keys[d] && (slice_bits == 0 || keys[d] >> (32 - slice_bits) == slice)) {
        records->push_back(static_cast<uint64_t>(keys[d]) << 32 | d);
      }
    }
    stats->records += records->size();
    RadixSort(records, scratch, 32);
    for (size_t i = 0; i < records->size();) {
      size_t j = i + 1;
      while (j < records->size() && ((*records)[j] >> 32) == ((*records)[i] >> 32)) ++j;
      const size_t m = j - i;
      if (m >= 2) {
        ++stats->buckets;
        if (m > static_cast<size_t>(window) + 1) ++stats->oversized_buckets;
        stats->largest_bucket = std::max<uint64_t>(stats->largest_bucket, m);
        members.resize(m);
        for (size_t k = 0; k < m; ++k) members[k] = static_cast<uint32_t>((*records)[i + k]);
        ForEachBucketPair(members.data(), m, window, [&](uint32_t a, uint32_t b) {
          pairs->push_back(static_cast<uint64_t>(a) << 32 | b);
          if (pairs->size() >= max_run_pairs) {
            flush();
            pairs->clear();
          }
        });
        stats->bucket_pairs += BucketPairCount(m, window);
      }
      i = j;
    }
  }
  if (!pairs->empty()) flush();  // the last run stays in `pairs`
}

void LshBandPairs(std::span<const uint32_t> keys, const std::vector<bool>& has_keys,
                  uint32_t window, std::vector<uint64_t>* pairs, LshJoinStats* stats,
                  std::vector<uint64_t>* records, std::vector<uint64_t>* scratch) {
  // One run of all the band's pairs, left in `pairs`.
  LshBandPairRuns(
      keys, has_keys, window, SIZE_MAX, [](std::span<const uint64_t>) {}, stats, pairs, records,
      scratch);
}

std::vector<LshPair> LshCandidatePairs(const BandKeyTable& table, uint32_t window, int threads,
                                       LshJoinStats* stats) {
  const int bands = table.bands();
  if (threads <= 0) threads = DefaultThreadCount();
  const int workers = std::max(1, std::min(threads, bands));
  window = std::max<uint32_t>(window, 1);
  // Each worker handles bands w, w + workers, ... with its own record buffer and pair list.
  struct Worker {
    std::vector<uint64_t> pairs;
    LshJoinStats stats;
  };
  std::vector<Worker> state(workers);
  ParallelFor(
      workers, workers,
      [&](size_t begin, size_t end) {
        for (size_t w = begin; w < end; ++w) {
          Worker& worker = state[w];
          std::vector<uint64_t> records, scratch, band_pairs;
          size_t compacted = 0;
          for (int band = static_cast<int>(w); band < bands; band += workers) {
            LshBandPairs(table.band_keys(band), table.has_keys_bits(), window, &band_pairs,
                         &worker.stats, &records, &scratch);
            worker.pairs.insert(worker.pairs.end(), band_pairs.begin(), band_pairs.end());
            // The same pair recurs in many bands: compact when the list has doubled.
            if (worker.pairs.size() > 2 * compacted + (1u << 20)) {
              SortUnique(&worker.pairs, &scratch);
              compacted = worker.pairs.size();
            }
          }
          records.clear();
          records.shrink_to_fit();
          SortUnique(&worker.pairs, &scratch);
        }
      },
      1);
  std::vector<uint64_t> all;
  LshJoinStats total;
  if (workers == 1) {
    all.swap(state[0].pairs);
  } else {
    size_t count = 0;
    for (const Worker& worker : state) count += worker.pairs.size();
    all.reserve(count);
    for (Worker& worker : state) {
      all.insert(all.end(), worker.pairs.begin(), worker.pairs.end());
      std::vector<uint64_t>().swap(worker.pairs);
    }
    std::vector<uint64_t> scratch;
    SortUnique(&all, &scratch);
  }
  for (const Worker& worker : state) {
    total.records += worker.stats.records;
    total.buckets += worker.stats.buckets;
    total.oversized_buckets += worker.stats.oversized_buckets;
    total.largest_bucket = std::max(total.largest_bucket, worker.stats.largest_bucket);
    total.bucket_pairs += worker.stats.bucket_pairs;
  }
  std::vector<LshPair> out(all.size());
  for (size_t i = 0; i < all.size(); ++i) out[i] = {all[i] >> 32, all[i] & 0xFFFFFFFFu};
  total.candidate_pairs = out.size();
  if (stats) *stats = total;
  return out;
}

}  // namespace neardup
