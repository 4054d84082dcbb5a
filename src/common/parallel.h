// ParallelFor and the default thread count: how neardup spreads work over the machine's cores.
//
// Internal header. Work is split into contiguous chunks, claimed dynamically and shrinking towards
// the end so uneven items balance; results can be written by index and the output stays the same
// whatever the thread count.
#ifndef NEARDUP_COMMON_PARALLEL_H_
#define NEARDUP_COMMON_PARALLEL_H_

#include <cstddef>
#include <functional>

namespace neardup {

// Number of hardware threads (nproc), at least 1.
int DefaultThreadCount();

// Calls fn(begin, end) over disjoint chunks covering [0, n), on up to `threads` threads
// (threads <= 0 means DefaultThreadCount()). Chunks of at least `min_chunk` items. Returns when all
// chunks are done. fn must be safe to call concurrently on disjoint ranges.
void ParallelFor(size_t n, int threads, const std::function<void(size_t, size_t)>& fn,
                 size_t min_chunk = 1);

// Like ParallelFor(n, threads, fn, min_chunk), but fn runs on up to `threads` threads other than
// the caller's (at least one), while the caller runs `alongside()` (which takes no chunk). Returns
// when both are done. For a pipeline: the caller prepares the next batch while this one is
// worked on.
void ParallelForAlongside(size_t n, int threads, const std::function<void(size_t, size_t)>& fn,
                          size_t min_chunk, const std::function<void()>& alongside);

}  // namespace neardup

#endif  // NEARDUP_COMMON_PARALLEL_H_
