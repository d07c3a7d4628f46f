// A build without -DTANDEM_CUDA=ON: the GPU engine's entry points refuse, saying why
// (RequireCudaDevice throws).

#include "runtime/engine/cuda/cuda_experts.hpp"
#include "runtime/engine/cuda/cuda_forward.hpp"
#include "runtime/kernels/cuda/cuda_device.hpp"

namespace tandem::rt {

std::unique_ptr<CudaMoeSlices> CudaMoeSlices::Upload(const MoeSlices&, const LoadProgressFn&) {
  RequireCudaDevice();
  return nullptr;
}

std::unique_ptr<CudaForward> CudaForward::Create(const Checkpoint&, const ModelWeights&, const RopeTable&, float, bool) {
  RequireCudaDevice();
  return nullptr;
}

std::vector<TokenId> CudaSample(std::span<const float>, std::int64_t, std::span<const SamplingParams>, std::span<const std::int64_t>) {
  RequireCudaDevice();
  return {};
}

}  // namespace tandem::rt
