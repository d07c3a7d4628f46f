// A build without -DTANDEM_CUDA=ON: the CUDA backend's entry points say so.

#include <stdexcept>

#include "runtime/kernels/cuda/cuda_device.hpp"
#include "runtime/kernels/cuda/cuda_experts.hpp"
#include "runtime/kernels/cuda/cuda_forward.hpp"

namespace tandem::rt {

namespace {
constexpr const char* kNotBuilt = "this build has no CUDA backend (configure with -DTANDEM_CUDA=ON)";
}

bool CudaBuilt() { return false; }
int CudaDeviceCount() { return 0; }
std::string CudaDeviceSummary() { return kNotBuilt; }

void RequireCudaDevice() { throw std::invalid_argument(std::string("--device cuda: ") + kNotBuilt + "; use --device cpu"); }

std::unique_ptr<CudaMoeSlices> CudaMoeSlices::Upload(const MoeSlices&) {
  RequireCudaDevice();
  return nullptr;
}

std::unique_ptr<CudaForward> CudaForward::Create(const Checkpoint&, const ModelWeights&, const RopeTable&, float, bool) {
  RequireCudaDevice();
  return nullptr;
}

std::vector<TokenId> CudaSample(std::span<const float>, std::int64_t, std::span<const SamplingParams>,
                                std::span<const std::int64_t>) {
  RequireCudaDevice();
  return {};
}

}  // namespace tandem::rt
