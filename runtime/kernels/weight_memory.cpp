#include "runtime/kernels/weight_memory.hpp"

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include <sys/mman.h>

#include <sanitizer/asan_interface.h>  // no-op macros without AddressSanitizer

#include "runtime/kernels/huge_pages.hpp"

namespace tandem::rt {

namespace {

constexpr std::size_t kAlign = 64;

std::size_t RoundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// The bytes a block of `bytes` takes (never 0, so every block has an address of its own).
std::size_t BlockBytes(std::size_t bytes) { return RoundUp(bytes == 0 ? 1 : bytes, kAlign); }

// A 2 MiB-aligned run of huge-page-eligible memory, handed out front to back.
struct Chunk {
  std::size_t size = 0;  // bytes mapped from the aligned start
  std::size_t used = 0;
  std::size_t live = 0;  // allocations not yet freed
  std::uint64_t id = 0;  // new whenever the chunk's blocks start over (free blocks name it)
};

// Process-wide, like the heap it stands in for: blocks are freed by whichever
// matrix outlives the others. Never destroyed, so a static object's vector may
// still free into it at exit.
struct Arena {
  std::mutex mutex;
  std::map<std::uintptr_t, Chunk> chunks;  // by aligned start
  std::uintptr_t current = 0;              // the chunk small blocks come from (0: none)
  std::size_t mapped = 0;
  // Freed small blocks of chunks still in use, by size, for the next block of that
  // size: loading a worker's share reads or quantizes a whole expert and keeps a
  // slice of it, so without reuse every chunk would keep its dead wholes.
  // An entry is stale once its chunk is unmapped or started over (its id changed):
  // dropped when found, or all at once when no block is left anywhere.
  struct FreeBlock {
    std::uintptr_t address;
    std::uint64_t chunk_id;
  };
  std::map<std::size_t, std::vector<FreeBlock>> free_blocks;
  std::uint64_t next_id = 1;
  std::size_t live = 0;  // blocks not yet freed, in all chunks
};

Arena& TheArena() {
  static Arena* arena = new Arena;
  return *arena;
}

std::uintptr_t Map(Arena& a, std::size_t size) {
  const auto start = reinterpret_cast<std::uintptr_t>(MapHugePages(size));
  ASAN_POISON_MEMORY_REGION(reinterpret_cast<void*>(start), size);  // unpoisoned block by block
  try {
    a.chunks[start] = Chunk{size, 0, 0, a.next_id++};
  } catch (...) {
    ::munmap(reinterpret_cast<void*>(start), size);
    throw;
  }
  a.mapped += size;
  return start;
}

void Unmap(Arena& a, std::map<std::uintptr_t, Chunk>::iterator it) {
  ASAN_UNPOISON_MEMORY_REGION(reinterpret_cast<void*>(it->first), it->second.size);  // for whoever maps it next
  ::munmap(reinterpret_cast<void*>(it->first), it->second.size);
  a.mapped -= it->second.size;
  a.chunks.erase(it);
}

// The chunk holding `address`, or chunks.end().
std::map<std::uintptr_t, Chunk>::iterator ChunkOf(Arena& a, std::uintptr_t address) {
  auto it = a.chunks.upper_bound(address);
  if (it == a.chunks.begin()) return a.chunks.end();
  --it;
  return address < it->first + it->second.size ? it : a.chunks.end();
}

// A freed block of exactly `size` bytes in a chunk still mapped, or 0.
std::uintptr_t ReuseFreed(Arena& a, std::size_t size) {
  const auto it = a.free_blocks.find(size);
  if (it == a.free_blocks.end()) return 0;
  std::uintptr_t found = 0;
  while (found == 0 && !it->second.empty()) {
    const Arena::FreeBlock b = it->second.back();
    it->second.pop_back();
    const auto c = ChunkOf(a, b.address);
    if (c != a.chunks.end() && c->second.id == b.chunk_id) {
      ++c->second.live;
      found = b.address;
    }
  }
  if (it->second.empty()) a.free_blocks.erase(it);
  return found;
}

}  // namespace

void* AllocateWeightMemory(std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(-1) / 2) throw std::bad_alloc();  // no rounding can wrap below
  Arena& a = TheArena();
  const std::size_t need = BlockBytes(bytes);
  const std::lock_guard lock(a.mutex);
  std::uintptr_t block = 0;
  if (need > kHugePageBytes / 2) {  // a block of its own, not to waste a chunk's tail
    block = Map(a, RoundUp(need, kHugePageBytes));
    Chunk& c = a.chunks.at(block);
    c.used = c.size;
    c.live = 1;
  } else if (block = ReuseFreed(a, need); block == 0) {
    // (The current chunk is never full with no live blocks: its last free starts it over.)
    if (a.current == 0 || a.chunks.at(a.current).used + need > a.chunks.at(a.current).size) a.current = Map(a, kHugePageBytes);
    Chunk& c = a.chunks.at(a.current);
    block = a.current + c.used;
    c.used += need;
    ++c.live;
  }
  ++a.live;
  ASAN_UNPOISON_MEMORY_REGION(reinterpret_cast<void*>(block), bytes);
  return reinterpret_cast<void*>(block);
}

void FreeWeightMemory(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  Arena& a = TheArena();
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  const std::lock_guard lock(a.mutex);
  const auto it = ChunkOf(a, address);
  if (it == a.chunks.end() || it->second.live == 0) return;  // not ours: cannot happen through WeightAllocator
  Chunk& c = it->second;
  ASAN_POISON_MEMORY_REGION(p, BlockBytes(bytes));
  if (--a.live == 0) a.free_blocks.clear();  // every entry is stale now
  if (--c.live > 0) {
    // Kept for the next block of its size; a free must not fail, so under memory
    // pressure the block is simply not reused.
    try {
      a.free_blocks[BlockBytes(bytes)].push_back({address, c.id});
    } catch (const std::bad_alloc&) {
    }
    return;
  }
  if (it->first == a.current) {
    c.used = 0;  // the chunk small blocks come from: start it over
    c.id = a.next_id++;
  } else {
    Unmap(a, it);
  }
}

std::shared_ptr<void> NewWeightMemory(std::size_t bytes) {
  void* p = AllocateWeightMemory(bytes);
  try {
    return std::shared_ptr<void>(p, [bytes](void* q) { FreeWeightMemory(q, bytes); });
  } catch (...) {  // the control block's allocation
    FreeWeightMemory(p, bytes);
    throw;
  }
}

std::shared_ptr<const void> CopyToWeightMemory(const void* src, std::size_t bytes) {
  std::shared_ptr<void> p = NewWeightMemory(bytes);
  std::memcpy(p.get(), src, bytes);
  return p;
}

std::size_t WeightMemoryMapped() {
  Arena& a = TheArena();
  const std::lock_guard lock(a.mutex);
  return a.mapped;
}

}  // namespace tandem::rt
