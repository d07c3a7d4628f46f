#include "runtime/kernels/cuda/device_memory.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace tandem::rt::cuda {

void Check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  throw std::runtime_error(fmt::format("CUDA: {}: {} ({})", what, cudaGetErrorString(status), cudaGetErrorName(status)));
}

void CheckLaunch(const char* kernel) { Check(cudaGetLastError(), kernel); }

}  // namespace tandem::rt::cuda
