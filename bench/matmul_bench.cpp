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
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/memory_bandwidth.hpp"
#include "runtime/kernels/cpu_features.hpp"
#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/quantized_matrix.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/kernels/weight_memory.hpp"
#include "runtime/numeric/dtype.hpp"

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
  return WeightMatrix::FromQuantized(
      std::make_shared<const QuantizedMatrix>(QuantizedMatrix::Quantize(w, format == 3 ? QuantFormat::kInt8 : QuantFormat::kInt4, 32)));
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
      for (std::int64_t batch : {1, 2, 3, 4, 64}) {
        for (Isa isa : kAllIsas) b->Args({format, rows, batch, static_cast<int>(isa)});
      }
    }
  }
}
BENCHMARK(BM_MatMul)->Apply(MatMulArgs)->ArgNames({"format", "rows", "batch", "isa"});

// Attention's per-head products from memory, as decode runs them: the absorbed key
// product (MatMulTransposed over W_UK[h]) and the value product (W_UV[h]) of the
// small preset's kv_b_proj (8 heads × (64 + 64) rows × 128 columns; bf16: 256 KiB a
// layer), each iteration on the next of 256 such layers (64 MiB in bf16, beyond the
// caches), so every byte comes from memory. Args: 1 the key products only, 2 the
// value products only, 3 both (as decode); format (1 bf16, 3 int8, 4 int4, group 32,
// as a `--layers all` checkpoint). Counter: the layer's bytes per second.
void BM_AttentionHeadProducts(benchmark::State& state) {
  constexpr std::int64_t kHeads = 8, kNope = 64, kValue = 64, kLatent = 128, kLayers = 256;
  std::vector<WeightMatrix> kv_b;
  std::vector<std::vector<WeightMatrix>> key_up(kLayers), value_up(kLayers);
  for (std::int64_t l = 0; l < kLayers; ++l) {
    kv_b.push_back(Matrix(static_cast<int>(state.range(1)), kHeads * (kNope + kValue), kLatent));
    for (std::int64_t h = 0; h < kHeads; ++h) {
      key_up[l].push_back(kv_b.back().RowSlice(h * (kNope + kValue), kNope));
      value_up[l].push_back(kv_b.back().RowSlice(h * (kNope + kValue) + kNope, kValue));
    }
  }
  std::vector<float> q(kNope, 0.5f), q_abs(kLatent), latent(kLatent, 0.25f), o(kValue);
  std::int64_t l = 0;
  for (auto _ : state) {
    for (std::int64_t h = 0; h < kHeads; ++h) {
      if (state.range(0) & 1) MatMulTransposed(key_up[l][h], q.data(), 1, q_abs.data(), nullptr);
      if (state.range(0) & 2) MatMul(value_up[l][h], latent.data(), 1, o.data(), nullptr);
    }
    benchmark::DoNotOptimize(o.data());
    l = (l + 1) % kLayers;
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kv_b[0].bytes()));
}
BENCHMARK(BM_AttentionHeadProducts)->ArgsProduct({{1, 2, 3}, {1, 3, 4}})->ArgNames({"products", "format"})->Unit(benchmark::kMicrosecond);

// A MoE layer's expert products from memory, as decode reads them: 7 distinct
// experts (6 routed and the shared one) drawn at random each iteration from 336
// (126 MiB: not a preset's count, just far beyond the caches), each of the small
// preset's shape (gate and up 128 × 512, down 512 × 128, bf16; stored down, gate,
// up like a checkpoint's sorted tensors), their gates and ups as one MatMulMany over
// one input row, then their downs as another. What it shows is the cost of reading
// many 128 KiB matrices instead of one long stream (compare
// BM_MatMul/format:1/rows:131072 and BM_ReadBandwidth). The int8 and int4 variants
// show the same for a quantized checkpoint's experts (int8: gate and up 136 KiB with
// their scales, down 68 KiB), where per-product costs weigh more.
// Short runs over weights made once, so variants can be compared with
// --benchmark_repetitions=15 --benchmark_enable_random_interleaving=true.
struct ExpertStore {
  static constexpr std::int64_t kExperts = 336, kHidden = 512, kInter = 128, kPer = 3 * kHidden * kInter;
  // On huge pages, as the weights decode reads are (weight memory).
  WeightVector<std::uint16_t> storage = WeightVector<std::uint16_t>(static_cast<std::size_t>(kExperts * kPer));
  std::vector<WeightMatrix> down, gate, up;

