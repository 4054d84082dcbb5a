// ParallelFor implementation; see parallel.h.
#include "common/parallel.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace neardup {

namespace {

// The helper threads ParallelFor runs on, kept between calls so that what a thread keeps for
// itself (thread_local scratch buffers, caches such as the normaliser's T2S results, an ICU break
// iterator) survives from one call to the next instead of being rebuilt for every batch. One call
// at a time uses the pool; a call that finds it in use (nested, or from another thread) starts
// threads of its own as before.
class HelperPool {
 public:
  // The process's pool (a new one in a child after fork(): the parent's threads are not there).
  // Never destroyed: its threads sleep until the process ends.
  static HelperPool* Get() {
    static std::atomic<HelperPool*> pool{nullptr};
    HelperPool* current = pool.load(std::memory_order_acquire);
    const pid_t pid = getpid();
    if (current != nullptr && current->pid_ == pid) return current;
    static std::mutex create_mutex;
    std::lock_guard<std::mutex> lock(create_mutex);
    current = pool.load(std::memory_order_acquire);
    if (current == nullptr || current->pid_ != pid) {
      current = new HelperPool(pid);  // the parent's pool, if any, is left behind unused
      pool.store(current, std::memory_order_release);
    }
    return current;
  }

  // Claims the pool for one call; false when another call holds it.
  bool TryAcquire() { return !busy_.exchange(true, std::memory_order_acquire); }
  void Release() { busy_.store(false, std::memory_order_release); }

  // Runs job() on `helpers` pool threads while the caller runs caller_job(); returns when all
  // have returned. Only between TryAcquire() and Release().
  void Run(size_t helpers, const std::function<void()>& job,
           const std::function<void()>& caller_job) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      while (threads_.size() < helpers) {
        const size_t index = threads_.size();
        threads_.emplace_back([this, index] { Loop(index); });
      }
      job_ = &job;
      wanted_ = helpers;
      running_ = helpers;
      ++generation_;
    }
    wake_.notify_all();
    caller_job();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return running_ == 0; });
    job_ = nullptr;
  }

 private:
  explicit HelperPool(pid_t pid) : pid_(pid) {}

  void Loop(size_t index) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (index >= wanted_) continue;
      const std::function<void()>* job = job_;
      lock.unlock();
      (*job)();
      lock.lock();
      if (--running_ == 0) done_.notify_one();
    }
  }

  const pid_t pid_;
  std::atomic<bool> busy_{false};
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;  // detached in effect: the pool is never destroyed
  const std::function<void()>* job_ = nullptr;
  size_t wanted_ = 0, running_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace

int DefaultThreadCount() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

namespace {

// The chunk loop of ParallelFor: guided self-scheduling. Each claim takes 1/(4 * workers) of the
// items still unclaimed (at least min_chunk), so chunks shrink towards the end. Items may differ a
// lot in cost (a long Japanese document next to many short Chinese ones): with fixed chunks the
// last one could hold most of the work and leave the other workers idle.
std::function<void()> ChunkLoop(size_t n, size_t workers, size_t min_chunk,
                                const std::function<void(size_t, size_t)>& fn,
                                std::atomic<size_t>* next) {
  return [=, &fn] {
    size_t begin = next->load(std::memory_order_relaxed);
    for (;;) {
      if (begin >= n) return;
      const size_t chunk = std::max(min_chunk, (n - begin) / (workers * 4));
      const size_t end = std::min(n, begin + chunk);
      if (!next->compare_exchange_weak(begin, end, std::memory_order_relaxed)) continue;
      fn(begin, end);
      begin = next->load(std::memory_order_relaxed);
    }
  };
}

// Runs `job` on `helpers` threads (the pool's when free, else threads of its own) while the caller
// runs caller_job.
void RunWithHelpers(size_t helpers, const std::function<void()>& job,
                    const std::function<void()>& caller_job) {
  HelperPool* pool = HelperPool::Get();
  if (pool->TryAcquire()) {
    pool->Run(helpers, job, caller_job);
    pool->Release();
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(helpers);
  for (size_t i = 0; i < helpers; ++i) threads.emplace_back(job);
  caller_job();
  for (auto& t : threads) t.join();
}

}  // namespace

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
  std::atomic<size_t> next{0};
  const std::function<void()> work = ChunkLoop(n, workers, min_chunk, fn, &next);
  RunWithHelpers(workers - 1, work, work);
}

void ParallelForAlongside(size_t n, int threads, const std::function<void(size_t, size_t)>& fn,
                          size_t min_chunk, const std::function<void()>& alongside) {
  if (n == 0) {
    alongside();
    return;
  }
  if (threads <= 0) threads = DefaultThreadCount();
  min_chunk = std::max<size_t>(min_chunk, 1);
  size_t max_workers = (n + min_chunk - 1) / min_chunk;
  size_t workers = std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(threads), max_workers));
  std::atomic<size_t> next{0};
  const std::function<void()> work = ChunkLoop(n, workers, min_chunk, fn, &next);
  RunWithHelpers(workers, work, alongside);
}

}  // namespace neardup
