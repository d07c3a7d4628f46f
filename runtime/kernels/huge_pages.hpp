#pragma once

// Anonymous memory for the weights and a step's large buffers, on 2 MiB boundaries and
// marked for transparent huge pages (a hint: where THP is off, small pages). Used by
// weight_memory.cpp and workspace_memory.cpp.
#include <cstddef>

namespace tandem::rt {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// `bytes` (a multiple of kHugePageBytes) of zeroed memory starting on a 2 MiB
// boundary; throws std::bad_alloc. Returned with ::munmap(p, bytes).
void* MapHugePages(std::size_t bytes);

}  // namespace tandem::rt
