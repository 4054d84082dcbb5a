// index_bench: neardup's PermutedIndex against FAISS's IndexBinaryMultiHash / IndexBinaryHash and a
// brute-force popcount scan on the same 64-bit fingerprints: build time, memory per fingerprint,
// single-query latency (median, p99) at k = 3 and 6, all-pairs self-join time, answer agreement,
// and ratios to FAISS measured in the same run.
//
// Usage: index_bench [--n N] [--queries Q] [--corpus] [--no-random] [--skip-faiss-join]
//                    [--neardup-only]
//                    [--k6-budget BYTES_PER_FP] [--k K (only this k; default 3 and 6)]
//                    [--budgets B1,B2 (neardup only, at these bytes per fingerprint)]
//                    [--no-self-join] [--no-inserts]   (e.g. the 100M run within ~14 GB)
// N defaults to NEARDUP_BENCH_N or 1000000. --corpus adds the fingerprints of
// NEARDUP_CORPUS_DIR (default ../shared/corpus next to the source tree) computed with the default
// Fingerprinter.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <simdjson.h>

#include "common/parallel.h"
#include "neardup/brute_force_index.h"
#include "neardup/fingerprinter.h"
#include "neardup/permuted_index.h"

#ifndef NEARDUP_SHARED_DIR
#define NEARDUP_SHARED_DIR "../shared"
#endif

#ifdef NEARDUP_HAVE_FAISS
#include <faiss/IndexBinaryHash.h>
#include <faiss/impl/AuxIndexStructures.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

size_t ResidentBytes() {
  malloc_trim(0);
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

struct Dataset {
  std::string name;
  std::vector<uint64_t> fps;      // id = position
  std::vector<uint64_t> queries;  // half near stored items, half random
};

uint64_t FlipDistinct(uint64_t v, int d, std::mt19937_64& rng) {
  uint64_t mask = 0;
  while (std::popcount(mask) < d) mask |= uint64_t{1} << (rng() % 64);
  return v ^ mask;
}

std::vector<uint64_t> MakeQueries(const std::vector<uint64_t>& fps, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> q(count);
  for (size_t i = 0; i < count; ++i)
    q[i] = (i % 2 == 0 && !fps.empty()) ? FlipDistinct(fps[rng() % fps.size()], rng() % 5, rng)
                                        : rng();
  return q;
}

Dataset MakeRandom(size_t n, size_t queries, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Dataset ds;
  ds.name = "random " + std::to_string(n) + " (1% planted near-duplicates at 1..6 bits)";
  ds.fps.resize(n);
  for (auto& v : ds.fps) v = rng();
  for (size_t i = 0; i < n / 100; ++i) {
    size_t target = rng() % n, source = rng() % n;
    ds.fps[target] = FlipDistinct(ds.fps[source], 1 + rng() % 6, rng);
  }
  ds.queries = MakeQueries(ds.fps, queries, seed + 1);
  return ds;
}

Dataset MakeCorpus(const std::string& dir, size_t queries) {
  Dataset ds;
  ds.name = "corpus " + dir;
  std::vector<std::string> texts;
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().extension() == ".jsonl") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  simdjson::ondemand::parser parser;
  for (const auto& path : files) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      simdjson::padded_string padded(line);
      simdjson::ondemand::document doc;
      if (parser.iterate(padded).get(doc)) continue;
      std::string_view text;
      if (doc["text"].get_string().get(text)) continue;
      texts.emplace_back(text);
    }
  }
  auto fingerprinter = neardup::Fingerprinter::Create(neardup::FingerprintOptions{});
  if (!fingerprinter.ok()) {
    std::fprintf(stderr, "corpus: %s\n", fingerprinter.status().ToString().c_str());
    return ds;
  }
  std::vector<uint64_t> fps(texts.size());
  std::vector<char> ok(texts.size(), 0);
  auto start = Clock::now();
  neardup::ParallelFor(texts.size(), 0, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      auto fp = (*fingerprinter)->Compute(texts[i]);
      if (fp.ok()) {
        fps[i] = fp->lo;
        ok[i] = 1;
      }
    }
  });
  for (size_t i = 0; i < texts.size(); ++i)
    if (ok[i]) ds.fps.push_back(fps[i]);
  std::printf("corpus: %zu documents, %zu fingerprinted in %.2f s\n", texts.size(), ds.fps.size(),
              Seconds(start));
  ds.name = "corpus (" + std::to_string(ds.fps.size()) + " real fingerprints)";
  // Queries: the stored fingerprints themselves and near copies (a real dedup workload).
  std::mt19937_64 rng(3);
  ds.queries.resize(std::min(queries, ds.fps.size()));
  for (auto& q : ds.queries) q = FlipDistinct(ds.fps[rng() % ds.fps.size()], rng() % 4, rng);
  return ds;
}

