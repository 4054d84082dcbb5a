// store_query_bench: fingerprint-only queries (DocumentStore::Search) of an existing store, in
// process: queries per second on 1 thread and on N threads, with p50/p99 latency, so the library's
// own cost can be read against the HTTP service's (bench/query_fingerprint.lua under wrk). Each
// query is a stored fingerprint with its lowest bit flipped, as in query_fingerprint.lua, so every
// query has a near-duplicate at distance 1.
//
// Usage: store_query_bench STORE QUERIES.txt [--k K] [--limit L] [--seconds S] [--threads N]
//   QUERIES.txt: one hex fingerprint a line (e.g. `neardup fingerprint` of the store's input).
//   Defaults: k 3, limit 101 (what the service asks for: limit + 1), 5 s per run, N = nproc.
//   The store is opened read-only without checksum verification (it is not modified).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "neardup/fingerprint.h"
#include "neardup/store.h"

namespace {

using Clock = std::chrono::steady_clock;

struct RunResult {
  double seconds = 0;
  uint64_t queries = 0;
  uint64_t hits = 0;
  std::vector<double> latencies_us;
};

// Runs `threads` threads for `seconds`, each querying its own stride of `queries`.
RunResult Run(const neardup::DocumentStore& store, const std::vector<neardup::Fingerprint>& queries,
              int k, size_t limit, double seconds, int threads) {
  std::atomic<bool> stop{false};
  std::vector<RunResult> per(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      RunResult& r = per[static_cast<size_t>(t)];
      size_t i = static_cast<size_t>(t) * 7919;
      while (!stop.load(std::memory_order_relaxed)) {
        const neardup::Fingerprint& q = queries[i++ % queries.size()];
        const auto t0 = Clock::now();
        auto found = store.Search(q, k, limit);
        const auto t1 = Clock::now();
        if (!found.ok()) {
          std::fprintf(stderr, "search: %s\n", found.status().ToString().c_str());
          std::exit(1);
        }
        r.hits += found->size();
        ++r.queries;
        // Latency of every 16th query (the clock reads cost less than the search, but not nothing).
        if ((r.queries & 15) == 0)
          r.latencies_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (std::thread& th : pool) th.join();
  RunResult total;
  total.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (RunResult& r : per) {
    total.queries += r.queries;
    total.hits += r.hits;
    total.latencies_us.insert(total.latencies_us.end(), r.latencies_us.begin(),
                              r.latencies_us.end());
  }
  std::sort(total.latencies_us.begin(), total.latencies_us.end());
  return total;
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: store_query_bench STORE QUERIES.txt [--k K] [--limit L] [--seconds S] "
                 "[--threads N]\n");
    return 2;
  }
  int k = 3;
  size_t limit = 101;
  double seconds = 5;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 3; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--k") == 0) {
      k = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--limit") == 0) {
      limit = static_cast<size_t>(std::atoll(argv[i + 1]));
    } else if (std::strcmp(argv[i], "--seconds") == 0) {
      seconds = std::atof(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--threads") == 0) {
      threads = std::max(1, std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  std::vector<neardup::Fingerprint> queries;
  std::ifstream in(argv[2]);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto fp = neardup::ParseFingerprint(line);
    if (!fp.ok()) {
      std::fprintf(stderr, "%s: %s\n", argv[2], fp.status().ToString().c_str());
      return 1;
    }
    fp->lo ^= 1;  // a near-duplicate at distance 1, as bench/query_fingerprint.lua
    queries.push_back(*fp);
  }
  if (queries.empty()) {
    std::fprintf(stderr, "%s: no fingerprints\n", argv[2]);
    return 1;
  }
  neardup::StoreOptions options;
  options.read_only = true;
  options.create_if_missing = false;
  options.verify_checksums_on_open = false;
  auto store = neardup::DocumentStore::Open(argv[1], options);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  const neardup::StoreStats stats = (*store)->Stats();
  std::printf(
      "store %s: %llu documents, %llu segments, %llu in the memtable; %zu queries, k %d, "
      "limit %zu\n",
      argv[1], static_cast<unsigned long long>(stats.documents),
      static_cast<unsigned long long>(stats.segments),
      static_cast<unsigned long long>(stats.memtable_entries), queries.size(), k, limit);
  // Warm the mapped pages once (every query), untimed.
  Run(**store, queries, k, limit, std::min(seconds, 1.0), 1);
  for (int n : {1, threads}) {
    RunResult r = Run(**store, queries, k, limit, seconds, n);
    std::printf("%d thread(s): %.0f queries/s, %.2f hits/query, latency p50 %.1f us, p99 %.1f us\n",
                n, r.queries / r.seconds, r.queries ? double(r.hits) / r.queries : 0.0,
                Percentile(r.latencies_us, 0.5), Percentile(r.latencies_us, 0.99));
    if (threads == 1) break;
  }
  return 0;
}
