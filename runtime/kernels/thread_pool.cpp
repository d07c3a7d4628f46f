#include "runtime/kernels/thread_pool.hpp"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tandem::rt {

namespace {

// How long an idle worker (or a waiting caller) spins before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(100);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Spins while `busy()` holds, for at most kSpin; reading the clock only every 256
// pauses keeps the spin itself cheap. Returns whether `busy()` still holds.
template <typename Busy>
bool SpinWhile(Busy busy) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 1;; ++i) {
    if (!busy()) return false;
    CpuRelax();
    if (i % 256 == 0 && std::chrono::steady_clock::now() >= deadline) return busy();
  }
}

std::pair<std::int64_t, std::int64_t> Chunk(std::int64_t n, int chunks, int index) {
  const std::int64_t base = n / chunks;
  const std::int64_t extra = n % chunks;
  const std::int64_t begin = index * base + std::min<std::int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_.store(true);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::ParallelFor(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn, std::int64_t min_chunk) {
  if (n <= 0) return;
  const int chunks = static_cast<int>(std::clamp<std::int64_t>(n / std::max<std::int64_t>(min_chunk, 1), 1, size()));
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  parked_.store(false, std::memory_order_relaxed);
  task_ = &fn;
  task_n_ = n;
  task_chunks_ = chunks;
  // Every worker checks in each round, even one without a chunk, so none can still
  // be reading this round's task fields when the next round writes them.
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard lock(mutex_);  // pairs with the sleepers' predicate check
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  const auto [begin, end] = Chunk(n, chunks, 0);
  fn(begin, end);
  const auto outstanding = [this] { return pending_.load(std::memory_order_acquire) != 0; };
  if (SpinWhile(outstanding)) {
    while (outstanding()) std::this_thread::yield();  // a worker was descheduled: stop burning its core
  }
}

void ThreadPool::Park() { parked_.store(true, std::memory_order_relaxed); }

void ThreadPool::WorkerLoop(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    bool idle = SpinWhile([&] {
      return generation_.load(std::memory_order_acquire) == seen && !stopping_.load(std::memory_order_relaxed) &&
             !parked_.load(std::memory_order_relaxed);
    });
    idle = idle || generation_.load(std::memory_order_acquire) == seen;
    if (idle) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_.load() || generation_.load(std::memory_order_acquire) != seen; });
    }
    if (stopping_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    if (index < task_chunks_) {  // a small round may need fewer threads
      const auto [begin, end] = Chunk(task_n_, task_chunks_, index);
      (*task_)(begin, end);
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace tandem::rt
