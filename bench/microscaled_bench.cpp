// DeepSeek V4.1's weight formats read as stored (runtime/kernels/microscaled_matrix): an
// FP4 expert's and an FP8 projection's product with a batch of input rows, one thread,
// against the machine's plain read bandwidth on one thread (decode reads every weight once
// a step, so that is its ceiling).
//
// BM_MicroscaledMatMul/FORMAT/ROWS/BATCH: FORMAT 0 FP8 E4M3 (32×32 E8M0 scales), 1 FP4
// E2M1 (E8M0 per row and 32 inputs), 2 the same FP4 on the int16 tiles (AVX-512 BW: what a
// CPU without VNNI and GFNI runs; 1 is the byte path where the CPU has both); 2048 columns (an expert's hidden side: dim of
// v41-small ×4); ROWS 1024 (in L2/L3) or 65536 (64 MiB of FP8, 32 MiB of FP4: memory).
// Counters: bytes/s of weights and scales read, and `of_read`: that speed over a plain
// read's of as many bytes (bench::ReadFloats, the same loads the decode ceiling is
// measured with), the two interleaved iteration by iteration.
#include <chrono>
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
  const MicroscaledMatrix w = Matrix(format == 0 ? 0 : 1, rows);
  const bool byte_path = AllowFp4BytePath(format != 2);
  std::vector<float> x(static_cast<std::size_t>(batch * kCols)), y(static_cast<std::size_t>(batch * rows));
  std::mt19937 rng(2);
  std::normal_distribution<float> input(0.0f, 1.0f);
  for (float& v : x) v = Bf16ToF32(F32ToBf16(input(rng)));
  // As many bytes read plainly, between the products (untimed): `of_read` is the product's
  // speed over that read's, measured side by side, so the machine's mood of the moment
  // (a shared host's bandwidth moves by a quarter from one minute to the next) cancels.
  std::vector<float> plain(w.bytes() / sizeof(float) / 16 * 16, 1.0f);
  double product_s = 0.0, read_s = 0.0;
  for (auto _ : state) {
    state.PauseTiming();
    auto t = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(bench::ReadFloats(plain.data(), static_cast<std::int64_t>(plain.size())));
    read_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    state.ResumeTiming();
    t = std::chrono::steady_clock::now();
    MatMul(w, x.data(), batch, y.data(), nullptr);
    benchmark::DoNotOptimize(y.data());
    product_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(w.bytes()));
  const double plain_bytes = static_cast<double>(plain.size() * sizeof(float)), bytes = static_cast<double>(w.bytes());
  state.counters["of_read"] = (bytes / product_s) / (plain_bytes / read_s);
  state.SetLabel(format == 0 ? "fp8" : format == 1 ? "fp4" : "fp4 int16 tiles");
  AllowFp4BytePath(byte_path);
}
BENCHMARK(BM_MicroscaledMatMul)
    ->ArgsProduct({{0, 1, 2}, {1024, 65536}, {1, 4}})
    ->ArgNames({"format", "rows", "batch"})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem::rt
