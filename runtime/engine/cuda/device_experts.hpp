#pragma once

// The device side of CudaMoeSlices, which the device forward pass also calls with
// rows already on the device. Internal to the CUDA backend.

#include <map>
#include <optional>
#include <vector>

#include "runtime/engine/cuda/cuda_experts.hpp"
#include "runtime/engine/cuda/device_weights.hpp"
#include "runtime/engine/moe_slices.hpp"

namespace tandem::rt::cuda {

class DeviceExperts final : public CudaMoeSlices {
 public:
  explicit DeviceExperts(const MoeSlices& host, const LoadProgressFn& progress = {});
  ~DeviceExperts() override;

  std::uint64_t weight_bytes() const override { return weight_bytes_; }
  // Bumped whenever ComputeOnDevice's workspace moves (see Workspace).
  std::uint64_t workspace_generation() const { return workspace_.generation(); }

  void Compute(int layer, const float* x, std::int64_t rows, std::span<const ExpertRoute> routes, int top_k, double* out) override;

  // The same on device memory: x [rows × hidden], experts / weights [rows × top_k];
  // writes out32 or out64 [rows × hidden]. Enqueued on `stream`.
  void ComputeOnDevice(int layer, const float* x, std::int64_t rows, const std::int32_t* experts, const float* weights, int top_k,
                       float* out32, double* out64, cudaStream_t stream);

 private:
  struct Layer {
    LayerSlice slice;
    DeviceMatrix gate, up, down;  // routed: [experts × inter × hidden], [experts × hidden × inter]
    std::optional<DeviceMlp> shared;
  };

  std::int64_t hidden_;
  std::map<int, Layer> layers_;
  std::uint64_t weight_bytes_ = 0;
  // Workspace, grown to the largest batch seen.
  Workspace workspace_;
  DeviceBuffer<std::int32_t> slot_route_, offsets_, route_slot_;
  DeviceBuffer<float> h_, y_, shared_gate_, shared_up_, shared_out_;
  // Compute's host side: pinned staging and its own stream.
  std::optional<Stream> stream_;
  PinnedBuffer<float> x_pinned_, weights_pinned_;
  PinnedBuffer<std::int32_t> experts_pinned_;
  PinnedBuffer<double> out_pinned_;
  DeviceBuffer<float> x_device_, weights_device_;
  DeviceBuffer<std::int32_t> experts_device_;
  DeviceBuffer<double> out_device_;
};

}  // namespace tandem::rt::cuda
