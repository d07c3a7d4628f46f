#include "bench/memory_bandwidth.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/kernels/thread_pool.hpp"
#include "runtime/kernels/weight_memory.hpp"

namespace tandem::bench {

namespace {

float SumRange(const float* p, std::int64_t n) {
  float acc[16] = {};
  for (std::int64_t i = 0; i + 16 <= n; i += 16) {
    for (int l = 0; l < 16; ++l) acc[l] += p[i + l];
  }
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

}  // namespace

double MeasureReadBandwidth(tandem::rt::ThreadPool& pool, std::size_t bytes, int repeats) {
  const auto n = static_cast<std::int64_t>(bytes / sizeof(float));
  // On huge pages, as the weights decode reads are (weight memory; the mapped
  // bf16 weights where the page cache holds large folios): 4 KiB pages would
  // understate what the hardware reads. Not a WeightVector: nothing to zero first.
  const std::unique_ptr<float, std::function<void(float*)>> memory(
      static_cast<float*>(tandem::rt::AllocateWeightMemory(bytes)), [bytes](float* p) { tandem::rt::FreeWeightMemory(p, bytes); });
  float* const buffer = memory.get();
  pool.ParallelFor(n, [&](std::int64_t b, std::int64_t e) { std::fill(buffer + b, buffer + e, 1.0f); });
  std::vector<float> sums(static_cast<std::size_t>(pool.size()));
  double best = 0.0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.ParallelFor(n, [&](std::int64_t b, std::int64_t e) {
      sums[static_cast<std::size_t>(b * pool.size() / n)] += SumRange(buffer + b, e - b);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / s);
  }
  volatile float sink = sums[0];  // keeps the reads from being optimised away
  (void)sink;
  return best;
}

}  // namespace tandem::bench
