// The matrix kernels in every storage format and on every instruction-set path
// this CPU has: weights × a batch of input rows. Counters: bytes of weights read
// per second (what decode is bound by) and FLOP/s (2 per multiply-add).
//
// BM_MatMul/FORMAT/ROWS/BATCH/ISA: FORMAT 0 f32, 1 bf16, 2 fp8 e4m3 (128×128 block
// scales), 3 int8 and 4 int4 (group 32); 512 columns; ROWS 8192 (a few MiB: the
// shared L3) or 131072 (64 MiB of bf16: memory); ISA as tandem::rt::Isa
// (0 portable, 1 avx-fma, 2 avx2, 3 avx512); a path this CPU lacks is skipped.
#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "runtime/kernels/cpu_features.hpp"
#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/quantized_matrix.hpp"
#include "runtime/model/dtype.hpp"

namespace tandem::rt {
namespace {

constexpr std::int64_t kCols = 512;

// Random weights of an expert's magnitude in the requested format.
WeightMatrix Matrix(int format, std::int64_t rows, std::int64_t cols) {
  const auto n = static_cast<std::size_t>(rows * cols);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> value(-0.05f, 0.05f);
  if (format == 0) {
    std::shared_ptr<float[]> v(new float[n]);
    for (std::size_t i = 0; i < n; ++i) v[i] = value(rng);
    return WeightMatrix::OwnedF32(rows, cols, v);
  }
  if (format == 2) {
    std::shared_ptr<std::uint8_t[]> v(new std::uint8_t[n]);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(rng() % 0x7F) | static_cast<std::uint8_t>(rng() % 2 ? 0x80 : 0);
    const auto grid = static_cast<std::size_t>(((rows + 127) / 128) * ((cols + 127) / 128));
    std::shared_ptr<float[]> scales(new float[grid]);
    std::fill_n(scales.get(), grid, 1e-3f);
    return WeightMatrix::OwnedF8E4M3(rows, cols, v, scales);
  }
  std::shared_ptr<std::uint16_t[]> v(new std::uint16_t[n]);
  for (std::size_t i = 0; i < n; ++i) v[i] = F32ToBf16(value(rng));
  const WeightMatrix w = WeightMatrix::OwnedBf16(rows, cols, v);
  if (format == 1) return w;
  WeightMatrix q;
  q.type = WeightMatrix::Type::kQuantized;
  q.rows = rows;
  q.cols = cols;
  q.quantized = std::make_shared<const QuantizedMatrix>(QuantizedMatrix::Quantize(w, format == 3 ? QuantFormat::kInt8 : QuantFormat::kInt4, 32));
  return q;
}

void BM_MatMul(benchmark::State& state) {
  const auto format = static_cast<int>(state.range(0));
  const std::int64_t rows = state.range(1), batch = state.range(2);
  const auto isa = static_cast<Isa>(state.range(3));
  if (isa > DetectedIsa()) {
    state.SkipWithError("this CPU lacks the instruction set");
    return;
  }
  const Isa previous = SetActiveIsa(isa);
  const WeightMatrix w = Matrix(format, rows, kCols);
  std::vector<float> x(static_cast<std::size_t>(batch * kCols)), y(static_cast<std::size_t>(batch * rows));
  std::mt19937 rng(2);
  std::normal_distribution<float> input(0.0f, 1.0f);
  for (float& v : x) v = input(rng);
  for (auto _ : state) {
    MatMul(w, x.data(), batch, y.data(), nullptr);
    benchmark::DoNotOptimize(y.data());
  }
  SetActiveIsa(previous);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(w.bytes()));
  state.counters["FLOP/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * 2.0 * static_cast<double>(rows * kCols * batch),
                                                benchmark::Counter::kIsRate);
  state.SetLabel(std::string(ToString(isa)));
}

void MatMulArgs(benchmark::internal::Benchmark* b) {
  for (int format = 0; format <= 4; ++format) {
    for (std::int64_t rows : {8192, 131072}) {
      for (std::int64_t batch : {1, 4}) {
        for (int isa = 0; isa <= 3; ++isa) b->Args({format, rows, batch, isa});
      }
    }
  }
}
BENCHMARK(BM_MatMul)->Apply(MatMulArgs)->ArgNames({"format", "rows", "batch", "isa"});

}  // namespace
}  // namespace tandem::rt
