#pragma once

// Memory for a step's working buffers (activations, gathered expert rows, prepared
// inputs) and KV caches. Freshly mapped memory costs a page fault per page when first
// written; on the 2-vCPU VMs we measure on, a fault of a 4 KiB page costs ~13 µs, and
// the first 513-token prompt of a process faulted ~10 000 of them, on the thread that
// grew the buffers while the others waited: 1 500 tok/s against 2 400 for the same
// prompt a second time (docs/performance.md, "A process's first prompt"). So blocks of 1 MiB and
// more get 2 MiB-aligned mappings of their own, marked for huge pages (one fault per
// 2 MiB where THP is `always` or `madvise`), returned to the system when freed;
// smaller blocks come from the heap. Contents are value-initialized as any
// std::vector's.

#include <cstddef>
#include <new>
#include <vector>

#include "runtime/kernels/block_allocator.hpp"

namespace tandem::rt {

// Thread-safe; throws std::bad_alloc. Every block is 64-byte aligned.
void* AllocateWorkspace(std::size_t bytes);
void FreeWorkspace(void* p, std::size_t bytes) noexcept;
// Whether a block of `bytes` gets a huge-page mapping of its own (tests).
bool WorkspaceIsMapped(std::size_t bytes) noexcept;

template <class T>
using WorkspaceAllocator = BlockAllocator<T, AllocateWorkspace, FreeWorkspace>;

template <class T>
using Workspace = std::vector<T, WorkspaceAllocator<T>>;

}  // namespace tandem::rt
