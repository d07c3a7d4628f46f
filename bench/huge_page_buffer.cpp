#include "bench/huge_page_buffer.hpp"

#include <cstdint>
#include <new>

#include <sys/mman.h>

namespace tandem::bench {

std::shared_ptr<void> HugePageBuffer(std::size_t bytes) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  // Over-allocated by one huge page so the buffer can start on a 2 MiB boundary.
  const std::size_t mapped = bytes + kHuge;
  void* mapping = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  const auto aligned = (reinterpret_cast<std::uintptr_t>(mapping) + kHuge - 1) & ~(kHuge - 1);
  void* data = reinterpret_cast<void*>(aligned);
  ::madvise(data, bytes, MADV_HUGEPAGE);  // a hint: without THP the pages stay small
  return {data, [mapping, mapped](void*) { ::munmap(mapping, mapped); }};
}

}  // namespace tandem::bench
