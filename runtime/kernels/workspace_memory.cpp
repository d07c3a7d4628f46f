#include "runtime/kernels/workspace_memory.hpp"

#include <sys/mman.h>

#include "runtime/kernels/huge_pages.hpp"

namespace tandem::rt {

namespace {

constexpr std::size_t kMappedFrom = std::size_t{1} << 20;  // at most half of a mapping unused
constexpr std::align_val_t kAlign{64};

std::size_t RoundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

bool WorkspaceIsMapped(std::size_t bytes) noexcept { return bytes >= kMappedFrom; }

void* AllocateWorkspace(std::size_t bytes) {
  if (!WorkspaceIsMapped(bytes)) return ::operator new(bytes == 0 ? 1 : bytes, kAlign);
  if (bytes > static_cast<std::size_t>(-1) / 2) throw std::bad_alloc();  // no rounding can wrap below
  return MapHugePages(RoundUp(bytes, kHugePageBytes));
}

void FreeWorkspace(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (!WorkspaceIsMapped(bytes)) return ::operator delete(p, kAlign);
  ::munmap(p, RoundUp(bytes, kHugePageBytes));
}

}  // namespace tandem::rt
