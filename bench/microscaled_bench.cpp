// DeepSeek V4.1's weight formats read as stored (runtime/kernels/microscaled_matrix): an
// FP4 expert's and an FP8 projection's product with a batch of input rows, one thread,
// against the machine's plain read bandwidth on one thread (decode reads every weight once
// a step, so that is its ceiling).
//
// BM_MicroscaledMatMul/FORMAT/ROWS/BATCH: FORMAT 0 FP8 E4M3 (32×32 E8M0 scales), 1 FP4
// E2M1 (E8M0 per row and 32 inputs); 2048 columns (an expert's hidden side: dim of
// v41-small ×4); ROWS 1024 (in L2/L3) or 65536 (64 MiB of FP8, 32 MiB of FP4: memory).
// Counters: bytes/s of weights and scales read, and their share of the one-thread read
// bandwidth (`of_read`).
#include <memory>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/memory_bandwidth.hpp"
#include "runtime/kernels/microscaled_matrix.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/numeric/dtype.hpp"

namespace tandem::rt {
namespace {

constexpr std::int64_t kCols = 2048;

double OneThreadReadBandwidth() {
  static const double bandwidth = [] {
    ThreadPool one(1);
    return bench::MeasureReadBandwidth(one, std::size_t{256} << 20, 3);
  }();
  return bandwidth;
}

MicroscaledMatrix Matrix(int format, std::int64_t rows) {
  std::mt19937 rng(1);
  const auto fmt = format == 0 ? MicroscaledMatrix::Format::kFp8Block32 : MicroscaledMatrix::Format::kFp4Row32;
  const std::int64_t blocks = kCols / 32;
  std::vector<std::uint8_t> values(static_cast<std::size_t>(format == 0 ? rows * kCols : rows * kCols / 2));
  for (std::uint8_t& v : values) {
    v = static_cast<std::uint8_t>(rng());
    if (format == 0 && (v & 0x7f) == 0x7f) v = 0x7e;  // no NaN
  }
  std::vector<std::uint8_t> scales(static_cast<std::size_t>(format == 0 ? (rows + 31) / 32 * blocks : rows * blocks));
  for (std::uint8_t& s : scales) s = static_cast<std::uint8_t>(120 + rng() % 4);
  return MicroscaledMatrix::Copy(fmt, rows, kCols, values, scales);
}

void BM_MicroscaledMatMul(benchmark::State& state) {
  const auto format = static_cast<int>(state.range(0));
  const std::int64_t rows = state.range(1), batch = state.range(2);
  const MicroscaledMatrix w = Matrix(format, rows);
  std::vector<float> x(static_cast<std::size_t>(batch * kCols)), y(static_cast<std::size_t>(batch * rows));
  std::mt19937 rng(2);
  std::normal_distribution<float> input(0.0f, 1.0f);
  for (float& v : x) v = Bf16ToF32(F32ToBf16(input(rng)));
  const double read = OneThreadReadBandwidth();
  for (auto _ : state) {
    MatMul(w, x.data(), batch, y.data(), nullptr);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(w.bytes()));
  state.counters["of_read"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(w.bytes()) / read, benchmark::Counter::kIsRate);
  state.SetLabel(format == 0 ? "fp8" : "fp4");
}
BENCHMARK(BM_MicroscaledMatMul)
    ->ArgsProduct({{0, 1}, {1024, 65536}, {1, 4}})
    ->ArgNames({"format", "rows", "batch"})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem::rt
