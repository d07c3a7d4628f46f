#include "runtime/kernels/thread_pool.hpp"

#include <algorithm>

namespace tandem::rt {

namespace {

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
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::ParallelFor(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn,
                             std::int64_t min_chunk) {
  if (n <= 0) return;
  const int chunks = static_cast<int>(std::clamp<std::int64_t>(n / std::max<std::int64_t>(min_chunk, 1), 1, size()));
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    task_ = &fn;
    task_n_ = n;
    task_chunks_ = chunks;
    pending_ = chunks - 1;
    ++generation_;
  }
  wake_.notify_all();
  const auto [begin, end] = Chunk(n, chunks, 0);
  fn(begin, end);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  task_ = nullptr;
}

void ThreadPool::WorkerLoop(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    if (index >= task_chunks_) continue;  // this round needs fewer threads
    const auto* fn = task_;
    const auto [begin, end] = Chunk(task_n_, task_chunks_, index);
    lock.unlock();
    (*fn)(begin, end);
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace tandem::rt
