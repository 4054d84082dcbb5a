// IndexPlanner: enumerates one- and two-level permuted-table designs and prices them; see
// include/neardup/index_planner.h.
#include "neardup/index_planner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>

namespace neardup {
namespace {

// Cost model constants (nanoseconds), measured roughly with bench/index_bench on x86-64, after the
// probe of src/index/table_segment.cc: every probe key of a table reads its directory entry; the
// distinct directory buckets the keys fall in (keys differing only below the directory bits share
// one) are fetched from memory once each (usually a cache miss), and a bucket of up to
// kSmallBucket keys is scanned whole with XOR + popcount (every key is a candidate); a larger one
// is binary-searched for each probe key, whose run of equal keys is then compared.
constexpr double kBucketNs = 25.0;     // fetching one directory bucket (directory + key lines)
constexpr double kProbeKeyNs = 2.0;    // one probe key: its directory entry, in cache
constexpr double kScanNs = 0.5;        // one key of a small bucket scanned whole
constexpr double kSearchStepNs = 3.0;  // one step of a binary search in a large bucket
constexpr double kCandidateNs = 1.0;   // one key of a large bucket's run compared
constexpr double kTableNs = 3.0;       // permuting the query for one table
constexpr double kSmallBucket = 32;    // = table_segment.cc's kSmallBucket
constexpr size_t kMaxTables = 512;
constexpr double kMaxProbesPerTable = 1e5;

// Splits `width` bits starting at virtual offset 0 into `blocks` blocks; the first width % blocks
// blocks are one bit wider (Manku's 11,11,11,11,10,10 for 64 bits in 6 blocks).
std::vector<int> BlockWidths(int width, int blocks) {
  std::vector<int> widths(blocks, width / blocks);
  for (int i = 0; i < width % blocks; ++i) ++widths[i];
  return widths;
}

// Every t-subset of {0..b-1} in lexicographic order.
std::vector<std::vector<int>> Combinations(int b, int t) {
  std::vector<std::vector<int>> out;
  std::vector<int> current(t);
  std::iota(current.begin(), current.end(), 0);
  if (t > b || t <= 0) return out;
  for (;;) {
    out.push_back(current);
    int i = t - 1;
    while (i >= 0 && current[i] == b - t + i) --i;
    if (i < 0) break;
    ++current[i];
    for (int j = i + 1; j < t; ++j) current[j] = current[j - 1] + 1;
  }
  return out;
}

double Choose(int n, int r) {
  if (r < 0 || r > n) return 0;
  double result = 1;
  for (int i = 1; i <= r; ++i) result = result * (n - r + i) / i;
  return result;
}

// Largest possible sum of errors in the t least-damaged of b blocks when k errors are spread over
// them: the probe radius that keeps a t-block key design exact (pigeonhole).
int RequiredRadius(int k, int b, int t) {
  int q = k / b, rem = k % b;
  int r = t * q;
  if (t > b - rem) r += t - (b - rem);
  return r;
}

void MergeAdjacent(std::vector<BitRange>* ranges) {
  std::vector<BitRange> merged;
  for (const BitRange& r : *ranges) {
    if (r.width <= 0) continue;
    if (!merged.empty() && merged.back().start + merged.back().width == r.start) {
      merged.back().width += r.width;
    } else {
      merged.push_back(r);
    }
  }
  *ranges = std::move(merged);
}

// Maps a virtual range [start, start+width) of the concatenation of `space` to real ranges.
std::vector<BitRange> MapRange(const std::vector<BitRange>& space, int start, int width) {
  std::vector<BitRange> out;
  int offset = 0;
  for (const BitRange& r : space) {
    int lo = std::max(start, offset), hi = std::min(start + width, offset + r.width);
    if (lo < hi) out.push_back({r.start + (lo - offset), hi - lo});
    offset += r.width;
  }
  return out;
}

std::vector<BitRange> Complement(const std::vector<BitRange>& used, int bits) {
  std::vector<char> taken(bits, 0);
  for (const BitRange& r : used)
    for (int i = r.start; i < r.start + r.width; ++i) taken[i] = 1;
  std::vector<BitRange> out;
  for (int i = 0; i < bits; ++i)
    if (!taken[i]) out.push_back({i, 1});
  MergeAdjacent(&out);
  return out;
}

std::string JoinWidths(const std::vector<int>& widths) {
  std::string s;
  for (size_t i = 0; i < widths.size(); ++i) {
    if (i) s += ',';  // two appends: GCC 12 reports a false -Wrestrict on "," + ...
    s += std::to_string(widths[i]);
  }
  return s;
}

void Price(IndexDesign* d) {
  const double n = std::max(1.0, d->expected_size);
  const int k = d->indexed_k;
  const int r = d->probe_radius[k];
  double probes = 0, candidates = 0, cost = 0, bytes = 8.0 + d->bits / 8.0;
  for (const IndexTableSpec& t : d->tables) {
    const int dir_bits = DirectoryBitsFor(n, t.key_bits);
    double table_probes = 0, buckets = 0;
    for (int i = 0; i <= r; ++i) {
      table_probes += Choose(t.key_bits, i);
      buckets += Choose(dir_bits, i);
    }
    const double bucket_keys = n / std::ldexp(1.0, dir_bits);  // keys per directory bucket
    probes += table_probes;
    cost += kTableNs + table_probes * kProbeKeyNs + buckets * kBucketNs;
    if (bucket_keys <= kSmallBucket) {
      candidates += buckets * bucket_keys;
      cost += buckets * bucket_keys * kScanNs;
    } else {
      const double run = table_probes * n / std::ldexp(1.0, t.key_bits);
      candidates += run;
      cost += table_probes * std::log2(bucket_keys) * kSearchStepNs + run * kCandidateNs;
    }
    if (!IsIdentityProjection(t, d->bits)) bytes += d->bits == 64 ? 8.0 : 12.0;
    bytes += 4.0 * std::ldexp(1.0, dir_bits) / n;
  }
  d->probes_per_query = probes;
  d->candidates_per_query = candidates;
  d->bytes_per_fingerprint = bytes;
  d->cost_ns = cost;
}

bool ProbesAffordable(int key_bits, int radius) {
  double p = 0;
  for (int i = 0; i <= radius; ++i) p += Choose(key_bits, i);
  return p <= kMaxProbesPerTable;
}

}  // namespace

double MemoryBudget::TotalFor(double n) const {
  double total = 0;
  if (bytes > 0) total = bytes;
  if (bytes_per_fingerprint > 0) {
    const double per = bytes_per_fingerprint * std::max(1.0, n);
    total = total > 0 ? std::min(total, per) : per;
  }
  return total;
}

std::string MemoryBudget::ToString() const {
  char buf[96];
  if (bytes > 0 && bytes_per_fingerprint > 0)
    std::snprintf(buf, sizeof(buf), "%.0f bytes and %g bytes per fingerprint", bytes,
                  bytes_per_fingerprint);
  else if (bytes > 0)
    std::snprintf(buf, sizeof(buf), "%.0f bytes", bytes);
  else if (bytes_per_fingerprint > 0)
    std::snprintf(buf, sizeof(buf), "%g bytes per fingerprint", bytes_per_fingerprint);
  else
    return "unlimited";
  return buf;
}

Result<MemoryBudget> ParseMemoryBudget(std::string_view text) {
  MemoryBudget budget;
  std::string t(text);
  auto bad = [&] {
    return Status::InvalidArgument("memory budget \"" + t +
                                   "\": expected bytes (e.g. 640000000, 640M, 1.5G), bytes per "
                                   "fingerprint (e.g. 128/fp) or unlimited");
  };
  if (t == "unlimited" || t == "0") return budget;
  bool per_fp = false;
  for (const char* suffix : {"B/fp", "/fp"}) {
    const std::string sfx = suffix;
    if (t.size() > sfx.size() && t.compare(t.size() - sfx.size(), sfx.size(), sfx) == 0) {
      per_fp = true;
      t.resize(t.size() - sfx.size());
      break;
    }
  }
  double scale = 1;
  if (!per_fp && !t.empty()) {
    const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(t.back())));
    const char* units = "KMGT";
    if (const char* u = std::strchr(units, last); u != nullptr && last != '\0') {
      scale = std::ldexp(1.0, 10 * static_cast<int>(u - units + 1));
      t.pop_back();
    }
  }
  char* end = nullptr;
  const double value = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !(value >= 0) || !std::isfinite(value)) {
    t = std::string(text);
    return bad();
  }
  if (per_fp)
    budget.bytes_per_fingerprint = value;
  else
    budget.bytes = value * scale;
  return budget;
}

