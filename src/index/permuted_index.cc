// PermutedIndex: segments of permuted sorted tables plus a delta buffer, searched exactly; see
// include/neardup/permuted_index.h for the layout and thread-safety contract.
#include "neardup/permuted_index.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "common/parallel.h"
#include "index/table_segment.h"
#include "neardup/hamming_join.h"

namespace neardup {
namespace {

using index::TableSegment;
using Row = index::SegmentRow;
using Segment = TableSegment;

constexpr size_t kParallelMin = 1 << 17;  // smaller builds stay on the calling thread

// Rows of a segment or delta not yet merged, with a fixed capacity so readers of older snapshots
// can keep reading a prefix while the writer appends past it.
struct DeltaBuffer {
  explicit DeltaBuffer(size_t capacity)
      : ids(new uint64_t[capacity]), lo(new uint64_t[capacity]), hi(new uint64_t[capacity]) {}
  std::unique_ptr<uint64_t[]> ids, lo, hi;
};

struct Snapshot {
  std::vector<std::shared_ptr<const Segment>> segments;
  std::shared_ptr<DeltaBuffer> delta;
  size_t delta_size = 0;
  std::shared_ptr<const std::vector<Row>> tombstones;  // sorted; may be null
  size_t size = 0;                                     // live items

  bool IsDead(uint64_t hi, uint64_t lo, uint64_t id) const {
    return tombstones && !tombstones->empty() &&
           std::binary_search(tombstones->begin(), tombstones->end(), Row{hi, lo, id});
  }
};

using Counters = index::SearchCounters;
using Scratch = index::SearchScratch;

}  // namespace

struct PermutedIndex::Impl {
  PermutedIndexOptions options;
  IndexDesign design;
  std::shared_ptr<const index::CompiledDesign> compiled;

  mutable std::mutex snapshot_mu;
  std::shared_ptr<const Snapshot> snapshot;
  std::mutex writer_mu;

  mutable std::atomic<uint64_t> queries{0}, probes{0}, candidates{0}, results{0}, oversized{0};

  std::shared_ptr<const Snapshot> Load() const {
    std::lock_guard<std::mutex> lock(snapshot_mu);
    return snapshot;
  }
  void Publish(std::shared_ptr<const Snapshot> s) {
    std::lock_guard<std::mutex> lock(snapshot_mu);
    snapshot = std::move(s);
  }
  int threads() const { return options.threads > 0 ? options.threads : DefaultThreadCount(); }

  Status Check(const Fingerprint& fp, const char* what) const {
    if (fp.bits != options.bits)
      return Status::InvalidArgument(std::string(what) + ": fingerprint has " +
                                     std::to_string(fp.bits) + " bits, index holds " +
                                     std::to_string(options.bits));
    if (fp.bits == 64 && fp.hi != 0)
      return Status::InvalidArgument(std::string(what) +
                                     ": 64-bit fingerprint with bits set in its high word");
    return Status::Ok();
  }

  // Segments address rows with uint32 offsets.
  static Status CheckCapacity(size_t current, size_t adding) {
    if (current + adding > std::numeric_limits<uint32_t>::max())
      return Status::ResourceExhausted("PermutedIndex: more than 2^32-1 fingerprints in one index");
    return Status::Ok();
  }

  std::shared_ptr<const Segment> Build(std::vector<Row> rows) const {
    const int build_threads = rows.size() >= kParallelMin ? threads() : 1;
    return TableSegment::Build(std::move(rows), options.bits, compiled, build_threads);
  }

  static void AppendRows(const Segment& seg, const Snapshot& s, std::vector<Row>* out) {
    for (size_t i = 0; i < seg.size(); ++i) {
      Row r{seg.hi(i), seg.lo(i), seg.id(i)};
      if (!s.IsDead(r.hi, r.lo, r.id)) out->push_back(r);
    }
  }

  // Merges the newest segments while the older of the last two is at most twice the newer.
  void MergeTail(const Snapshot& s, std::vector<std::shared_ptr<const Segment>>* segments) const {
    while (segments->size() >= 2) {
      const auto& older = (*segments)[segments->size() - 2];
      const auto& newer = segments->back();
      if (older->size() > 2 * newer->size()) break;
      std::vector<Row> rows;
      rows.reserve(older->size() + newer->size());
      AppendRows(*older, s, &rows);
      AppendRows(*newer, s, &rows);
      segments->pop_back();
      segments->pop_back();
      if (!rows.empty()) segments->push_back(Build(std::move(rows)));
    }
  }

