// One weight matrix times one row (decode's shape) in each storage format: bytes of
// weights read per second, so formats compare by how close they get to memory speed.
#include <memory>
#include <random>

#include <benchmark/benchmark.h>

#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/quantized_matrix.hpp"

namespace tandem::rt {
namespace {

// A [rows × cols] bf16 matrix of small random values: an expert's gate/up shape
// when rows = moe_intermediate_size × experts.
WeightMatrix Bf16(std::int64_t rows, std::int64_t cols) {
  std::shared_ptr<std::uint16_t[]> v(new std::uint16_t[static_cast<std::size_t>(rows * cols)]);
  std::mt19937 rng(1);
  for (std::int64_t i = 0; i < rows * cols; ++i) v[static_cast<std::size_t>(i)] = static_cast<std::uint16_t>(0x3c00 + rng() % 512);
  WeightMatrix w;
  w.type = WeightMatrix::Type::kBF16;
  w.rows = rows;
  w.cols = cols;
  w.data = v.get();
  w.owner = v;
  return w;
}

constexpr std::int64_t kRows = 8192, kCols = 512;  // 4M values: beyond the caches

void BM_MatMulBf16(benchmark::State& state) {
  const WeightMatrix w = Bf16(kRows, kCols);
  std::vector<float> x(kCols, 0.5f), y(kRows);
  for (auto _ : state) {
    MatMul(w, x.data(), 1, y.data(), nullptr);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(w.bytes()));
}
BENCHMARK(BM_MatMulBf16);

void BM_MatMulQuantized(benchmark::State& state) {
  const QuantFormat format = state.range(0) == 8 ? QuantFormat::kInt8 : QuantFormat::kInt4;
  const QuantizedMatrix q = QuantizedMatrix::Quantize(Bf16(kRows, kCols), format, 32);
  std::vector<float> x(kCols, 0.5f), y(kRows);
  for (auto _ : state) {
    MatMul(q, x.data(), 1, y.data(), nullptr);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(q.bytes()));
  state.counters["values_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()) * kRows * kCols, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MatMulQuantized)->Arg(8)->Arg(4);

}  // namespace
}  // namespace tandem::rt
