#include "bench/memory_bandwidth.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "runtime/kernels/thread_pool.hpp"
#include "runtime/kernels/weight_memory.hpp"

namespace tandem::bench {

namespace {

// A sum over [p, p + n) (n a multiple of 16), one cache line per step, with the
// lines `ahead` floats on prefetched into L2 as the kernels do (kernels/prefetch.hpp;
// 0: none, the hardware prefetcher alone). Several ways of reading, the best
// counting: a probe that reads worse than the kernels would flatter them (the
// plain sum alone read 15–20% below what the LM head's product streamed on one
// thread here).
float SumRange(const float* p, std::int64_t n, std::int64_t ahead) {
  float acc[16] = {};
  for (std::int64_t i = 0; i + 16 <= n; i += 16) {
    if (ahead > 0 && i + ahead < n) __builtin_prefetch(p + i + ahead, 0, 2);  // prefetcht1
    for (int l = 0; l < 16; ++l) acc[l] += p[i + l];
  }
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) float SumRangeAvx2(const float* p, std::int64_t n, std::int64_t ahead) {
  __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
  for (std::int64_t i = 0; i + 16 <= n; i += 16) {
    if (ahead > 0 && i + ahead < n) _mm_prefetch(reinterpret_cast<const char*>(p + i + ahead), _MM_HINT_T1);
    a = _mm256_add_ps(a, _mm256_loadu_ps(p + i));
    b = _mm256_add_ps(b, _mm256_loadu_ps(p + i + 8));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(a, b));
  float s = 0;
  for (float l : lanes) s += l;
  return s;
}
#endif

struct ReadWay {
  bool avx2;
  std::int64_t ahead_floats;
};

}  // namespace

float ReadFloats(const float* p, std::int64_t n) {
  constexpr std::int64_t kAhead = 2048;  // 8 KiB, as the kernels prefetch
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) return SumRangeAvx2(p, n, kAhead);
#endif
  return SumRange(p, n, kAhead);
}

double MeasureReadBandwidth(tandem::rt::ThreadPool& pool, std::size_t bytes, int repeats) {
  const auto n = static_cast<std::int64_t>(bytes / sizeof(float));
  // On huge pages, as the weights decode reads are (weight memory; the mapped
  // bf16 weights where the page cache holds large folios): 4 KiB pages would
  // understate what the hardware reads. Not a WeightVector: nothing to zero first.
  const std::unique_ptr<float, std::function<void(float*)>> memory(static_cast<float*>(tandem::rt::AllocateWeightMemory(bytes)),
                                                                   [bytes](float* p) { tandem::rt::FreeWeightMemory(p, bytes); });
  float* const buffer = memory.get();
  pool.ParallelFor(n, [&](std::int64_t b, std::int64_t e) { std::fill(buffer + b, buffer + e, 1.0f); });
  std::vector<float> sums(static_cast<std::size_t>(pool.size()));
  std::vector<ReadWay> ways = {{false, 0}, {false, 2048}, {false, 8192}};  // none, 8 KiB, 32 KiB ahead
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) ways.insert(ways.end(), {{true, 0}, {true, 2048}, {true, 8192}});
#endif
  double best = 0.0;
  for (int r = 0; r < repeats; ++r) {
    for (const ReadWay& way : ways) {
      const auto t0 = std::chrono::steady_clock::now();
      pool.ParallelFor(n, [&](std::int64_t b, std::int64_t e) {
        float& sum = sums[static_cast<std::size_t>(b * pool.size() / n)];
#if defined(__x86_64__)
        if (way.avx2) {
          sum += SumRangeAvx2(buffer + b, e - b, way.ahead_floats);
          return;
        }
#endif
        sum += SumRange(buffer + b, e - b, way.ahead_floats);
      });
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, static_cast<double>(bytes) / s);
    }
  }
  volatile float sink = sums[0];  // keeps the reads from being optimised away
  (void)sink;
  return best;
}

}  // namespace tandem::bench