// One system under test.
struct System {
  virtual ~System() = default;
  virtual std::string Name() const = 0;
  virtual void Build(const std::vector<uint64_t>& fps) = 0;
  // Sorted ids within k.
  virtual std::vector<uint64_t> Query(uint64_t fp, int k) = 0;
  // Pairs (i < j) within k, sorted; empty optional result = not supported.
  virtual bool SelfJoin(int k, std::vector<std::pair<uint64_t, uint64_t>>* pairs) = 0;
  virtual size_t CountedBytes() const { return 0; }
  virtual std::string Detail() const { return ""; }
};

struct NeardupSystem : System {
  int max_k;
  double budget;
  std::unique_ptr<neardup::PermutedIndex> index;
  NeardupSystem(int k, double b) : max_k(k), budget(b) {}
  std::string Name() const override {
    return "neardup k<=" + std::to_string(max_k) + " budget " +
           (budget > 0 ? std::to_string(static_cast<int>(budget)) + "B/fp" : "unlimited");
  }
  void Build(const std::vector<uint64_t>& fps) override {
    neardup::PermutedIndexOptions options;
    options.bits = 64;
    options.indexed_k = max_k;
    options.expected_size = static_cast<double>(std::max<size_t>(fps.size(), 1));
    options.memory_budget = neardup::MemoryBudget{0, budget};
    index = std::move(neardup::PermutedIndex::Create(options)).value();
    std::vector<uint64_t> ids(fps.size());
    std::vector<neardup::Fingerprint> f(fps.size());
    for (size_t i = 0; i < fps.size(); ++i) {
      ids[i] = i;
      f[i] = neardup::Fingerprint::From64(fps[i]);
    }
    if (!index->AddBatch(ids, f).ok()) std::abort();
  }
  std::vector<uint64_t> Query(uint64_t fp, int k) override {
    auto r = index->Search(neardup::Fingerprint::From64(fp), k);
    std::vector<uint64_t> ids;
    for (const auto& n : *r) ids.push_back(n.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  bool SelfJoin(int k, std::vector<std::pair<uint64_t, uint64_t>>* pairs) override {
    auto r = index->SelfJoin(k);
    pairs->clear();
    for (const auto& p : *r) pairs->push_back({p.a, p.b});
    return true;
  }
  size_t CountedBytes() const override { return index->detailed_stats().memory_bytes; }
  // The design and, from the index's counters, the work per query (independent of machine load).
  std::string Detail() const override {
    const auto st = index->stats();
    char buf[160];
    std::snprintf(buf, sizeof(buf), " | %.1f probes, %.1f candidates per query",
                  st.queries ? double(st.probes) / st.queries : 0.0,
                  st.queries ? double(st.candidates) / st.queries : 0.0);
    return index->design().description + buf;
  }
};

struct BruteSystem : System {
  std::vector<uint64_t> data;
  std::string Name() const override { return "brute-force popcount scan"; }
  void Build(const std::vector<uint64_t>& fps) override { data = fps; }
  std::vector<uint64_t> Query(uint64_t fp, int k) override {
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < data.size(); ++i)
      if (std::popcount(data[i] ^ fp) <= k) ids.push_back(i);
    return ids;
  }
  bool SelfJoin(int, std::vector<std::pair<uint64_t, uint64_t>>*) override { return false; }
  size_t CountedBytes() const override { return data.size() * 8; }
};

#ifdef NEARDUP_HAVE_FAISS
struct FaissSystem : System {
  int nhash, b, nflip;  // nhash == 0: IndexBinaryHash
  std::unique_ptr<faiss::IndexBinary> index;
  FaissSystem(int h, int bits, int flips) : nhash(h), b(bits), nflip(flips) {}
  std::string Name() const override {
    if (nhash == 0)
      return "FAISS IndexBinaryHash b=" + std::to_string(b) + " nflip=" + std::to_string(nflip);
    return "FAISS IndexBinaryMultiHash nhash=" + std::to_string(nhash) + " b=" + std::to_string(b) +
           " nflip=" + std::to_string(nflip);
  }
  void Build(const std::vector<uint64_t>& fps) override {
    if (nhash == 0) {
      auto idx = std::make_unique<faiss::IndexBinaryHash>(64, b);
      idx->nflip = nflip;
      index = std::move(idx);
    } else {
      auto idx = std::make_unique<faiss::IndexBinaryMultiHash>(64, nhash, b);
      idx->nflip = nflip;
      index = std::move(idx);
    }
    index->add(static_cast<faiss::IndexBinary::idx_t>(fps.size()),
               reinterpret_cast<const uint8_t*>(fps.data()));
  }
  // FAISS returns distances below `radius`; ask for k+1 and keep <= k.
  std::vector<uint64_t> Query(uint64_t fp, int k) override {
    faiss::RangeSearchResult result(1);
    index->range_search(1, reinterpret_cast<const uint8_t*>(&fp), k + 1, &result);
    std::vector<uint64_t> ids;
    for (size_t j = result.lims[0]; j < result.lims[1]; ++j)
      if (result.distances[j] <= k) ids.push_back(result.labels[j]);
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  const std::vector<uint64_t>* data = nullptr;
  // All items as range queries, in batches of 65536 (FAISS parallelises each batch with OpenMP).
  // When the first batches project past `time_limit` seconds, stops and sets `projected`.
  double time_limit = 60;
  double projected = -1;
  bool SelfJoin(int k, std::vector<std::pair<uint64_t, uint64_t>>* pairs) override {
    const size_t n = data->size();
    pairs->clear();
    projected = -1;
    const size_t batch = 1 << 12;
    auto start = Clock::now();
    for (size_t begin = 0; begin < n; begin += batch) {
      size_t count = std::min(batch, n - begin);
      faiss::RangeSearchResult result(count);
      index->range_search(static_cast<faiss::IndexBinary::idx_t>(count),
                          reinterpret_cast<const uint8_t*>(data->data() + begin), k + 1, &result);
      for (size_t q = 0; q < count; ++q)
        for (size_t j = result.lims[q]; j < result.lims[q + 1]; ++j) {
          uint64_t other = static_cast<uint64_t>(result.labels[j]);
          if (result.distances[j] <= k && other > begin + q) pairs->push_back({begin + q, other});
        }
      double elapsed = Seconds(start);
      double estimate = elapsed * n / (begin + count);
      if (begin + count < n && estimate > time_limit) {
        projected = estimate;
        return false;
      }
    }
    std::sort(pairs->begin(), pairs->end());
    return true;
  }
};
#endif

struct Row {
  std::string name, detail;
  double build_s = 0, rss_bytes = 0, counted_bytes = 0, median_us = 0, p99_us = 0, join_s = -1;
  size_t queries = 0, join_pairs = 0;
  bool agree = true;
};

void RunCase(const Dataset& ds, int k, std::vector<std::unique_ptr<System>> systems,
             bool faiss_join, bool self_join = true) {
  const size_t n = ds.fps.size();
  std::printf("\n=== %s, k=%d ===\n", ds.name.c_str(), k);
  std::vector<Row> rows;
  std::vector<std::vector<uint64_t>> reference;  // answers of the first system (neardup)
  std::vector<std::pair<uint64_t, uint64_t>> reference_pairs;
  bool have_pairs = false;
  for (auto& system : systems) {
    Row row;
    row.name = system->Name();
    size_t before = ResidentBytes();
    auto start = Clock::now();
    system->Build(ds.fps);
    row.build_s = Seconds(start);
    row.rss_bytes = static_cast<double>(ResidentBytes()) - static_cast<double>(before);
    row.counted_bytes = static_cast<double>(system->CountedBytes());
    // Single queries, one thread; stop after ~3 s for slow systems.
    std::vector<double> latencies;
    auto query_start = Clock::now();
    for (size_t i = 0; i < ds.queries.size(); ++i) {
      auto t0 = Clock::now();
      std::vector<uint64_t> ids = system->Query(ds.queries[i], k);
      latencies.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      if (reference.size() <= i)
        reference.push_back(std::move(ids));
      else if (reference[i] != ids)
        row.agree = false;
      if (Seconds(query_start) > 3.0 && i >= 100) break;
    }
    row.queries = latencies.size();
    row.detail = system->Detail();
    std::sort(latencies.begin(), latencies.end());
    row.median_us = latencies[latencies.size() / 2];
    row.p99_us = latencies[std::min(latencies.size() - 1, latencies.size() * 99 / 100)];
#ifdef NEARDUP_HAVE_FAISS
    if (auto* f = dynamic_cast<FaissSystem*>(system.get())) f->data = &ds.fps;
    bool is_faiss = dynamic_cast<FaissSystem*>(system.get()) != nullptr;
#else
    bool is_faiss = false;
#endif
    bool slow_join = false;
#ifdef NEARDUP_HAVE_FAISS
    if (auto* f = dynamic_cast<FaissSystem*>(system.get())) slow_join = f->nhash == 0;
#endif
    if (self_join && (!is_faiss || faiss_join) && !slow_join) {
      std::vector<std::pair<uint64_t, uint64_t>> pairs;
      auto join_start = Clock::now();
      bool complete = system->SelfJoin(k, &pairs);
#ifdef NEARDUP_HAVE_FAISS
      if (auto* f = dynamic_cast<FaissSystem*>(system.get()); f && f->projected > 0) {
        row.join_s = f->projected;
        row.detail = "self-join stopped early; time projected from the part done";
      }
#endif
      if (complete) {
        row.join_s = Seconds(join_start);
        row.join_pairs = pairs.size();
        if (!have_pairs) {
          reference_pairs = std::move(pairs);
          have_pairs = true;
        } else if (pairs != reference_pairs) {
          row.agree = false;
        }
      }
    }
    std::printf(
        "  %-52s build %.3f s, median %.3f us, p99 %.3f us, join %s s, pairs %zu, agree %s\n",
        row.name.c_str(), row.build_s, row.median_us, row.p99_us,
        row.join_s < 0 ? "-" : std::to_string(row.join_s).c_str(), row.join_pairs,
        row.agree ? "yes" : "NO");
    rows.push_back(row);
    system.reset();  // free before the next system builds
  }
  std::printf("%-52s %8s %9s %9s %9s %9s %9s %9s %6s\n", "system", "build s", "RSS B/fp",
              "data B/fp", "med us", "p99 us", "join s", "pairs", "agree");
  for (const Row& r : rows) {
    std::printf("%-52s %8.3f %9.1f %9.1f %9.3f %9.3f %9s %9zu %6s  (%zu queries)\n", r.name.c_str(),
                r.build_s, r.rss_bytes / n, r.counted_bytes / n, r.median_us, r.p99_us,
                r.join_s < 0 ? "-" : std::to_string(r.join_s).substr(0, 7).c_str(), r.join_pairs,
                r.agree ? "yes" : "NO", r.queries);
    if (!r.detail.empty()) std::printf("    design: %s\n", r.detail.c_str());
  }
  // Ratios: the first row (neardup at 64 B/fp, today's design) against every other row.
  for (size_t i = 1; i < rows.size(); ++i) {
    std::printf("ratio %s / first row: build %.2fx, median %.2fx, p99 %.2fx", rows[i].name.c_str(),
                rows[i].build_s / rows[0].build_s, rows[i].median_us / rows[0].median_us,
                rows[i].p99_us / rows[0].p99_us);
    if (rows[i].join_s > 0 && rows[0].join_s > 0)
      std::printf(", self-join %.2fx", rows[i].join_s / rows[0].join_s);
    std::printf("\n");
  }
}

std::vector<std::unique_ptr<System>> SystemsFor(int k, double k6_budget, bool brute,
                                                bool neardup_only = false,
                                                const std::vector<double>& budgets = {}) {
  std::vector<std::unique_ptr<System>> s;
  if (!budgets.empty()) {  // --budgets: neardup at exactly these budgets
    for (double b : budgets) s.push_back(std::make_unique<NeardupSystem>(k <= 3 ? 3 : 6, b));
    return s;
  }
  if (neardup_only) {
    // Today's 64 B/fp design (4 tables at 10M) beside the 128 B/fp one (more tables).
    if (k <= 3)
      s.push_back(std::make_unique<NeardupSystem>(3, 64)),
          s.push_back(std::make_unique<NeardupSystem>(3, 128));
    else
      s.push_back(std::make_unique<NeardupSystem>(6, 64)),
          s.push_back(std::make_unique<NeardupSystem>(6, k6_budget));
    return s;
  }
  if (k <= 3) {
    s.push_back(std::make_unique<NeardupSystem>(3, 64));
    s.push_back(std::make_unique<NeardupSystem>(3, 128));
#ifdef NEARDUP_HAVE_FAISS
    s.push_back(std::make_unique<FaissSystem>(2, 32, 1));
    s.push_back(std::make_unique<FaissSystem>(4, 16, 0));
    s.push_back(std::make_unique<FaissSystem>(0, 16, 3));
#endif
  } else {
    s.push_back(std::make_unique<NeardupSystem>(6, 64));
    s.push_back(std::make_unique<NeardupSystem>(6, k6_budget));
#ifdef NEARDUP_HAVE_FAISS
    s.push_back(std::make_unique<FaissSystem>(4, 16, 1));
    s.push_back(std::make_unique<FaissSystem>(7, 9, 0));
#endif
  }
  if (brute) s.push_back(std::make_unique<BruteSystem>());
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 1000000;
  if (const char* env = std::getenv("NEARDUP_BENCH_N")) n = static_cast<size_t>(std::atof(env));
  size_t queries = 20000;
  bool corpus = false, random = true, faiss_join = true, neardup_only = false, self_join = true,
       inserts = true;
  std::vector<double> budgets;
  double k6_budget = 256;
  std::vector<int> ks = {3, 6};
  std::string corpus_dir = NEARDUP_SHARED_DIR "/corpus";
  if (const char* env = std::getenv("NEARDUP_CORPUS_DIR")) corpus_dir = env;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--n")
      n = static_cast<size_t>(std::atof(next().c_str()));
    else if (a == "--queries")
      queries = static_cast<size_t>(std::atof(next().c_str()));
    else if (a == "--corpus")
      corpus = true;
    else if (a == "--no-random")
      random = false;
    else if (a == "--skip-faiss-join")
      faiss_join = false;
    else if (a == "--neardup-only")
      neardup_only = true;
    else if (a == "--k")
      ks = {std::atoi(next().c_str())};
    else if (a == "--k6-budget")
      k6_budget = std::atof(next().c_str());
    else if (a == "--budgets") {
      // Comma-separated bytes per fingerprint, e.g. 128 or 64,128 (neardup only).
      std::string list = next();
      for (size_t pos = 0; pos < list.size();) {
        size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        budgets.push_back(std::atof(list.substr(pos, comma - pos).c_str()));
        pos = comma + 1;
      }
    } else if (a == "--no-self-join")
      self_join = false;
    else if (a == "--no-inserts")
      inserts = false;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf(
      "index_bench: %d hardware threads; latency = one query at a time on one thread; "
      "self-join on all threads\n",
      neardup::DefaultThreadCount());
#ifndef NEARDUP_HAVE_FAISS
  std::printf("FAISS not found at build time: neardup and brute force only\n");
#endif
  if (random) {
    Dataset ds = MakeRandom(n, queries, 42);
    for (int k : ks)
      RunCase(ds, k, SystemsFor(k, k6_budget, true, neardup_only, budgets), faiss_join, self_join);
  }
  if (random && inserts) {
    // Online inserts: Add() one at a time from empty (delta buffer, segment builds and merges all
    // included), then queries still answered exactly.
    Dataset ds = MakeRandom(std::min<size_t>(n, 2000000), 0, 7);
    neardup::PermutedIndexOptions options;
    options.indexed_k = 3;
    options.expected_size = static_cast<double>(ds.fps.size());
    auto index = std::move(neardup::PermutedIndex::Create(options)).value();
    auto start = Clock::now();
    for (size_t i = 0; i < ds.fps.size(); ++i)
      if (!index->Add(i, neardup::Fingerprint::From64(ds.fps[i])).ok()) return 1;
    double seconds = Seconds(start);
    auto st = index->detailed_stats();
    std::printf(
        "\nonline inserts: %zu Add() calls from empty in %.3f s = %.3f us/insert amortised "
        "(%zu segments, %zu in delta)\n",
        ds.fps.size(), seconds, seconds * 1e6 / ds.fps.size(), st.segments, st.delta_size);
  }
  if (corpus && !std::filesystem::is_directory(corpus_dir)) {
    std::printf(
        "\ncorpus case: skipped: ../shared missing (no directory %s; set NEARDUP_CORPUS_DIR)\n",
        corpus_dir.c_str());
    corpus = false;
  }
  if (corpus) {
    Dataset ds = MakeCorpus(corpus_dir, queries);
    if (!ds.fps.empty())
      for (int k : ks) RunCase(ds, k, SystemsFor(k, k6_budget, true), true);
  }
  return 0;
}
