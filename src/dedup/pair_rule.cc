// The pair rule, the shingle frequency sketch and the rule and LSH plan a dedup run resolves from
// its options; see neardup/pair_rule.h. No text processing here (the fuzzed store links this file).
#include "neardup/pair_rule.h"

#include <sys/mman.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>

#include "dedup/document_hashes.h"
#include "neardup/dedup.h"
#include "neardup/minhash_lsh.h"
#include "neardup/shingles.h"

namespace neardup {

namespace {

constexpr uint32_t kCounterMax = std::numeric_limits<uint16_t>::max();
constexpr size_t kBlockCounters = 32;  // 64 bytes of 16-bit counters
constexpr size_t kLanesPerRow = kBlockCounters / ShingleFrequencies::kDepth;  // 8

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// A bound below which a similarity computed in doubles cannot reach `threshold`: the early exits
// use it with a margin of one shingle so they never reject a pair the full computation accepts.
constexpr double kSlack = 1e-9;

}  // namespace

const char* DuplicateReasonName(DuplicateReason reason) {
  switch (reason) {
    case DuplicateReason::kNone:
      return "none";
    case DuplicateReason::kExact:
      return "exact_duplicate";
    case DuplicateReason::kWhitespace:
      return "whitespace_duplicate";
    case DuplicateReason::kNearDuplicate:
      return "near_duplicate";
    case DuplicateReason::kContained:
      return "contained";
    case DuplicateReason::kEdited:
      return "edited";
  }
  return "none";
}

Status ValidatePairRuleOptions(const PairRuleOptions& options) {
  auto in_unit = [](double v) { return std::isfinite(v) && v >= 0 && v <= 1; };
  if (!in_unit(options.jaccard_threshold)) {
    return Status::InvalidArgument("jaccard_threshold (verify) must be in [0, 1]");
  }
  if (!in_unit(options.containment_threshold)) {
    return Status::InvalidArgument("containment_threshold must be in [0, 1] (0 = off)");
  }
  if (!std::isfinite(options.containment_min_shingles) || options.containment_min_shingles < 0) {
    return Status::InvalidArgument("containment_min_shingles must be >= 0");
  }
  if (!in_unit(options.containment_min_ratio)) {
    return Status::InvalidArgument("containment_min_ratio must be in [0, 1]");
  }
  if (!in_unit(options.edited_threshold)) {
    return Status::InvalidArgument("edited_threshold must be in [0, 1] (0 = off)");
  }
  if (!in_unit(options.edited_min_jaccard) ||
      (options.edited_threshold > 0 && options.edited_min_jaccard == 0)) {
    return Status::InvalidArgument(
        "edited_min_jaccard must be in (0, 1] when the edited reason is on");
  }
  return Status::Ok();
}

double LowestAcceptedJaccard(const PairRuleOptions& options) {
  double lowest = options.jaccard_threshold;
  if (options.containment_threshold > 0) {
    const double c = options.containment_threshold, r = options.containment_min_ratio;
    const double contained = c * r / (1 + r - c * r);
    lowest = std::min(lowest, contained);
  }
  if (options.edited_threshold > 0) lowest = std::min(lowest, options.edited_min_jaccard);
  return lowest;
}

// ---- ShingleFrequencies -------------------------------------------------------------------------

namespace internal {
namespace {
constexpr size_t kLargePage = size_t{2} << 20;
}  // namespace

void* AllocateLargeTable(size_t bytes) {
  if (bytes < kLargePage) return ::operator new(bytes);
  const size_t rounded = (bytes + kLargePage - 1) & ~(kLargePage - 1);
  void* p = std::aligned_alloc(kLargePage, rounded);
  if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without huge pages the table still works
#endif
  return p;
}

void FreeLargeTable(void* p, size_t bytes) {
  if (bytes < kLargePage) {
    ::operator delete(p);
  } else {
    std::free(p);
  }
}
}  // namespace internal

ShingleFrequencies::ShingleFrequencies(size_t bytes, uint32_t sample_every, uint64_t seed)
    : seed_(seed), sample_every_(std::max<uint32_t>(1, sample_every)) {
  const size_t blocks = std::bit_floor(std::max<size_t>(1, bytes / (kBlockCounters * 2)));
  block_mask_ = blocks - 1;
  counters_.assign(blocks * kBlockCounters, 0);
}

// The block of `shingle` and its lane in each of the kDepth rows of the block (row r owns lanes
// r * 8 .. r * 8 + 7): 3 bits of the hash per row, the block from the bits above them.
uint64_t ShingleFrequencies::Locate(uint32_t shingle, uint32_t* lane_bits) const {
  uint32_t lanes[kDepth];
  const uint16_t* block = Block(shingle, lanes);
  *lane_bits = 0;
  for (int r = 0; r < kDepth; ++r) *lane_bits |= uint32_t{1} << lanes[r];
  return static_cast<uint64_t>(block - counters_.data()) / kBlockCounters;
}

uint32_t ShingleFrequencies::LanesReaching(uint64_t block, uint32_t count) const {
  const uint16_t* c = counters_.data() + block * kBlockCounters;
  uint32_t bits = 0;
  for (size_t l = 0; l < kBlockCounters; ++l) bits |= uint32_t{c[l] >= count} << l;
  return bits;
}

const uint16_t* ShingleFrequencies::Block(uint32_t shingle, uint32_t* lanes) const {
  const uint64_t h = Mix(shingle ^ seed_);
  for (int r = 0; r < kDepth; ++r) {
    lanes[r] = static_cast<uint32_t>(r * kLanesPerRow + ((h >> (3 * r)) & (kLanesPerRow - 1)));
  }
  return counters_.data() + ((h >> 12) & block_mask_) * kBlockCounters;
}

void ShingleFrequencies::AddDocument(std::span<const uint32_t> set) {
  // Each shingle's block is a cache miss in a large sketch: the blocks of the next kAhead
  // shingles are fetched while this one is counted.
  constexpr size_t kAhead = 16;
  struct Pending {
    uint16_t* block;
    uint32_t lanes[kDepth];
  };
  Pending ring[kAhead];
  const size_t n = set.size();
  for (size_t i = 0; i < n + kAhead; ++i) {
    if (i >= kAhead) {
      Pending& due = ring[i % kAhead];
      for (int r = 0; r < kDepth; ++r) {
        uint16_t& counter = due.block[due.lanes[r]];
        counter = static_cast<uint16_t>(counter + (counter < kCounterMax));
      }
    }
    if (i < n) {
      Pending& next = ring[i % kAhead];
      next.block = const_cast<uint16_t*>(Block(set[i], next.lanes));
      __builtin_prefetch(next.block, 1);
    }
  }
  ++documents_;
  total_ += n;
}

Status ShingleFrequencies::Merge(const ShingleFrequencies& other) {
  if (other.counters_.size() != counters_.size() || other.seed_ != seed_ ||
      other.sample_every_ != sample_every_) {
    return Status::InvalidArgument(
        "ShingleFrequencies::Merge: sketches differ in size, sampling or seed");
  }
  for (size_t i = 0; i < counters_.size(); ++i) {
    counters_[i] = static_cast<uint16_t>(
        std::min<uint32_t>(kCounterMax, uint32_t{counters_[i]} + other.counters_[i]));
  }
  documents_ += other.documents_;
  total_ += other.total_;
  return Status::Ok();
}

namespace {
constexpr char kSketchMagic[8] = {'N', 'D', 'S', 'F', 'R', 'Q', '0', '1'};
}  // namespace

std::string ShingleFrequencies::Serialize() const {
  std::string out(kSketchMagic, sizeof(kSketchMagic));
  const uint64_t header[5] = {seed_, counters_.size() / kBlockCounters, documents_, total_,
                              sample_every_};
  out.append(reinterpret_cast<const char*>(header), sizeof(header));
  out.append(reinterpret_cast<const char*>(counters_.data()), counters_.size() * sizeof(uint16_t));
  return out;
}

Result<ShingleFrequencies> ShingleFrequencies::Deserialize(std::string_view bytes) {
  uint64_t header[5];
  if (bytes.size() < sizeof(kSketchMagic) + sizeof(header) ||
      bytes.substr(0, sizeof(kSketchMagic)) !=
          std::string_view(kSketchMagic, sizeof(kSketchMagic))) {
    return Status::Corruption("not a shingle frequency sketch");
  }
  std::memcpy(header, bytes.data() + sizeof(kSketchMagic), sizeof(header));
  const uint64_t blocks = header[1];
  const std::string_view body = bytes.substr(sizeof(kSketchMagic) + sizeof(header));
  if (blocks == 0 || !std::has_single_bit(blocks) || header[4] == 0 || header[4] > UINT32_MAX ||
      body.size() != blocks * kBlockCounters * sizeof(uint16_t)) {
    return Status::Corruption("shingle frequency sketch: bad size");
  }
  ShingleFrequencies sketch(static_cast<size_t>(blocks * kBlockCounters * sizeof(uint16_t)),
                            static_cast<uint32_t>(header[4]), header[0]);
  std::memcpy(sketch.counters_.data(), body.data(), body.size());
  sketch.documents_ = header[2];
  sketch.total_ = header[3];
  return sketch;
}

uint64_t ShingleFrequencies::Estimate(uint32_t shingle) const {
  uint32_t lanes[kDepth];
  const uint16_t* block = Block(shingle, lanes);
  uint32_t estimate = kCounterMax;
  for (int r = 0; r < kDepth; ++r) estimate = std::min<uint32_t>(estimate, block[lanes[r]]);
  return uint64_t{estimate} * sample_every_;
}

// ---- document facts ----------------------------------------------------------------------------

uint64_t WhitespaceFreeHash(std::string_view text) { return SqueezedHash(text); }

// ---- PairRule
// ------------------------------------------------------------------------------------

Result<PairRule> PairRule::Create(const PairRuleOptions& options,
                                  const ShingleFrequencies* frequencies,
                                  const BoilerplateOptions& boilerplate) {
  NEARDUP_RETURN_IF_ERROR(ValidatePairRuleOptions(options));
  uint32_t documents = 0;
  if (frequencies != nullptr) {
    if (boilerplate.min_documents < 2) {
      return Status::InvalidArgument("boilerplate min_documents must be >= 2");
    }
    const double resolution =
        std::ceil(2.0 * ShingleFrequencies::kDepth * static_cast<double>(frequencies->total()) /
                  static_cast<double>(frequencies->cells()) * frequencies->sample_every());
    documents = static_cast<uint32_t>(
        std::min<double>(double{kCounterMax} * frequencies->sample_every(),
                         std::max<double>(boilerplate.min_documents, resolution)));
  }
  PairRule rule(options, frequencies, documents);
  if (frequencies != nullptr) {
    // The counters holding at least F (in counted documents).
    const uint64_t blocks = frequencies->cells() / kBlockCounters;
    const uint32_t count = static_cast<uint32_t>((documents + frequencies->sample_every() - 1) /
                                                 frequencies->sample_every());
    auto heavy = std::make_shared<std::vector<uint32_t>>(blocks);
    for (uint64_t b = 0; b < blocks; ++b) (*heavy)[b] = frequencies->LanesReaching(b, count);
    rule.heavy_lanes_ = std::move(heavy);
  }
  return rule;
}

double PairRule::Weight(uint32_t shingle) const {
  if (frequencies_ == nullptr) return 1.0;
  // A shingle's estimate reaches F only if each of its counters does: a word per block (a
  // sixteenth of the sketch) marks the counters that do, so most shingles are settled there
  // instead of in the sketch.
  uint32_t lanes = 0;
  const uint64_t block = frequencies_->Locate(shingle, &lanes);
  if (((*heavy_lanes_)[block] & lanes) != lanes) return 1.0;
  const uint64_t df = frequencies_->Estimate(shingle);
  return df < boilerplate_documents_ ? 1.0 : static_cast<double>(boilerplate_documents_) / df;
}

double PairRule::Weight(std::span<const uint32_t> set) const {
  if (frequencies_ == nullptr) return static_cast<double>(set.size());
  double sum = 0;
  for (uint32_t shingle : set) sum += Weight(shingle);
  return sum;
}

PairDecision PairRule::Decide(const PairDocument& a, const PairDocument& b) const {
  return Measure(a, b, /*fast=*/false);
}

PairDecision PairRule::DecideFast(const PairDocument& a, const PairDocument& b) const {
  return Measure(a, b, /*fast=*/true);
}

namespace {

// The smallest count c in [0, limit] with value(c) >= threshold (value grows with c), or
// limit + 1 when none: found from an estimate by stepping with the same expression the final
// comparison uses, so rounding cannot make the early exit disagree with it.
template <typename Value>
uint64_t SmallestReaching(double estimate, uint64_t limit, double threshold, Value value) {
  uint64_t c = static_cast<uint64_t>(std::clamp(estimate, 0.0, static_cast<double>(limit)));
  while (c > 0 && value(c - 1) >= threshold) --c;
  while (c <= limit && value(c) < threshold) ++c;
  return c;
}

}  // namespace

namespace {

// |x ∩ y| of two sorted distinct sets, or (with can_stop) less than `need` when it cannot reach it.
uint64_t CommonCount(std::span<const uint32_t> x, std::span<const uint32_t> y, uint64_t need,
                     bool can_stop) {
  const size_t nx = x.size(), ny = y.size();
  size_t i = 0, j = 0;
  uint64_t common = 0;
  while (i < nx && j < ny) {
    if (x[i] < y[j]) {
      ++i;
      if (can_stop && common + std::min(nx - i, ny - j) < need) return common;
    } else if (y[j] < x[i]) {
      ++j;
      if (can_stop && common + std::min(nx - i, ny - j) < need) return common;
    } else {
      ++common;
      ++i;
      ++j;
    }
  }
  return common;
}

// The smallest intersection for which the plain Jaccard of sets of sizes nx, ny reaches `t`.
uint64_t PlainNeed(size_t nx, size_t ny, double t) {
  auto jaccard_of = [&](uint64_t c) {
    return static_cast<double>(c) / static_cast<double>(nx + ny - c);
  };
  return SmallestReaching(t * static_cast<double>(nx + ny) / (1 + t), std::min(nx, ny), t,
                          jaccard_of);
}

}  // namespace

bool PairRule::EditedApplies(const PairDocument& a, const PairDocument& b) const {
  return options_.edited_threshold > 0 && !a.units.empty() && !b.units.empty() &&
         !a.shingles.empty() && !b.shingles.empty();
}

std::span<const uint32_t> PairRule::DeferredUnits() {
  // One value shared by both documents: a unit Jaccard of 1, which reaches any edited_threshold.
  static constexpr uint32_t kStandIn[1] = {0};
  return kStandIn;
}

bool PairRule::PassesPlainFloor(const PairDocument& a, const PairDocument& b) const {
  if (frequencies_ == nullptr || a.shingles.empty() || b.shingles.empty()) return true;
  const size_t na = a.shingles.size(), nb = b.shingles.size();
  uint64_t need = PlainNeed(na, nb, kPlainJaccardFloor);
  if (EditedApplies(a, b)) need = std::min(need, PlainNeed(na, nb, options_.edited_min_jaccard));
  return CommonCount(a.shingles, b.shingles, need, true) >= need;
}

bool PairRule::MayAcceptBySizes(uint64_t size_a, uint64_t size_b) const {
  if (options_.jaccard_threshold == 0) return true;  // verification off: every pair is accepted
  const uint64_t small = std::min(size_a, size_b), large = std::max(size_a, size_b);
  // A document without shingles resembles nothing but its own copies (Measure).
  if (small == 0) return false;
  double lowest = frequencies_ != nullptr ? kPlainJaccardFloor : LowestAcceptedJaccard(options_);
  if (options_.edited_threshold > 0) lowest = std::min(lowest, options_.edited_min_jaccard);
  // A margin, so that rounding never rules out a pair the rule's own arithmetic accepts.
  return static_cast<double>(small) >= lowest * static_cast<double>(large) * (1 - 1e-9);
}

namespace {

// Exact and whitespace-only copies, decided by the hashes alone: true (and the decision made)
// for either.
bool DecideByHashes(const PairDocument& a, const PairDocument& b, PairDecision* decision) {
  if (a.content_hash == b.content_hash && a.text_bytes == b.text_bytes) {
    decision->reason = DuplicateReason::kExact;
  } else if (a.squeezed_hash == b.squeezed_hash) {
    decision->reason = DuplicateReason::kWhitespace;
  }
  if (!decision->duplicate()) return false;
  decision->similarity = decision->jaccard = decision->containment = 1;
  decision->size_guard = true;
  return true;
}

// The shared count of two sets whose every weight is 1. The pair is a duplicate iff the
// intersection reaches `need` (exactly, with Classify's own arithmetic) or, for `edited`,
// `also_need` (more than either size when that reason cannot apply), so with `can_stop` the
// merge stops once it cannot reach either: nullopt then (not measured).
// (SharedCount and SharedWeight stay out of line: their merge loops compile tighter on their own.
// Callgrind, neardup dedup of devpairs: inlined, Measure took 6.7 % more instructions than the
// undivided function; out of line, 2.4 % fewer.)
[[gnu::noinline]] std::optional<double> SharedCount(std::span<const uint32_t> x,
                                                    std::span<const uint32_t> y,
                                                    const PairRuleOptions& o, bool size_guard,
                                                    double small, uint64_t also_need,
                                                    bool can_stop) {
  const size_t nx = x.size(), ny = y.size();
  const uint64_t smaller = std::min(nx, ny);
  uint64_t need = smaller + 1;
  if (can_stop) {
    auto jaccard_of = [&](uint64_t c) {
      return static_cast<double>(c) / static_cast<double>(nx + ny - c);
    };
    need = SmallestReaching(
        o.jaccard_threshold * static_cast<double>(nx + ny) / (1 + o.jaccard_threshold), smaller,
        o.jaccard_threshold, jaccard_of);
    if (size_guard) {
      auto containment_of = [&](uint64_t c) { return static_cast<double>(c) / small; };
      need = std::min(need, SmallestReaching(o.containment_threshold * small, smaller,
                                             o.containment_threshold, containment_of));
    }
    need = std::min(need, also_need);  // what `edited` needs
    if (need > smaller) return std::nullopt;
  }
  size_t i = 0, j = 0;
  uint64_t common = 0;
  while (i < nx && j < ny) {
    if (x[i] < y[j]) {
      ++i;
      if (can_stop && common + std::min(nx - i, ny - j) < need) break;
    } else if (y[j] < x[i]) {
      ++j;
      if (can_stop && common + std::min(nx - i, ny - j) < need) break;
    } else {
      ++common;
      ++i;
      ++j;
    }
  }
  if (can_stop && common < need) return std::nullopt;
  return static_cast<double>(common);
}

// The shared weight of two weighted sets (weighted sizes wx, wy). Each shingle weighs at most 1,
// so the weight still to come is at most the count of either side's remaining shingles; one
// shingle of margin keeps rounding from stopping a pair the full computation would accept. With
// `can_stop`, nullopt (not measured) once the pair cannot reach either threshold.
[[gnu::noinline]] std::optional<double> SharedWeight(const PairRule& rule,
                                                     std::span<const uint32_t> x,
                                                     std::span<const uint32_t> y,
                                                     const PairRuleOptions& o, double wx, double wy,
                                                     bool size_guard, double small, bool can_stop) {
  const size_t nx = x.size(), ny = y.size();
  const double need_jaccard = o.jaccard_threshold * (wx + wy) / (1 + o.jaccard_threshold);
  const double need_containment =
      size_guard ? o.containment_threshold * small : std::numeric_limits<double>::max();
  const double need = std::min(need_jaccard, need_containment) - 1 - kSlack;
  if (can_stop && need > static_cast<double>(std::min(nx, ny))) return std::nullopt;
  double shared = 0;
  size_t i = 0, j = 0;
  uint32_t steps = 0;
  while (i < nx && j < ny) {
    if (x[i] < y[j]) {
      ++i;
    } else if (y[j] < x[i]) {
      ++j;
    } else {
      shared += rule.Weight(x[i]);
      ++i;
      ++j;
    }
    if (can_stop && (++steps & 15) == 0 &&
        shared + static_cast<double>(std::min(nx - i, ny - j)) < need) {
      return std::nullopt;
    }
  }
  return shared;
}

// The measured pair's Jaccard and containment, and its reason: near_duplicate at the Jaccard
// threshold, else contained (size guard and containment threshold), else none. A pair below
// the plain floor is never a duplicate.
void Classify(double shared, double wx, double wy, double small, bool below_floor,
              const PairRuleOptions& o, PairDecision* decision) {
  const double united = wx + wy - shared;
  decision->jaccard = united > 0 ? shared / united : 0;
  decision->containment = std::min(1.0, shared / small);
  if (below_floor) {
    decision->similarity = decision->jaccard;
  } else if (decision->jaccard >= o.jaccard_threshold) {
    decision->reason = DuplicateReason::kNearDuplicate;
    decision->similarity = decision->jaccard;
  } else if (decision->size_guard && decision->containment >= o.containment_threshold) {
    decision->reason = DuplicateReason::kContained;
    decision->similarity = decision->containment;
  } else {
    decision->similarity = decision->jaccard;
  }
}

}  // namespace

PairDecision PairRule::Measure(const PairDocument& a, const PairDocument& b, bool fast) const {
  PairDecision decision;
  if (DecideByHashes(a, b, &decision)) return decision;
  const PairRuleOptions& o = options_;
  const std::span<const uint32_t> x = a.shingles, y = b.shingles;
  const size_t nx = x.size(), ny = y.size();
  // `edited` needs a plain shared count of edited_need (more than either size: cannot apply).
  const bool edited = o.jaccard_threshold > 0 && EditedApplies(a, b);
  const uint64_t edited_need =
      edited ? PlainNeed(nx, ny, o.edited_min_jaccard) : std::max(nx, ny) + 1;
  // The plain shared count, when known exactly.
  std::optional<uint64_t> plain;
  // With boilerplate weights, a pair must share a plain Jaccard of kPlainJaccardFloor first
  // (settled by counts, before any weight is looked up), unless it may be `edited`.
  bool below_floor = false;
  if (frequencies_ != nullptr && !x.empty() && !y.empty() && o.jaccard_threshold > 0) {
    const uint64_t floor_need = PlainNeed(nx, ny, kPlainJaccardFloor);
    const uint64_t need = std::min(floor_need, edited_need);
    const uint64_t common = CommonCount(x, y, need, fast);
    below_floor = common < floor_need;
    if (common < need && fast) {
      decision.measured = false;
      return decision;
    }
    plain = common;  // exact: CommonCount stops only below `need`
  }
  const double wx = a.weight ? *a.weight : Weight(x);
  const double wy = b.weight ? *b.weight : Weight(y);
  const double small = std::min(wx, wy), large = std::max(wx, wy);
  decision.size_guard = o.containment_threshold > 0 && small > 0 &&
                        small >= o.containment_min_shingles &&
                        small >= o.containment_min_ratio * large;
  if (x.empty() || y.empty()) {
    // A document without shingles resembles nothing but its own copies.
    if (o.jaccard_threshold == 0) decision.reason = DuplicateReason::kNearDuplicate;
    return decision;
  }
  const bool can_stop = fast && o.jaccard_threshold > 0;
  // Without boilerplate in either set every weight is 1: the count path decides exactly the same.
  const bool unweighted =
      frequencies_ == nullptr || (wx == static_cast<double>(nx) && wy == static_cast<double>(ny));
  auto shared_of = [&](bool stop) {
    return unweighted ? SharedCount(x, y, o, decision.size_guard, small, edited_need, stop)
                      : SharedWeight(*this, x, y, o, wx, wy, decision.size_guard, small, stop);
  };
  std::optional<double> shared = shared_of(can_stop);
  if (shared) {
    Classify(*shared, wx, wy, small, below_floor, o, &decision);
    if (unweighted) plain = static_cast<uint64_t>(*shared);
  } else {
    decision.measured = false;
  }
  if (decision.duplicate() || !edited) return decision;
  // edited: the plain measures, whatever the weights.
  // (Unset only when SharedCount stopped early: below every need, edited_need included.)
  if (!plain || *plain < edited_need) return decision;
  const size_t ux = a.units.size(), uy = b.units.size();
  const uint64_t unit_need = PlainNeed(ux, uy, o.edited_threshold);
  const uint64_t unit_common = CommonCount(a.units, b.units, unit_need, fast);
  if (unit_common < unit_need && fast) return decision;
  decision.unit_jaccard =
      static_cast<double>(unit_common) / static_cast<double>(ux + uy - unit_common);
  if (unit_common < unit_need) return decision;
  // Accepted: every value as Decide measures it.
  if (!shared) {
    shared = shared_of(false);
    Classify(*shared, wx, wy, small, below_floor, o, &decision);
    decision.measured = true;
  }
  decision.reason = DuplicateReason::kEdited;
  decision.similarity = *decision.unit_jaccard;
  return decision;
}

// ---- the rule and LSH plan of a dedup run (dedup, the store and Dask resolve them here) ------

double ResolveVerifyThreshold(const DedupOptions& options) {
  return options.verify_threshold.value_or(options.lsh.threshold);
}

Result<MinHashLshOptions> ResolveDedupLsh(const DedupOptions& options) {
  MinHashLshOptions lsh = options.lsh;
  if (!lsh.parameters) {
    auto threshold = ResolveLshParameters(lsh);  // checks the threshold
    if (!threshold.ok()) return threshold.status();
    const double lowest = LowestAcceptedJaccard(ResolvePairRule(options));
    if (lowest > 0 && lowest < lsh.threshold) {
      auto chosen = ChooseLshParameters(lowest);
      if (!chosen.ok()) return chosen.status();
      lsh.parameters = *chosen;
    }
  }
  auto checked = ResolveLshParameters(lsh);
  if (!checked.ok()) return checked.status();
  lsh.parameters = *checked;
  return lsh;
}

PairRuleOptions ResolvePairRule(const DedupOptions& options) {
  PairRuleOptions rule;
  rule.jaccard_threshold = ResolveVerifyThreshold(options);
  rule.containment_threshold = options.containment_threshold;
  rule.containment_min_shingles = options.containment_min_shingles;
  rule.containment_min_ratio = options.containment_min_ratio;
  rule.edited_threshold = options.edited_threshold;
  rule.edited_min_jaccard = options.edited_min_jaccard;
  return rule;
}

}  // namespace neardup
