// ParallelFor implementation; see parallel.h.
#include "common/parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace neardup {

int DefaultThreadCount() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void ParallelFor(size_t n, int threads, const std::function<void(size_t, size_t)>& fn,
                 size_t min_chunk) {
  if (n == 0) return;
  if (threads <= 0) threads = DefaultThreadCount();
  min_chunk = std::max<size_t>(min_chunk, 1);
  size_t max_workers = (n + min_chunk - 1) / min_chunk;
  size_t workers = std::min<size_t>(static_cast<size_t>(threads), max_workers);
  if (workers <= 1) {
    fn(0, n);
    return;
  }
  // Guided self-scheduling: each claim takes 1/(4 * workers) of the items still unclaimed (at least
  // min_chunk), so chunks shrink towards the end. Items may differ a lot in cost (a long Japanese
  // document next to many short Chinese ones): with fixed chunks the last one could hold most of
  // the work and leave the other workers idle.
  std::atomic<size_t> next{0};
  auto work = [&] {
    size_t begin = next.load(std::memory_order_relaxed);
    for (;;) {
      if (begin >= n) return;
      const size_t chunk = std::max(min_chunk, (n - begin) / (workers * 4));
      const size_t end = std::min(n, begin + chunk);
      if (!next.compare_exchange_weak(begin, end, std::memory_order_relaxed)) continue;
      fn(begin, end);
      begin = next.load(std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (size_t i = 0; i + 1 < workers; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

}  // namespace neardup
