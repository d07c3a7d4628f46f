// The machine's multiply-add peak: the ceiling a compute-bound kernel is measured against,
// as BM_ReadBandwidth is the memory one. Independent fused multiply-add chains (more than
// the FMA latency times the pipes), widest vectors the CPU has, on every thread at once.
#include <chrono>
#include <cstdint>

#include <immintrin.h>

#include <benchmark/benchmark.h>

#include "runtime/kernels/cpu_features.hpp"
#include "runtime/kernels/thread_pool.hpp"

namespace {

using tandem::rt::Isa;

constexpr int kChains = 24;
constexpr std::int64_t kRounds = 1 << 22;

// Each round: kChains dependent-in-chain multiply-adds of 16 lanes (FmaAvx2: of 8).
// Returns a value that depends on every chain, so nothing is optimised away. Two
// functions, not a template: each needs its own target, and an instantiation cannot
// be given one.
__attribute__((target("avx512f"), noinline)) float FmaAvx512(std::int64_t rounds) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(1.0f + static_cast<float>(c) * 1e-7f);
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (std::int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 24
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], m, a);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return lanes[0] + lanes[15];
}

__attribute__((target("avx2,fma"), noinline)) float FmaAvx2(std::int64_t rounds) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(1.0f + static_cast<float>(c) * 1e-7f);
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (std::int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 24
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], m, a);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  return lanes[0] + lanes[7];
}

// fp32 multiply-adds per second, over all threads of the pool together.
void BM_FmaPeak(benchmark::State& state) {
  const Isa isa = tandem::rt::DetectedIsa();
  if (isa < Isa::kAvx2) {
    state.SkipWithError("no AVX2 + FMA on this CPU");
    return;
  }
  const bool wide = isa >= Isa::kAvx512;
  tandem::rt::ThreadPool pool(static_cast<int>(state.range(0)));
  const int threads = pool.size();
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    pool.ParallelFor(threads, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t t = begin; t < end; ++t) benchmark::DoNotOptimize(wide ? FmaAvx512(kRounds) : FmaAvx2(kRounds));
    });
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const double macs = static_cast<double>(state.iterations()) * threads * kRounds * kChains * (wide ? 16 : 8);
  state.counters["G MAC/s"] = macs / seconds / 1e9;
  state.counters["threads"] = threads;
  state.counters["lanes"] = wide ? 16 : 8;
}
BENCHMARK(BM_FmaPeak)->Arg(1)->Arg(0)->ArgName("threads")->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
