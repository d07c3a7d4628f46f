#include "runtime/engine/cuda/device_experts.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/kernels/cuda/cuda_device.hpp"

namespace tandem::rt {

std::unique_ptr<CudaMoeSlices> CudaMoeSlices::Upload(const MoeSlices& host, const LoadProgressFn& progress) {
  RequireCudaDevice();
  return std::make_unique<cuda::DeviceExperts>(host, progress);
}

namespace cuda {

namespace {

std::uint64_t Bytes(const DeviceMatrix& m) { return m.storage.bytes(); }

// What MoeSlices::weight_bytes counts of one MLP.
std::uint64_t HostBytes(const MlpWeights& m) { return m.gate.bytes() + m.up.bytes() + m.gate_up.bytes() + m.down.bytes(); }

}  // namespace

DeviceExperts::DeviceExperts(const MoeSlices& host, const LoadProgressFn& progress) : hidden_(host.hidden()) {
  LoadProgress report{LoadProgress::Phase::kUpload, 0, host.weight_bytes(), {}};
  if (progress) progress(report);
  for (const auto& [index, held] : host.layers()) {
    Layer layer;
    layer.slice = held.slice;
    if (!held.experts.empty()) {
      if (held.experts.size() > static_cast<std::size_t>(kMaxRoutedExperts)) {
        throw std::invalid_argument(
            fmt::format("device experts: layer {} holds {} routed experts; the device router and "
                        "grouping take at most {}",
                        index, held.experts.size(), kMaxRoutedExperts));
      }
      std::vector<const WeightMatrix*> gate, up, down;
      for (const MlpWeights& e : held.experts) {
        gate.push_back(&e.gate);
        up.push_back(&e.up);
        down.push_back(&e.down);
      }
      layer.gate = UploadStacked(gate);
      layer.up = UploadStacked(up);
      layer.down = UploadStacked(down);
      weight_bytes_ += Bytes(layer.gate) + Bytes(layer.up) + Bytes(layer.down);
    }
    if (held.shared) {
      layer.shared.emplace(DeviceMlp::Upload(*held.shared));
      weight_bytes_ += layer.shared->bytes();
    }
    layers_.emplace(index, std::move(layer));
    if (progress) {
      for (const MlpWeights& e : held.experts) report.bytes_done += HostBytes(e);
      if (held.shared) report.bytes_done += HostBytes(*held.shared);
      progress(report);
    }
  }
}

DeviceExperts::~DeviceExperts() = default;

void DeviceExperts::ComputeOnDevice(int layer, const float* x, std::int64_t rows, const std::int32_t* experts, const float* weights,
                                    int top_k, float* out32, double* out64, cudaStream_t stream) {
  const auto it = layers_.find(layer);
  if (it == layers_.end()) throw std::invalid_argument(fmt::format("device experts: layer {} is not held here", layer));
  const Layer& l = it->second;
  const std::int64_t routes = rows * top_k;
  const int local = l.slice.expert_end - l.slice.expert_begin;
  const bool routed = l.gate.storage.get() != nullptr && l.slice.HoldsRouted();
  const std::int64_t inter = l.slice.inter_end - l.slice.inter_begin;

  workspace_.Grow(slot_route_, static_cast<std::size_t>(std::max<std::int64_t>(routes, 1)));
  workspace_.Grow(route_slot_, static_cast<std::size_t>(std::max<std::int64_t>(routes, 1)));
  workspace_.Grow(offsets_, static_cast<std::size_t>(local + 1));
  if (routed) {
    workspace_.Grow(h_, static_cast<std::size_t>(routes * inter));
    workspace_.Grow(y_, static_cast<std::size_t>(routes * hidden_));
    GroupRoutes(experts, routes, l.slice.expert_begin, l.slice.expert_end, slot_route_.get(), offsets_.get(), route_slot_.get(), stream);
    ExpertGateUp(l.gate.view, l.up.view, local, inter, hidden_, x, slot_route_.get(), offsets_.get(), top_k, h_.get(), stream);
    ExpertDown(l.down.view, local, hidden_, inter, h_.get(), offsets_.get(), y_.get(), stream);
  } else {
    // No routed experts here: every route is skipped.
    Check(cudaMemsetAsync(route_slot_.get(), 0xFF, static_cast<std::size_t>(routes) * sizeof(std::int32_t), stream), "cudaMemsetAsync");
  }
  const float* shared = nullptr;
  if (l.shared) {
    const auto n = static_cast<std::size_t>(rows * l.shared->intermediate());
    l.shared->Forward(x, rows, workspace_.Grow(shared_gate_, n), workspace_.Grow(shared_up_, n),
                      workspace_.Grow(shared_out_, static_cast<std::size_t>(rows * hidden_)), false, stream);
    shared = shared_out_.get();
  }
  CombineRoutes(y_.get(), route_slot_.get(), weights, rows, top_k, hidden_, shared, out32, out64, stream);
}

void DeviceExperts::Compute(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k, double* out) {
  if (!stream_) stream_.emplace();
  const auto n = static_cast<std::size_t>(rows * hidden_);
  const auto r = static_cast<std::size_t>(rows * top_k);
  if (routes.size() != r) {
    throw std::invalid_argument(fmt::format("device experts: {} routes for {} rows of top-{}", routes.size(), rows, top_k));
  }
  if (rows == 0) return;
  x_pinned_.Reserve(n);
  out_pinned_.Reserve(n);
  experts_pinned_.Reserve(r);
  weights_pinned_.Reserve(r);
  x_device_.Reserve(n);
  out_device_.Reserve(n);
  experts_device_.Reserve(r);
  weights_device_.Reserve(r);
  std::memcpy(x_pinned_.get(), x, n * sizeof(float));
  for (std::size_t i = 0; i < r; ++i) {
    experts_pinned_.get()[i] = routes[i].expert;
    weights_pinned_.get()[i] = routes[i].weight;
  }
  const cudaStream_t s = stream_->get();
  Check(cudaMemcpyAsync(x_device_.get(), x_pinned_.get(), n * sizeof(float), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
  Check(cudaMemcpyAsync(experts_device_.get(), experts_pinned_.get(), r * sizeof(std::int32_t), cudaMemcpyHostToDevice, s),
        "cudaMemcpyAsync");
  Check(cudaMemcpyAsync(weights_device_.get(), weights_pinned_.get(), r * sizeof(float), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
  ComputeOnDevice(layer, x_device_.get(), rows, experts_device_.get(), weights_device_.get(), top_k, nullptr, out_device_.get(), s);
  Check(cudaMemcpyAsync(out_pinned_.get(), out_device_.get(), n * sizeof(double), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  stream_->Synchronize();
  std::memcpy(out, out_pinned_.get(), n * sizeof(double));
}

}  // namespace cuda
}  // namespace tandem::rt