  std::shared_ptr<Snapshot> CompactedSnapshot(const Snapshot& s) const {
    std::vector<Row> rows;
    rows.reserve(s.size);
    for (const auto& seg : s.segments) AppendRows(*seg, s, &rows);
    for (size_t i = 0; i < s.delta_size; ++i)
      rows.push_back({s.delta->hi[i], s.delta->lo[i], s.delta->ids[i]});
    auto next = std::make_shared<Snapshot>();
    next->size = rows.size();
    if (!rows.empty()) next->segments.push_back(Build(std::move(rows)));
    next->delta = std::make_shared<DeltaBuffer>(options.delta_capacity);
    return next;
  }

  // Visits every live item of `s` within k of (hi, lo): visit(global_row, id, distance). Global
  // rows number the segments' rows in order, then the delta's.
  template <typename Visit>
  void SearchSnapshot(const Snapshot& s, uint64_t hi, uint64_t lo, int k, Scratch* scratch,
                      Visit&& visit) const {
    Counters counters;
    size_t offset = 0;
    uint64_t found = 0;
    for (const auto& seg : s.segments) {
      seg->Search(hi, lo, k, &counters, scratch, [&](uint32_t row, int d) {
        uint64_t id = seg->id(row);
        if (s.IsDead(seg->hi(row), seg->lo(row), id)) return;
        ++found;
        visit(offset + row, id, d);
      });
      offset += seg->size();
    }
    const DeltaBuffer* delta = s.delta.get();
    counters.candidates += s.delta_size;
    for (size_t i = 0; i < s.delta_size; ++i) {
      int d = std::popcount(delta->lo[i] ^ lo) + std::popcount(delta->hi[i] ^ hi);
      if (d <= k) {
        ++found;
        visit(offset + i, delta->ids[i], d);
      }
    }
    queries.fetch_add(1, std::memory_order_relaxed);
    probes.fetch_add(counters.probes, std::memory_order_relaxed);
    candidates.fetch_add(counters.candidates, std::memory_order_relaxed);
    oversized.fetch_add(counters.oversized, std::memory_order_relaxed);
    results.fetch_add(found, std::memory_order_relaxed);
  }