  ExpertStore() {
    std::uint16_t* const values = storage.data();
    std::mt19937 rng(3);
    for (std::int64_t i = 0; i < kExperts * kPer; ++i) values[i] = F32ToBf16(static_cast<float>(rng() % 1024) * 1e-4f - 0.05f);
    const auto view = [&](std::int64_t offset, std::int64_t rows, std::int64_t cols) {
      WeightMatrix w;
      w.type = WeightMatrix::Type::kBF16;
      w.rows = rows;
      w.cols = cols;
      w.data = values + offset;
      return w;
    };
    for (std::int64_t e = 0; e < kExperts; ++e) {
      down.push_back(view(e * kPer, kHidden, kInter));
      gate.push_back(view(e * kPer + kHidden * kInter, kInter, kHidden));
      up.push_back(view(e * kPer + 2 * kHidden * kInter, kInter, kHidden));
    }
  }
};

// The same experts group-quantized, as `tandem-rt quantize` writes routed experts and
// the engine holds them (MoeSlices): each expert's down, then its gate and up stacked
// as one matrix (FuseGateUp), values and scales in weight memory in that order. int4
// group 32; int8 group 64, as bench/peers.py's all-layer 8-bit checkpoint.
struct QuantizedExpertStore {
  std::vector<WeightMatrix> down, gate_up;

  QuantizedExpertStore(const ExpertStore& bf16, QuantFormat format, int group) {
    const auto quantize = [&](const WeightMatrix& w) { return QuantizedMatrix::Quantize(w, format, group); };
    const auto hold = [](QuantizedMatrix m) { return WeightMatrix::FromQuantized(std::make_shared<const QuantizedMatrix>(std::move(m))); };
    for (std::size_t e = 0; e < bf16.down.size(); ++e) {
      down.push_back(hold(quantize(bf16.down[e])));
      gate_up.push_back(hold(QuantizedMatrix::StackRows(quantize(bf16.gate[e]), quantize(bf16.up[e]))));
    }
  }
};

// Made on first use: only the runs of a format pay for it.
const QuantizedExpertStore& QuantizedExperts(const ExpertStore& bf16, int format) {
  if (format == 4) {
    static const QuantizedExpertStore int4(bf16, QuantFormat::kInt4, 32);
    return int4;
  }
  static const QuantizedExpertStore int8(bf16, QuantFormat::kInt8, 64);
  return int8;
}

// The byte ranges a product reads (a quantized matrix's values and its scales).
std::vector<std::pair<const float*, std::int64_t>> ReadRanges(const WeightMatrix& w) {
  if (w.quantized) {
    return {{reinterpret_cast<const float*>(w.quantized->values.data()), static_cast<std::int64_t>(w.quantized->values.size())},
            {w.quantized->scales.data(), static_cast<std::int64_t>(w.quantized->scales.size() * sizeof(float))}};
  }
  return {{static_cast<const float*>(w.data), static_cast<std::int64_t>(w.bytes())}};
}

// The matrices of one MatMulMany read by a plain sum (bench::ReadFloats) instead, the
// threads sharing the bytes as the products share the work: the ceiling a pass is
// measured against.
void ReadAll(const std::vector<MatMulTask>& group, ThreadPool& pool) {
  constexpr std::int64_t kLine = 16;  // floats in a 64-byte line
  std::vector<std::pair<const float*, std::int64_t>> ranges;
  for (const MatMulTask& t : group) {
    for (const auto& r : ReadRanges(*t.w)) ranges.emplace_back(r.first, r.second / 64);
  }
  std::vector<std::int64_t> first(ranges.size() + 1, 0);  // lines before each range
  for (std::size_t i = 0; i < ranges.size(); ++i) first[i + 1] = first[i] + ranges[i].second;
  std::vector<float> sums(static_cast<std::size_t>(pool.size()));
  pool.ParallelFor(first.back(), [&](std::int64_t begin, std::int64_t end) {
    auto i = static_cast<std::size_t>(std::upper_bound(first.begin(), first.end(), begin) - first.begin()) - 1;
    float sum = 0;
    for (; i < ranges.size() && first[i] < end; ++i) {
      const std::int64_t b = std::max(begin, first[i]), e = std::min(end, first[i + 1]);
      sum += bench::ReadFloats(ranges[i].first + (b - first[i]) * kLine, (e - b) * kLine);
    }
    sums[static_cast<std::size_t>(begin * pool.size() / first.back())] += sum;
  });
  benchmark::DoNotOptimize(sums.data());
}

