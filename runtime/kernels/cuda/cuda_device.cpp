// The CUDA build's answers (cuda_unavailable.cpp has the others).

#include "runtime/kernels/cuda/cuda_device.hpp"

#include <stdexcept>

#include <cuda_runtime.h>

#include <fmt/format.h>

namespace tandem::rt {

bool CudaBuilt() { return true; }

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

std::string CudaDeviceSummary() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("no usable CUDA device: {}", cudaGetErrorString(status));
  }
  if (count == 0) return "no CUDA device";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "CUDA device 0: properties unreadable";
  return fmt::format("{}, compute {}.{}, {} SMs, {:.1f} GiB", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                     static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
}

void RequireCudaDevice() {
  if (CudaDeviceCount() == 0) {
    throw std::invalid_argument(fmt::format("--device cuda: {} (use --device cpu)", CudaDeviceSummary()));
  }
  // The build carries sm_90 code and compute_90 PTX: older cards cannot run it.
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major < 9) {
    throw std::invalid_argument(
        fmt::format("--device cuda: {} has compute capability {}.{}; this build needs 9.0 or newer "
                    "(set CMAKE_CUDA_ARCHITECTURES for another card)",
                    prop.name, prop.major, prop.minor));
  }
}

}  // namespace tandem::rt
