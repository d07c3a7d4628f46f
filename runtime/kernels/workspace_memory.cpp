#include "runtime/kernels/workspace_memory.hpp"

#include <cstdint>

#include <sys/mman.h>

namespace tandem::rt {

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kMappedFrom = std::size_t{1} << 20;  // at most half of a mapping unused
constexpr std::align_val_t kAlign{64};

std::size_t RoundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

bool WorkspaceIsMapped(std::size_t bytes) noexcept { return bytes >= kMappedFrom; }

void* AllocateWorkspace(std::size_t bytes) {
  if (!WorkspaceIsMapped(bytes)) return ::operator new(bytes == 0 ? 1 : bytes, kAlign);
  if (bytes > static_cast<std::size_t>(-1) / 2) throw std::bad_alloc();  // no rounding can wrap below
  const std::size_t size = RoundUp(bytes, kHugePage);
  // One huge page more than asked, then the unaligned ends unmapped again.
  const std::size_t mapped = size + kHugePage;
  void* mapping = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  const auto first = reinterpret_cast<std::uintptr_t>(mapping);
  const std::uintptr_t start = RoundUp(first, kHugePage);
  if (start > first) ::munmap(mapping, start - first);
  if (first + mapped > start + size) ::munmap(reinterpret_cast<void*>(start + size), first + mapped - start - size);
  ::madvise(reinterpret_cast<void*>(start), size, MADV_HUGEPAGE);  // a hint: without THP, small pages
  return reinterpret_cast<void*>(start);
}

void FreeWorkspace(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (!WorkspaceIsMapped(bytes)) return ::operator delete(p, kAlign);
  ::munmap(p, RoundUp(bytes, kHugePage));
}

}  // namespace tandem::rt
