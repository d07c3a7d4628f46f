#pragma once

// A standard allocator over a pair of block functions (weight memory, workspace
// memory): blocks 64-byte aligned, freed with the size they were given.
#include <cstddef>
#include <new>

namespace tandem::rt {

template <class T, void* (*Allocate)(std::size_t), void (*Free)(void*, std::size_t) noexcept>
struct BlockAllocator {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = BlockAllocator<U, Allocate, Free>;
  };
  BlockAllocator() noexcept = default;
  template <class U>
  BlockAllocator(const BlockAllocator<U, Allocate, Free>&) noexcept {}  // NOLINT: converting, as allocators must
  static_assert(alignof(T) <= 64, "blocks are 64-byte aligned");
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(Allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { Free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const BlockAllocator<U, Allocate, Free>&) const noexcept {
    return true;
  }
};

}  // namespace tandem::rt