// Args: threads (0: all), format (16: bf16; 8: int8 group 64; 4: int4 group 32; bytes
// counted are the format's, scales included; 0, -8, -4: the bf16, int8 or int4
// matrices read by ReadAll, not multiplied), products (3: gates and ups, then downs, as
// decode; 1: the gates and ups only; 2: the downs only, whose rows are a quarter
// as long), rows (each expert's inputs: 1 as in single-sequence decode, where 7
// experts are active; 2 or 3 with 48 active, as at C16, where a layer's 96 routes land
// on about 50 of 64 experts, most of them given 1–3 rows; 16 with 7 active, as at C16
// when every row is routed alike: a campaign's C identical greedy requests).
// Counters: bytes of weights per second and multiply-adds per second.
void BM_ExpertProducts(benchmark::State& state) {
  using S = ExpertStore;
  const std::int64_t rows = state.range(3);
  const std::size_t active = rows == 1 || rows == 16 ? 7 : 48;
  static const ExpertStore bf16;
  const bool read_only = state.range(1) <= 0;
  const int format = read_only ? static_cast<int>(-state.range(1)) : static_cast<int>(state.range(1));
  const std::int64_t products = state.range(2);
  const QuantizedExpertStore* quantized = format == 4 || format == 8 ? &QuantizedExperts(bf16, format) : nullptr;
  ThreadPool pool(static_cast<int>(state.range(0)));
  const auto per_expert = [rows](std::int64_t n) { return static_cast<std::size_t>(rows * n); };
  std::vector<float> x(per_expert(S::kHidden), 0.5f), hidden(2 * active * per_expert(S::kInter), 0.25f),
      out(active * per_expert(S::kHidden));
  std::vector<MatMulTask> gate_up, downs(active);
  std::vector<std::size_t> experts(static_cast<std::size_t>(S::kExperts));
  for (std::size_t e = 0; e < experts.size(); ++e) experts[e] = e;
  std::mt19937 rng(4);
  for (auto _ : state) {
    // The first `active` of a partial shuffle: distinct, as a token's experts are.
    for (std::size_t a = 0; a < active; ++a) std::swap(experts[a], experts[a + rng() % (experts.size() - a)]);
    gate_up.clear();
    for (std::size_t a = 0; a < active; ++a) {
      const std::size_t e = experts[a];
      float* h = hidden.data() + 2 * a * per_expert(S::kInter);
      if (quantized != nullptr) {
        gate_up.push_back({&quantized->gate_up[e], x.data(), rows, h, nullptr});
      } else {
        gate_up.push_back({&bf16.gate[e], x.data(), rows, h, nullptr});
        gate_up.push_back({&bf16.up[e], x.data(), rows, h + per_expert(S::kInter), nullptr});
      }
      downs[a] = {quantized != nullptr ? &quantized->down[e] : &bf16.down[e], h, rows, out.data() + a * per_expert(S::kHidden), nullptr};
    }
    if (read_only) {
      if ((products & 1) != 0) ReadAll(gate_up, pool);
      if ((products & 2) != 0) ReadAll(downs, pool);
      continue;
    }
    if ((products & 1) != 0) MatMulMany(gate_up, &pool);
    if ((products & 2) != 0) MatMulMany(downs, &pool);
    benchmark::DoNotOptimize(out.data());
  }
  std::size_t bytes = 0;  // of the last iteration's matrices (every expert's are the same size)
  for (const MatMulTask& t : gate_up) bytes += (products & 1) != 0 ? t.w->bytes() : 0;
  for (const MatMulTask& t : downs) bytes += (products & 2) != 0 ? t.w->bytes() : 0;
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
  const double macs =
      static_cast<double>(active * rows) * S::kHidden * S::kInter * (((products & 1) != 0 ? 2.0 : 0.0) + ((products & 2) != 0 ? 1.0 : 0.0));
  if (!read_only) state.counters["MAC/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * macs, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ExpertProducts)
    ->ArgsProduct({{1, 0}, {16, 8, 4, 0, -8, -4}, {3, 1, 2}, {1}})
    ->ArgsProduct({{1, 0}, {16, 0}, {3}, {2, 3, 16}})
    ->ArgNames({"threads", "format", "products", "rows"})
    ->MinTime(0.5)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tandem::rt