int IndexDesign::min_key_bits() const {
  int m = 1 << 20;
  for (const auto& t : tables) m = std::min(m, t.key_bits);
  return tables.empty() ? 0 : m;
}
int IndexDesign::max_key_bits() const {
  int m = 0;
  for (const auto& t : tables) m = std::max(m, t.key_bits);
  return m;
}

int DirectoryBitsFor(double n, int key_bits) {
  int d = n < 4 ? 0 : static_cast<int>(std::floor(std::log2(n))) - 2;
  return std::clamp(d, 0, std::min(key_bits, 26));
}

std::vector<BitRange> ProjectionRanges(const IndexTableSpec& table, int bits) {
  std::vector<BitRange> ranges = table.key_ranges;
  std::vector<BitRange> rest = Complement(table.key_ranges, bits);
  ranges.insert(ranges.end(), rest.begin(), rest.end());
  MergeAdjacent(&ranges);
  std::vector<BitRange> out;
  int filled = 0;
  for (const BitRange& r : ranges) {
    if (filled >= 64) break;
    int w = std::min(r.width, 64 - filled);
    out.push_back({r.start, w});
    filled += w;
  }
  return out;
}

bool IsIdentityProjection(const IndexTableSpec& table, int bits) {
  std::vector<BitRange> p = ProjectionRanges(table, bits);
  return p.size() == 1 && p[0].start == 0 && p[0].width == 64;
}

