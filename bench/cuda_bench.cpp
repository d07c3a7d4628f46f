// GPU benchmarks (built with -DTANDEM_CUDA=ON; run on the GPU machine, see
// scripts/gpu-check): the device copy bandwidth, and the GEMV and routed-expert
// kernels' bandwidth as a fraction of it. Timed with CUDA events (manual time).

#include <algorithm>
#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>

#include "runtime/kernels/cuda/device_memory.hpp"
#include "runtime/kernels/cuda/kernels.hpp"

namespace tandem::rt::cuda {
namespace {

// Fills n bf16 values with small non-zero numbers (zeros could run faster).
void Fill(DeviceBuffer<std::uint16_t>& buffer, std::size_t n) {
  std::vector<std::uint16_t> pattern(1 << 20);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<std::uint16_t>(0x3C00 + (i * 2654435761u >> 20) % 512);
  for (std::size_t at = 0; at < n; at += pattern.size()) {
    const std::size_t count = std::min(pattern.size(), n - at);
    Check(cudaMemcpy(buffer.get() + at, pattern.data(), count * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
}

// Times `body` (enqueued on `stream`) with events; returns seconds.
template <typename Body>
double Time(cudaStream_t stream, Body body) {
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  Check(cudaEventRecord(start, stream), "cudaEventRecord");
  body();
  Check(cudaEventRecord(stop, stream), "cudaEventRecord");
  Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  Check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3;
}

constexpr std::size_t kCopyBytes = std::size_t{2} << 30;

// Bytes read + written per second by a device-to-device copy of 2 GiB: the ceiling
// the kernels are measured against (best of 5).
double CopyBandwidth() {
  static const double bandwidth = [] {
    DeviceBuffer<std::byte> a(kCopyBytes), b(kCopyBytes);
    Check(cudaMemset(a.get(), 1, kCopyBytes), "cudaMemset");
    Stream stream;
    double best = 1e30;
    for (int i = 0; i < 6; ++i) {
      const double s = Time(stream.get(), [&] {
        Check(cudaMemcpyAsync(b.get(), a.get(), kCopyBytes, cudaMemcpyDeviceToDevice, stream.get()), "cudaMemcpyAsync");
      });
      if (i > 0) best = std::min(best, s);
    }
    return 2.0 * static_cast<double>(kCopyBytes) / best;
  }();
  return bandwidth;
}

void Report(benchmark::State& state, double bytes_per_iteration) {
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes_per_iteration * static_cast<double>(state.iterations())));
  state.counters["copy_GBps"] = CopyBandwidth() / 1e9;
  state.counters["fraction_of_copy"] =
      benchmark::Counter(bytes_per_iteration / CopyBandwidth(), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_CudaCopy(benchmark::State& state) {
  DeviceBuffer<std::byte> a(kCopyBytes), b(kCopyBytes);
  Stream stream;
  for (auto _ : state) {
    state.SetIterationTime(Time(stream.get(), [&] {
      Check(cudaMemcpyAsync(b.get(), a.get(), kCopyBytes, cudaMemcpyDeviceToDevice, stream.get()), "cudaMemcpyAsync");
    }));
  }
  Report(state, 2.0 * static_cast<double>(kCopyBytes));
}
BENCHMARK(BM_CudaCopy)->UseManualTime()->Unit(benchmark::kMillisecond);

// A 1 GiB bf16 matrix [16384 × 32768] times `batch` fp32 rows.
void BM_CudaGemv(benchmark::State& state) {
  const std::int64_t rows = 16384, cols = 32768, batch = state.range(0);
  DeviceBuffer<std::uint16_t> w(static_cast<std::size_t>(rows * cols));
  Fill(w, static_cast<std::size_t>(rows * cols));
  DeviceBuffer<float> x(static_cast<std::size_t>(batch * cols)), y(static_cast<std::size_t>(batch * rows));
  Check(cudaMemset(x.get(), 0, x.bytes()), "cudaMemset");
  const MatrixView view{DType::kBF16, rows, cols, w.get()};
  Stream stream;
  for (auto _ : state) {
    state.SetIterationTime(Time(stream.get(), [&] { Gemv(view, x.get(), cols, batch, y.get(), rows, false, stream.get()); }));
  }
  Report(state, static_cast<double>(rows * cols * 2 + batch * (cols + rows) * 4));
}
BENCHMARK(BM_CudaGemv)->Arg(1)->Arg(4)->Arg(16)->UseManualTime()->Unit(benchmark::kMicrosecond);

// A DeepSeek-V3-shaped MoE layer's routed experts: 64 experts of [2048 × 7168]
// (gate, up) and [7168 × 2048] (down) in bf16, `rows` rows × top-8 routes spread so
// that every expert is used (each expert's weights are read once per call).
void BM_CudaExperts(benchmark::State& state) {
  const std::int64_t experts = 64, inter = 2048, hidden = 7168, top_k = 8, rows = state.range(0);
  const auto per = static_cast<std::size_t>(experts * inter * hidden);
  DeviceBuffer<std::uint16_t> gate(per), up(per), down(per);
  Fill(gate, per);
  Fill(up, per);
  Fill(down, per);
  const std::int64_t routes = rows * top_k;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(routes));
  for (std::int64_t r = 0; r < routes; ++r) ids[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(r % experts);
  DeviceBuffer<std::int32_t> route_experts(static_cast<std::size_t>(routes)), slot_route(static_cast<std::size_t>(routes)),
      route_slot(static_cast<std::size_t>(routes)), offsets(static_cast<std::size_t>(experts + 1));
  Check(cudaMemcpy(route_experts.get(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  DeviceBuffer<float> x(static_cast<std::size_t>(rows * hidden)), h(static_cast<std::size_t>(routes * inter)),
      y(static_cast<std::size_t>(routes * hidden));
  Check(cudaMemset(x.get(), 0, x.bytes()), "cudaMemset");
  const MatrixView g{DType::kBF16, inter, hidden, gate.get()}, u{DType::kBF16, inter, hidden, up.get()},
      d{DType::kBF16, hidden, inter, down.get()};
  Stream stream;
  for (auto _ : state) {
    state.SetIterationTime(Time(stream.get(), [&] {
      GroupRoutes(route_experts.get(), routes, 0, static_cast<int>(experts), slot_route.get(), offsets.get(), route_slot.get(),
                  stream.get());
      ExpertGateUp(g, u, experts, inter, hidden, x.get(), slot_route.get(), offsets.get(), static_cast<int>(top_k), h.get(), stream.get());
      ExpertDown(d, experts, hidden, inter, h.get(), offsets.get(), y.get(), stream.get());
    }));
  }
  Report(state, static_cast<double>(3 * per * 2));
}
BENCHMARK(BM_CudaExperts)->Arg(8)->Arg(32)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tandem::rt::cuda
