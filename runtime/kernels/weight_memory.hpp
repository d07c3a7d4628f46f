#pragma once

// Memory for the weights decode streams: matrices copied out of a checkpoint
// (WeightPlacement::kCopied), tp slices of experts, group-quantized matrices. Decode
// reads every active weight once a step; from 4 KiB pages (a file mapping unless the
// page cache holds large folios, or a small std::vector's heap under THP `madvise`)
// bf16 decode ran up to 23% slower (7–11% on two threads) and int4 expert decode
// 6–12% slower on one thread here (docs/performance.md, "Weight placement: copied or mapped pages"). So matrices are
// packed into 2 MiB-aligned chunks marked for huge pages.
//
// Made for weights loaded once: blocks up to 1 MiB share chunks (a chunk is unmapped
// when its last block is freed, except the one small blocks currently come from,
// which starts over); a larger block gets chunks of its own, rounded up to 2 MiB
// (up to half of it unused for a block just over 1 MiB).

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

#include "runtime/kernels/block_allocator.hpp"

namespace tandem::rt {

// Thread-safe; throws std::bad_alloc. Every block is 64-byte aligned.
void* AllocateWeightMemory(std::size_t bytes);
void FreeWeightMemory(void* p, std::size_t bytes) noexcept;
// Bytes currently mapped for weight memory (tests).
std::size_t WeightMemoryMapped();
// A block of weight memory freed with its last owner, and one holding a copy of
// `bytes` bytes from `src`.
std::shared_ptr<void> NewWeightMemory(std::size_t bytes);
std::shared_ptr<const void> CopyToWeightMemory(const void* src, std::size_t bytes);

template <class T>
using WeightAllocator = BlockAllocator<T, AllocateWeightMemory, FreeWeightMemory>;

template <class T>
using WeightVector = std::vector<T, WeightAllocator<T>>;

}  // namespace tandem::rt