  std::vector<Neighbor> SearchOne(const Snapshot& s, const Fingerprint& q, int k,
                                  Scratch* scratch) const {
    std::vector<Neighbor> out;
    SearchSnapshot(s, q.hi, q.lo, k, scratch, [&](size_t, uint64_t id, int d) {
      out.push_back({id, d});
    });
    // One entry per id (its nearest stored fingerprint), sorted by (distance, id).
    std::sort(out.begin(), out.end(), [](const Neighbor& a, const Neighbor& b) {
      return a.id != b.id ? a.id < b.id : a.distance < b.distance;
    });
    out.erase(std::unique(out.begin(), out.end(),
                          [](const Neighbor& a, const Neighbor& b) { return a.id == b.id; }),
              out.end());
    std::sort(out.begin(), out.end(), [](const Neighbor& a, const Neighbor& b) {
      return a.distance != b.distance ? a.distance < b.distance : a.id < b.id;
    });
    return out;
  }
};

PermutedIndex::PermutedIndex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PermutedIndex::~PermutedIndex() = default;

Result<std::unique_ptr<PermutedIndex>> PermutedIndex::Create(const PermutedIndexOptions& options) {
  if (options.bits != 64 && options.bits != 128)
    return Status::InvalidArgument("PermutedIndex: bits must be 64 or 128, got " +
                                   std::to_string(options.bits));
  if (options.threads < 0) {
    return Status::InvalidArgument("PermutedIndex: threads must be 0 (all cores) or more, got " +
                                   std::to_string(options.threads));
  }
  if (options.delta_capacity == 0)
    return Status::InvalidArgument("PermutedIndex: delta_capacity must be positive");
  if (!(options.expected_size >= 1))
    return Status::InvalidArgument("PermutedIndex: expected_size must be at least 1, got " +
                                   std::to_string(options.expected_size));
  if (!(options.memory_budget.bytes >= 0) || !(options.memory_budget.bytes_per_fingerprint >= 0))
    return Status::InvalidArgument("PermutedIndex: memory_budget must not be negative, got " +
                                   options.memory_budget.ToString());
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (options.design) {
    const IndexDesign& d = *options.design;
    if (d.bits != options.bits || d.indexed_k < 0 ||
        static_cast<int>(d.probe_radius.size()) != d.indexed_k + 1 || d.tables.empty())
      return Status::InvalidArgument("PermutedIndex: design does not match the options");
    impl->design = d;
  } else {
    PlanRequest request;
    request.bits = options.bits;
    request.indexed_k = options.indexed_k;
    request.expected_size = options.expected_size;
    request.memory_budget = options.memory_budget;
    auto plan = PlanIndex(request);
    if (!plan.ok() && request.memory_budget.TotalFor(request.expected_size) > 0) {
      request.memory_budget = {};  // nothing fits: take the cheapest-to-query design
      plan = PlanIndex(request);
    }
    if (!plan.ok()) return plan.status().WithContext("PermutedIndex");
    impl->design = std::move(plan).value();
  }
  auto compiled = index::CompileDesign(impl->design);
  if (!compiled.ok()) return compiled.status().WithContext("PermutedIndex");
  impl->compiled = std::move(*compiled);
  auto s = std::make_shared<Snapshot>();
  s->delta = std::make_shared<DeltaBuffer>(options.delta_capacity);
  impl->snapshot = std::move(s);
  return std::unique_ptr<PermutedIndex>(new PermutedIndex(std::move(impl)));
}

int PermutedIndex::bits() const { return impl_->options.bits; }
int PermutedIndex::max_search_k() const { return impl_->design.indexed_k; }
size_t PermutedIndex::size() const { return impl_->Load()->size; }
const IndexDesign& PermutedIndex::design() const { return impl_->design; }

Status PermutedIndex::Add(uint64_t id, const Fingerprint& fp) {
  NEARDUP_RETURN_IF_ERROR(impl_->Check(fp, "PermutedIndex::Add"));
  std::lock_guard<std::mutex> lock(impl_->writer_mu);
  auto current = impl_->Load();
  NEARDUP_RETURN_IF_ERROR(Impl::CheckCapacity(current->size, 1));
  std::shared_ptr<Snapshot> next;
  if (current->IsDead(fp.hi, fp.lo, id)) {
    // Re-adding a removed pair: purge tombstones so the new copy is not hidden.
    next = impl_->CompactedSnapshot(*current);
  } else {
    next = std::make_shared<Snapshot>(*current);
  }
  if (next->delta_size == impl_->options.delta_capacity) {
    std::vector<Row> rows;
    rows.reserve(next->delta_size);
    for (size_t i = 0; i < next->delta_size; ++i)
      rows.push_back({next->delta->hi[i], next->delta->lo[i], next->delta->ids[i]});
    next->segments.push_back(impl_->Build(std::move(rows)));
    impl_->MergeTail(*next, &next->segments);
    next->delta = std::make_shared<DeltaBuffer>(impl_->options.delta_capacity);
    next->delta_size = 0;
  }
  size_t slot = next->delta_size;
  next->delta->ids[slot] = id;
  next->delta->lo[slot] = fp.lo;
  next->delta->hi[slot] = fp.hi;
  next->delta_size = slot + 1;
  next->size += 1;
  impl_->Publish(std::move(next));
  return Status::Ok();
}

Status PermutedIndex::AddBatch(std::span<const uint64_t> ids, std::span<const Fingerprint> fps) {
  if (ids.size() != fps.size())
    return Status::InvalidArgument("PermutedIndex::AddBatch: " + std::to_string(ids.size()) +
                                   " ids but " + std::to_string(fps.size()) + " fingerprints");
  for (size_t i = 0; i < fps.size(); ++i) {
    Status st = impl_->Check(fps[i], "PermutedIndex::AddBatch");
    if (!st.ok()) return st.WithContext("item " + std::to_string(i));
  }
  if (fps.size() < impl_->options.delta_capacity) {
    for (size_t i = 0; i < fps.size(); ++i) NEARDUP_RETURN_IF_ERROR(Add(ids[i], fps[i]));
    return Status::Ok();
  }
  std::vector<Row> rows(fps.size());
  for (size_t i = 0; i < fps.size(); ++i) rows[i] = {fps[i].hi, fps[i].lo, ids[i]};
  std::lock_guard<std::mutex> lock(impl_->writer_mu);
  auto current = impl_->Load();
  NEARDUP_RETURN_IF_ERROR(Impl::CheckCapacity(current->size, rows.size()));
  std::shared_ptr<Snapshot> next = std::make_shared<Snapshot>(*current);
  if (current->tombstones && !current->tombstones->empty()) {
    for (const Row& r : rows) {
      if (current->IsDead(r.hi, r.lo, r.id)) {
        next = impl_->CompactedSnapshot(*current);
        break;
      }
    }
  }
  size_t added = rows.size();
  next->segments.push_back(impl_->Build(std::move(rows)));
  impl_->MergeTail(*next, &next->segments);
  next->size += added;
  impl_->Publish(std::move(next));
  return Status::Ok();
}

size_t PermutedIndex::Remove(uint64_t id, const Fingerprint& fp) {
  if (fp.bits != impl_->options.bits) return 0;
  std::lock_guard<std::mutex> lock(impl_->writer_mu);
  auto current = impl_->Load();
  auto next = std::make_shared<Snapshot>(*current);
  size_t removed = 0;
  // Delta: copy without the pair.
  size_t in_delta = 0;
  for (size_t i = 0; i < current->delta_size; ++i)
    if (current->delta->ids[i] == id && current->delta->lo[i] == fp.lo &&
        current->delta->hi[i] == fp.hi)
      ++in_delta;
  if (in_delta > 0) {
    auto delta = std::make_shared<DeltaBuffer>(impl_->options.delta_capacity);
    size_t j = 0;
    for (size_t i = 0; i < current->delta_size; ++i) {
      if (current->delta->ids[i] == id && current->delta->lo[i] == fp.lo &&
          current->delta->hi[i] == fp.hi)
        continue;
      delta->ids[j] = current->delta->ids[i];
      delta->lo[j] = current->delta->lo[i];
      delta->hi[j] = current->delta->hi[i];
      ++j;
    }
    next->delta = std::move(delta);
    next->delta_size = j;
    removed += in_delta;
  }
  // Segments: count live copies, then tombstone the pair.
  if (!current->IsDead(fp.hi, fp.lo, id)) {
    size_t in_segments = 0;
    for (const auto& seg : current->segments) {
      // Rows are sorted by (hi, lo, id).
      for (size_t row = seg->Find(fp.hi, fp.lo, id); row < seg->size() && seg->lo(row) == fp.lo &&
                                                     seg->hi(row) == fp.hi && seg->id(row) == id;
           ++row)
        ++in_segments;
    }
    if (in_segments > 0) {
      auto tomb = current->tombstones ? std::make_shared<std::vector<Row>>(*current->tombstones)
                                      : std::make_shared<std::vector<Row>>();
      Row r{fp.hi, fp.lo, id};
      tomb->insert(std::upper_bound(tomb->begin(), tomb->end(), r), r);
      next->tombstones = std::move(tomb);
      removed += in_segments;
    }
  }
  if (removed == 0) return 0;
  next->size -= removed;
  if (next->tombstones && next->tombstones->size() > 64 &&
      next->tombstones->size() * 8 > next->size) {
    next = impl_->CompactedSnapshot(*next);
  }
  impl_->Publish(std::move(next));
  return removed;
}

void PermutedIndex::Compact() {
  std::lock_guard<std::mutex> lock(impl_->writer_mu);
  auto current = impl_->Load();
  impl_->Publish(impl_->CompactedSnapshot(*current));
}

Result<std::vector<Neighbor>> PermutedIndex::Search(const Fingerprint& query, int k) const {
  NEARDUP_RETURN_IF_ERROR(impl_->Check(query, "PermutedIndex::Search"));
  if (k < 0 || k > impl_->design.indexed_k)
    return Status::InvalidArgument("PermutedIndex::Search: k=" + std::to_string(k) +
                                   " outside [0, " + std::to_string(impl_->design.indexed_k) + "]");
  thread_local Scratch scratch;
  auto s = impl_->Load();
  return impl_->SearchOne(*s, query, k, &scratch);
}

Result<std::vector<std::vector<Neighbor>>> PermutedIndex::SearchBatch(
    std::span<const Fingerprint> queries, int k) const {
  if (k < 0 || k > impl_->design.indexed_k)
    return Status::InvalidArgument("PermutedIndex::SearchBatch: k=" + std::to_string(k) +
                                   " outside [0, " + std::to_string(impl_->design.indexed_k) + "]");
  for (size_t i = 0; i < queries.size(); ++i) {
    Status st = impl_->Check(queries[i], "PermutedIndex::SearchBatch");
    if (!st.ok()) return st.WithContext("query " + std::to_string(i));
  }
  auto s = impl_->Load();
  std::vector<std::vector<Neighbor>> out(queries.size());
  ParallelFor(
      queries.size(), impl_->threads(),
      [&](size_t begin, size_t end) {
        Scratch scratch;
        for (size_t i = begin; i < end; ++i) out[i] = impl_->SearchOne(*s, queries[i], k, &scratch);
      },
      256);
  return out;
}

Result<std::vector<NeighborPair>> PermutedIndex::SelfJoin(int k) const {
  if (k < 0 || k > impl_->design.indexed_k)
    return Status::InvalidArgument("PermutedIndex::SelfJoin: k=" + std::to_string(k) +
                                   " outside [0, " + std::to_string(impl_->design.indexed_k) + "]");
  auto s = impl_->Load();
  // The live items, joined by the one Hamming join (neardup/hamming_join.h).
  std::vector<uint64_t> ids;
  std::vector<Fingerprint> fingerprints;
  ids.reserve(s->size);
  fingerprints.reserve(s->size);
  const int bits = impl_->options.bits;
  auto push = [&](uint64_t hi, uint64_t lo, uint64_t id) {
    ids.push_back(id);
    fingerprints.push_back(Fingerprint{bits == 128 ? hi : 0, lo, bits});
  };
  for (const auto& seg : s->segments) {
    for (size_t i = 0; i < seg->size(); ++i) {
      if (!s->IsDead(seg->hi(i), seg->lo(i), seg->id(i))) push(seg->hi(i), seg->lo(i), seg->id(i));
    }
  }
  for (size_t i = 0; i < s->delta_size; ++i)
    push(s->delta->hi[i], s->delta->lo[i], s->delta->ids[i]);
  const size_t n = ids.size();
  if (n > std::numeric_limits<uint32_t>::max())
    return Status::ResourceExhausted("PermutedIndex::SelfJoin: more than 2^32 items");
  std::vector<NeighborPair> pairs;
  if (n >= 2) {
    auto join = HammingJoin::Create(bits, k, static_cast<double>(n));
    if (!join.ok()) return join.status().WithContext("PermutedIndex::SelfJoin");
    std::vector<NeighborPair> rows = join->SelfJoin(fingerprints, impl_->threads());
    pairs.reserve(rows.size());
    for (const NeighborPair& p : rows) {
      const uint64_t a = ids[p.a], b = ids[p.b];
      if (a == b) continue;
      pairs.push_back({std::min(a, b), std::max(a, b), p.distance});
    }
  }
  std::sort(pairs.begin(), pairs.end());
  return pairs;
}

IndexSearchStats PermutedIndex::stats() const {
  IndexSearchStats st;
  st.queries = impl_->queries.load();
  st.probes = impl_->probes.load();
  st.candidates = impl_->candidates.load();
  st.results = impl_->results.load();
  return st;
}

PermutedIndexStats PermutedIndex::detailed_stats() const {
  PermutedIndexStats st;
  st.search = stats();
  st.oversized_runs = impl_->oversized.load();
  auto s = impl_->Load();
  st.segments = s->segments.size();
  st.delta_size = s->delta_size;
  st.tombstones = s->tombstones ? s->tombstones->size() : 0;
  for (const auto& seg : s->segments) st.memory_bytes += seg->image_size();
  return st;
}

void PermutedIndex::ResetStats() {
  impl_->queries = 0;
  impl_->probes = 0;
  impl_->candidates = 0;
  impl_->results = 0;
  impl_->oversized = 0;
}

}  // namespace neardup
