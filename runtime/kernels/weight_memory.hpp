#pragma once

// Memory for weights the runtime builds itself (group-quantized matrices, whether
// quantized at load or copied out of a quantized checkpoint). Decode streams them
// every step like the mapped bf16 weights, which Linux maps with 2 MiB pages where
// it can; a small std::vector's heap memory stays on 4 KiB pages (glibc under THP
// `madvise`), and that read int4 expert decode ~7% slower here (docs/performance.md,
// "Fourth pass"). So matrices are packed into 2 MiB-aligned chunks marked for huge
// pages; a chunk is unmapped when the last allocation in it is freed.

#include <cstddef>
#include <vector>

namespace tandem::rt {

// Thread-safe; throws std::bad_alloc. Every block is 64-byte aligned.
void* AllocateWeightMemory(std::size_t bytes);
void FreeWeightMemory(void* p, std::size_t bytes) noexcept;
// Bytes currently mapped for weight memory (tests).
std::size_t WeightMemoryMapped();

template <class T>
struct WeightAllocator {
  using value_type = T;
  WeightAllocator() noexcept = default;
  template <class U>
  WeightAllocator(const WeightAllocator<U>&) noexcept {}  // NOLINT: converting, as allocators must
  T* allocate(std::size_t n) { return static_cast<T*>(AllocateWeightMemory(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { FreeWeightMemory(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const WeightAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using WeightVector = std::vector<T, WeightAllocator<T>>;

}  // namespace tandem::rt
