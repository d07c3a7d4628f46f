// The machine's memory bandwidth: a large vectorised read and a large copy.
#include <cstring>
#include <memory>

#include <benchmark/benchmark.h>

#include "bench/memory_bandwidth.hpp"
#include "runtime/kernels/thread_pool.hpp"

namespace {

constexpr std::size_t kBytes = std::size_t{1} << 30;

void BM_ReadBandwidth(benchmark::State& state) {
  tandem::rt::ThreadPool pool(static_cast<int>(state.range(0)));
  double bw = 0;
  for (auto _ : state) bw = tandem::bench::MeasureReadBandwidth(pool, kBytes, 3);
  state.counters["GB/s"] = bw / 1e9;
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(0)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_Copy(benchmark::State& state) {
  const std::size_t bytes = kBytes / 2;
  std::unique_ptr<char[]> src(new char[bytes]), dst(new char[bytes]);
  std::memset(src.get(), 1, bytes);
  std::memset(dst.get(), 0, bytes);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::DoNotOptimize(dst.get());
  }
  // A copy reads and writes every byte.
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * bytes));
}
BENCHMARK(BM_Copy)->Unit(benchmark::kMillisecond);

}  // namespace
