// Workspace (kernels/workspace_memory.hpp): a step's buffers, large ones in
// huge-page-eligible mappings of their own. Whether the kernel grants huge pages is
// the host's business; what must hold anywhere is that blocks are aligned, start as
// zeros as any vector's, keep their values as they grow, and that the threshold
// between heap and mapping is where the header says.
#include "runtime/kernels/workspace_memory.hpp"

#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::rt {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(Workspace, SmallBlocksComeFromTheHeapLargeOnesFromHugePageAlignedMappings) {
  EXPECT_FALSE(WorkspaceIsMapped(0));
  EXPECT_FALSE(WorkspaceIsMapped(kMiB - 1));
  EXPECT_TRUE(WorkspaceIsMapped(kMiB));
  Workspace<double> small(10);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small.data()) % 64, 0u);
  Workspace<float> large(3 * kMiB / sizeof(float));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(large.data()) % (2 * kMiB), 0u);
}

TEST(Workspace, GrowingKeepsValuesAndNewElementsStartAtZero) {
  Workspace<float> w;
  std::size_t filled = 0;
  // From the heap into mappings and across several of them, as a prompt's buffers grow.
  for (const std::size_t n : {std::size_t{100}, kMiB / 8, kMiB / 4 + 3, 3 * kMiB / 4, 5 * kMiB / 2}) {
    w.resize(n);
    for (std::size_t i = filled; i < n; ++i) ASSERT_EQ(w[i], 0.0f) << "element " << i << " of " << n;
    for (std::size_t i = 0; i < filled; ++i) ASSERT_EQ(w[i], static_cast<float>(i % 1000)) << "element " << i << " of " << n;
    for (std::size_t i = filled; i < n; ++i) w[i] = static_cast<float>(i % 1000);
    filled = n;
  }
  // Shrinking then growing again reuses the capacity and zeroes what comes back.
  w.resize(10);
  w.resize(20);
  for (std::size_t i = 10; i < 20; ++i) EXPECT_EQ(w[i], 0.0f);
}

TEST(Workspace, ThreadsAllocateAndFreeTheirOwnBlocks) {
  // As the pool's threads do with their thread-local scratch: nothing shared to corrupt.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int round = 0; round < 20; ++round) {
        Workspace<std::uint8_t> block(static_cast<std::size_t>((round % 3) + 1) * kMiB + static_cast<std::size_t>(t),
                                      static_cast<std::uint8_t>(t));
        for (std::uint8_t v : block) ASSERT_EQ(v, static_cast<std::uint8_t>(t));
      }
    });
  }
  for (std::thread& th : threads) th.join();
}

}  // namespace
}  // namespace tandem::rt
