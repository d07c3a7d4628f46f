// WeightMemory (kernels/weight_memory.hpp): the chunked, huge-page-eligible memory
// quantized matrices live in. Whether the kernel grants huge pages is the host's
// business; what must hold anywhere is that blocks are aligned, distinct and
// intact, and that memory goes back when the matrices in it are freed.
#include "runtime/kernels/weight_memory.hpp"

#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::rt {
namespace {

TEST(WeightMemory, BlocksAreAlignedDistinctAndKeepTheirBytes) {
  std::vector<WeightVector<std::uint8_t>> blocks;
  for (std::size_t i = 0; i < 200; ++i) {
    blocks.emplace_back(1 + i * 997 % 40000, static_cast<std::uint8_t>(i));  // 1 byte to ~40 KiB, several chunks
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(blocks.back().data()) % 64, 0u) << i;
  }
  blocks.emplace_back(std::size_t{3} << 20, std::uint8_t{200});  // larger than half a chunk: a block of its own
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const auto expected = static_cast<std::uint8_t>(i);
    for (std::uint8_t v : blocks[i]) ASSERT_EQ(v, expected) << "block " << i;
  }
}

TEST(WeightMemory, ChunksAreUnmappedWhenTheirLastBlockIsFreed) {
  const std::size_t before = WeightMemoryMapped();
  {
    std::vector<WeightVector<float>> blocks;
    for (int i = 0; i < 40; ++i) blocks.emplace_back(std::size_t{128} << 10, 1.0f);  // 512 KiB each: 10+ chunks
    blocks.emplace_back(std::size_t{1} << 20, 2.0f);                                 // 4 MiB of its own
    // 20 MiB of small blocks (up to four may fit in a chunk mapped before: then the
    // bound is met exactly) and 4 MiB alone.
    EXPECT_GE(WeightMemoryMapped(), before + (std::size_t{22} << 20));
  }
  // What stays is at most the chunk small blocks come from, empty and ready for reuse.
  EXPECT_LE(WeightMemoryMapped(), before + (std::size_t{2} << 20));
}

// Loading a worker's share reads or quantizes a whole expert matrix and keeps a
// slice of it: the freed wholes' memory must serve the next wholes, not stay dead
// between the slices.
TEST(WeightMemory, FreedBlocksServeTheNextOfTheirSize) {
  const std::size_t before = WeightMemoryMapped();
  std::vector<WeightVector<std::uint8_t>> slices;
  for (int i = 0; i < 400; ++i) {
    WeightVector<std::uint8_t> whole(40 << 10, static_cast<std::uint8_t>(i));
    slices.emplace_back(whole.begin(), whole.begin() + (10 << 10));
  }
  // 4 MB of slices and one whole in use: without reuse 20 MB would stay mapped.
  EXPECT_LE(WeightMemoryMapped(), before + (std::size_t{8} << 20));
  for (std::size_t i = 0; i < slices.size(); ++i) {
    for (std::uint8_t v : slices[i]) ASSERT_EQ(v, static_cast<std::uint8_t>(i)) << "slice " << i;
  }
}

TEST(WeightMemory, ThreadsAllocatingAndFreeingAtOnceGetTheirOwnBytes) {
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &failures] {
      for (int round = 0; round < 200; ++round) {
        std::vector<WeightVector<std::uint32_t>> mine;
        for (int i = 0; i < 8; ++i)
          mine.emplace_back(static_cast<std::size_t>(1000 + 1000 * i), static_cast<std::uint32_t>(t * 1000 + round));
        for (const auto& v : mine) {
          for (std::uint32_t x : v) failures[static_cast<std::size_t>(t)] += x != static_cast<std::uint32_t>(t * 1000 + round);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

// Blocks freed into a chunk that is later unmapped (or started over) must never be
// handed out again: a new chunk may be mapped at the same address, holding live
// blocks of its own.
TEST(WeightMemory, BlocksOfAChunkSinceUnmappedAreNeverHandedOut) {
  for (int round = 0; round < 4; ++round) {
    std::vector<WeightVector<std::uint8_t>> old;
    for (int i = 0; i < 100; ++i) old.emplace_back(100 << 10, std::uint8_t{0});
    old.clear();  // every chunk emptied: unmapped, or (the current one) started over
    std::vector<WeightVector<std::uint8_t>> blocks;
    for (int i = 0; i < 300; ++i) blocks.emplace_back(100 << 10, static_cast<std::uint8_t>(i));
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      for (std::uint8_t v : blocks[i]) ASSERT_EQ(v, static_cast<std::uint8_t>(i)) << "round " << round << ", block " << i;
    }
  }
}

// The same with the address reused by blocks of another size before the stale
// size is asked for again.
TEST(WeightMemory, StaleFreeBlocksStayStaleWhenTheirAddressIsMappedAgain) {
  std::vector<WeightVector<std::uint8_t>> keep;  // keeps the arena from emptying (which clears the lists)
  keep.emplace_back(64, std::uint8_t{7});
  for (int round = 0; round < 4; ++round) {
    {
      std::vector<WeightVector<std::uint8_t>> old;
      for (int i = 0; i < 60; ++i) old.emplace_back(96 << 10, std::uint8_t{0});
    }
    std::vector<WeightVector<std::uint8_t>> other, same;
    for (int i = 0; i < 60; ++i) other.emplace_back(80 << 10, static_cast<std::uint8_t>(100 + i));
    for (int i = 0; i < 60; ++i) same.emplace_back(96 << 10, static_cast<std::uint8_t>(i));
    for (std::size_t i = 0; i < other.size(); ++i) {
      for (std::uint8_t v : other[i]) ASSERT_EQ(v, static_cast<std::uint8_t>(100 + i)) << "round " << round << ", other " << i;
    }
    for (std::size_t i = 0; i < same.size(); ++i) {
      for (std::uint8_t v : same[i]) ASSERT_EQ(v, static_cast<std::uint8_t>(i)) << "round " << round << ", same " << i;
    }
  }
  EXPECT_EQ(keep[0][0], 7);
}

}  // namespace
}  // namespace tandem::rt
