#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem::rt {

// A fixed set of threads for data-parallel kernels. ParallelFor splits a range
// into one contiguous chunk per thread; the calling thread runs the first chunk.
// Chunking never changes what is computed for an index, only where, so results
// are identical for any thread count.
//
// A decode step issues hundreds of small parallel loops, so dispatch latency
// matters more than throughput: idle workers spin briefly on an atomic before
// sleeping on a condition variable, and the caller spins for the stragglers.
class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // total threads including the caller; <= 0 means all cores
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n). Chunks are at least
  // `min_chunk` long, so small ranges run on fewer threads. Not reentrant.
  void ParallelFor(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn, std::int64_t min_chunk = 1);

  // Tells spinning workers to sleep now rather than at the end of their spin: the
  // caller is about to wait on something else (the network) and other processes
  // on this machine (expert workers) need the cores. The next ParallelFor wakes them.
  void Park();

 private:
  void WorkerLoop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  // The current task; written before `generation_` is bumped, read after.
  const std::function<void(std::int64_t, std::int64_t)>* task_ = nullptr;
  std::int64_t task_n_ = 0;
  int task_chunks_ = 0;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> parked_{false};
};

// fn(begin, end) over [0, n) on the pool in shares of at least `min_share` (so a small
// n stays on fewer threads, or on the caller alone), or on the caller without a pool.
// Capturing one reference keeps the pool's std::function from allocating.
template <typename Fn>
void ForShares(ThreadPool* pool, std::int64_t n, std::int64_t min_share, const Fn& fn) {
  if (n <= 0) return;
  if (pool == nullptr || n < 2 * std::max<std::int64_t>(min_share, 1)) {  // one share: ParallelFor would run it here too
    fn(0, n);
    return;
  }
  pool->ParallelFor(
      n, [&fn](std::int64_t begin, std::int64_t end) { fn(begin, end); }, min_share);
}

}  // namespace tandem::rt
