#include "runtime/kernels/huge_pages.hpp"

#include <cstdint>
#include <new>

#include <sys/mman.h>

namespace tandem::rt {

void* MapHugePages(std::size_t bytes) {
  // One huge page more than asked, then the unaligned ends unmapped again.
  const std::size_t mapped = bytes + kHugePageBytes;
  void* mapping = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  const auto first = reinterpret_cast<std::uintptr_t>(mapping);
  const std::uintptr_t start = (first + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (start > first) ::munmap(mapping, start - first);
  if (first + mapped > start + bytes) ::munmap(reinterpret_cast<void*>(start + bytes), first + mapped - start - bytes);
  ::madvise(reinterpret_cast<void*>(start), bytes, MADV_HUGEPAGE);  // a hint: without THP, small pages
  return reinterpret_cast<void*>(start);
}

}  // namespace tandem::rt
