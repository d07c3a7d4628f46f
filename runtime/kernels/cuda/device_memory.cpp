#include "runtime/kernels/cuda/device_memory.hpp"

#include <atomic>
#include <stdexcept>

#include <fmt/format.h>

namespace tandem::rt::cuda {

void Check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  throw std::runtime_error(fmt::format("CUDA: {}: {} ({})", what, cudaGetErrorString(status), cudaGetErrorName(status)));
}

void CheckLaunch(const char* kernel) { Check(cudaGetLastError(), kernel); }

namespace {
std::atomic<std::uint64_t> allocations{0};
}

std::uint64_t AllocationGeneration() { return allocations.load(std::memory_order_relaxed); }
void NoteAllocation() { allocations.fetch_add(1, std::memory_order_relaxed); }

}  // namespace tandem::rt::cuda