namespace {

// Blocks of `widths` bits, in order, cut from the bit space `space` (ranges of the fingerprint).
std::vector<std::vector<BitRange>> BlocksOf(const std::vector<BitRange>& space,
                                            const std::vector<int>& widths) {
  std::vector<std::vector<BitRange>> blocks;
  int offset = 0;
  for (int w : widths) {
    blocks.push_back(MapRange(space, offset, w));
    offset += w;
  }
  return blocks;
}

// A design for `request` without its tables, probing keys of t of b blocks at the pigeonhole
// radius for every k up to the indexed one.
IndexDesign DesignWithoutTables(const PlanRequest& request, int b, int t) {
  IndexDesign d;
  d.bits = request.bits;
  d.indexed_k = request.indexed_k;
  d.expected_size = request.expected_size;
  for (int kk = 0; kk <= request.indexed_k; ++kk)
    d.probe_radius.push_back(RequiredRadius(kk, b, t));
  return d;
}

// One level: b blocks, keys of t blocks, probed at the pigeonhole radius.
void AddOneLevelDesigns(const PlanRequest& request, std::vector<IndexDesign>* designs) {
  const int f = request.bits;
  const int k = request.indexed_k;
  const std::vector<BitRange> whole = {{0, f}};
  for (int b = 1; b <= std::min(f, 3 * k + 8); ++b) {
    std::vector<int> widths = BlockWidths(f, b);
    auto blocks = BlocksOf(whole, widths);
    for (int t = 1; t <= b; ++t) {
      if (Choose(b, t) > kMaxTables) continue;
      int key_bits = 0;
      for (int i = 0; i < t; ++i) key_bits += widths[i];
      if (key_bits > 64) continue;
      if (!ProbesAffordable(key_bits, RequiredRadius(k, b, t))) continue;
      IndexDesign d = DesignWithoutTables(request, b, t);
      for (const auto& combo : Combinations(b, t)) {
        IndexTableSpec spec;
        for (int i : combo) {
          spec.key_ranges.insert(spec.key_ranges.end(), blocks[i].begin(), blocks[i].end());
          spec.key_bits += widths[i];
        }
        MergeAdjacent(&spec.key_ranges);
        d.tables.push_back(std::move(spec));
      }
      d.description = std::to_string(b) + " blocks (" + JoinWidths(widths) + "), choose " +
                      std::to_string(t) + ", probe radius " + std::to_string(d.probe_radius[k]);
      Price(&d);
      designs->push_back(std::move(d));
    }
  }
}

// The tables of a two-level design over f bits: every t1 of the first-level blocks (`blocks1`,
// of widths `w1`), each with every t2 of the b2 blocks its remaining bits are cut into.
std::vector<IndexTableSpec> TwoLevelTables(int f, const std::vector<int>& w1,
                                           const std::vector<std::vector<BitRange>>& blocks1,
                                           int t1, int b2, int t2) {
  std::vector<IndexTableSpec> tables;
  for (const auto& c1 : Combinations(static_cast<int>(w1.size()), t1)) {
    std::vector<BitRange> first;
    int first_bits = 0;
    for (int i : c1) {
      first.insert(first.end(), blocks1[i].begin(), blocks1[i].end());
      first_bits += w1[i];
    }
    std::vector<BitRange> rest = Complement(first, f);
    std::vector<int> w2c = BlockWidths(f - first_bits, b2);
    auto blocks2 = BlocksOf(rest, w2c);
    for (const auto& c2 : Combinations(b2, t2)) {
      IndexTableSpec spec;
      spec.key_ranges = first;
      spec.key_bits = first_bits;
      for (int i : c2) {
        spec.key_ranges.insert(spec.key_ranges.end(), blocks2[i].begin(), blocks2[i].end());
        spec.key_bits += w2c[i];
      }
      MergeAdjacent(&spec.key_ranges);
      tables.push_back(std::move(spec));
    }
  }
  return tables;
}

// Two levels (Manku et al. 3.1.1): b1 blocks, t1 of them exact; the remaining bits split into
// b2 blocks, keys of t2 of those probed at the pigeonhole radius.
void AddTwoLevelDesigns(const PlanRequest& request, std::vector<IndexDesign>* designs) {
  const int f = request.bits;
  const int k = request.indexed_k;
  const std::vector<BitRange> whole = {{0, f}};
  for (int b1 = k + 1; b1 <= k + 4 && b1 <= f; ++b1) {
    std::vector<int> w1 = BlockWidths(f, b1);
    auto blocks1 = BlocksOf(whole, w1);
    for (int t1 = 1; t1 <= b1 - k; ++t1) {
      if (t1 == b1) continue;
      for (int b2 = 2; b2 <= k + 6; ++b2) {
        for (int t2 = 1; t2 < b2; ++t2) {
          if (Choose(b1, t1) * Choose(b2, t2) > kMaxTables) continue;
          int key1 = 0;
          for (int i = 0; i < t1; ++i) key1 += w1[i];
          int rest_bits = f - key1;
          if (rest_bits < b2) continue;
          std::vector<int> w2 = BlockWidths(rest_bits, b2);
          int key_bits = key1;
          for (int i = 0; i < t2; ++i) key_bits += w2[i];
          if (key_bits > 64) continue;
          if (!ProbesAffordable(key_bits, RequiredRadius(k, b2, t2))) continue;
          IndexDesign d = DesignWithoutTables(request, b2, t2);
          d.tables = TwoLevelTables(f, w1, blocks1, t1, b2, t2);
          d.description = std::to_string(b1) + " blocks (" + JoinWidths(w1) + "), choose " +
                          std::to_string(t1) + "; rest in " + std::to_string(b2) + " blocks (" +
                          JoinWidths(w2) + "), choose " + std::to_string(t2) + ", probe radius " +
                          std::to_string(d.probe_radius[k]);
          Price(&d);
          designs->push_back(std::move(d));
        }
      }
    }
  }
}

}  // namespace

