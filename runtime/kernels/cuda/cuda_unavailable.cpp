// A build without -DTANDEM_CUDA=ON: the CUDA device queries say so.

#include <stdexcept>

#include "runtime/kernels/cuda/cuda_device.hpp"

namespace tandem::rt {

namespace {
constexpr const char* kNotBuilt = "this build has no CUDA backend (configure with -DTANDEM_CUDA=ON)";
}

bool CudaBuilt() { return false; }
int CudaDeviceCount() { return 0; }
std::string CudaDeviceSummary() { return kNotBuilt; }

void RequireCudaDevice() { throw std::invalid_argument(std::string("--device cuda: ") + kNotBuilt + "; use --device cpu"); }

}  // namespace tandem::rt