Result<std::vector<IndexDesign>> EnumerateIndexDesigns(const PlanRequest& request) {
  const int f = request.bits;
  const int k = request.indexed_k;
  if (f != 64 && f != 128) return Status::InvalidArgument("plan: bits must be 64 or 128");
  if (k < 0 || k > f / 4)
    return Status::InvalidArgument("plan: k must be in [0, " + std::to_string(f / 4) + "]");
  if (!(request.expected_size >= 1))
    return Status::InvalidArgument("plan: expected_size must be at least 1");
  std::vector<IndexDesign> designs;
  AddOneLevelDesigns(request, &designs);
  AddTwoLevelDesigns(request, &designs);
  std::sort(designs.begin(), designs.end(), [](const IndexDesign& a, const IndexDesign& b) {
    if (a.bytes_per_fingerprint != b.bytes_per_fingerprint)
      return a.bytes_per_fingerprint < b.bytes_per_fingerprint;
    return a.cost_ns < b.cost_ns;
  });
  return designs;
}

std::vector<IndexDesign> ParetoFrontier(const std::vector<IndexDesign>& designs) {
  std::vector<IndexDesign> sorted = designs;
  std::stable_sort(sorted.begin(), sorted.end(), [](const IndexDesign& a, const IndexDesign& b) {
    return a.bytes_per_fingerprint < b.bytes_per_fingerprint;
  });
  std::vector<IndexDesign> frontier;
  for (const IndexDesign& d : sorted) {
    if (frontier.empty() || d.cost_ns < frontier.back().cost_ns) frontier.push_back(d);
  }
  return frontier;
}

Result<IndexDesign> PlanIndex(const PlanRequest& request) {
  auto designs = EnumerateIndexDesigns(request);
  if (!designs.ok()) return designs.status();
  const double n = std::max(1.0, request.expected_size);
  const double budget_bytes = request.memory_budget.TotalFor(n);
  const IndexDesign* best = nullptr;
  for (const IndexDesign& d : *designs) {
    if (budget_bytes > 0 && d.bytes_per_fingerprint * n > budget_bytes) continue;
    if (best == nullptr || d.cost_ns < best->cost_ns) best = &d;
  }
  if (best == nullptr) {
    char buf[160];
    std::snprintf(buf, sizeof(buf),
                  "plan: no design fits a memory budget of %.0f bytes for %.0f fingerprints",
                  budget_bytes, request.expected_size);
    return Status::ResourceExhausted(buf);
  }
  return *best;
}

}  // namespace neardup
