#include "runtime/engine/kv_cache.hpp"

#include <gtest/gtest.h>

namespace tandem::rt {
namespace {

TEST(KvCache, TruncateAndCopyPrefix) {
  KvCachePool pool(2, 3);
  KvCache& a = pool.Open(1, 8);
  for (int l = 0; l < 2; ++l) {
    for (int p = 0; p < 5; ++p) {
      for (int i = 0; i < 3; ++i) a.At(l, p)[i] = static_cast<float>(100 * l + 10 * p + i);
    }
  }
  a.SetLength(5);
  KvCache& b = pool.Fork(1, 2, 4, 6);
  EXPECT_EQ(b.length(), 4);
  EXPECT_EQ(b.capacity(), 6);
  EXPECT_EQ(b.At(1, 3)[2], 132.0f);
  a.Truncate(2);
  EXPECT_EQ(a.length(), 2);
  EXPECT_EQ(b.length(), 4) << "a fork is a copy, not a view";
  EXPECT_THROW(a.Truncate(3), std::invalid_argument);
  EXPECT_THROW(a.SetLength(9), std::invalid_argument);
  EXPECT_THROW(pool.Fork(1, 3, 3, 8), std::invalid_argument) << "source has only 2 positions now";
  EXPECT_FALSE(pool.Contains(3)) << "a failed fork leaves nothing behind";
  EXPECT_THROW(pool.Fork(2, 4, 4, 3), std::invalid_argument) << "prefix longer than the new capacity";
}

TEST(KvCache, PoolRejectsUnknownAndDuplicateIds) {
  KvCachePool pool(1, 1);
  pool.Open(7, 2);
  EXPECT_THROW(pool.Open(7, 2), std::invalid_argument);
  EXPECT_THROW(pool.Get(8), std::invalid_argument);
  pool.Close(7);
  EXPECT_THROW(pool.Close(7), std::invalid_argument);
  EXPECT_EQ(pool.size(), 0u);
  EXPECT_THROW(pool.Open(1, 0), std::invalid_argument);
}

// A cache allowed a million positions allocates what its sequence uses, growing as it is
// written, and keeps every valid value across a growth.
TEST(KvCache, MemoryFollowsTheSequenceNotItsCapacity) {
  KvCachePool pool(3, 5);
  KvCache& c = pool.Open(1, 1'000'000);
  EXPECT_EQ(c.allocated(), KvCache::kFirstAllocation);
  EXPECT_EQ(pool.bytes_in_use(), pool.bytes_per_position() * KvCache::kFirstAllocation);
  const auto value = [](int l, int p, int i) { return static_cast<float>(1000 * l + p) + 0.125f * static_cast<float>(i); };
  for (int end : {100, 256, 257, 700, 5000}) {
    c.Reserve(end);
    for (int l = 0; l < 3; ++l) {
      for (int p = c.length(); p < end; ++p) {
        for (int i = 0; i < 5; ++i) c.At(l, p)[i] = value(l, p, i);
      }
    }
    c.SetLength(end);
  }
  EXPECT_GE(c.allocated(), 5000);
  EXPECT_LE(c.allocated(), 2 * 5000) << "grown by doubling, not to the capacity";
  for (int l = 0; l < 3; ++l) {
    for (int p = 0; p < 5000; p += 7) {
      for (int i = 0; i < 5; ++i) ASSERT_EQ(c.At(l, p)[i], value(l, p, i)) << l << " " << p << " " << i;
    }
  }
  EXPECT_EQ(pool.bytes_in_use(), pool.bytes_per_position() * static_cast<std::size_t>(c.allocated()));
  EXPECT_THROW(c.Reserve(1'000'001), std::invalid_argument) << "the capacity still bounds it";
  KvCache& fork = pool.Fork(1, 2, 4000, 6000);
  EXPECT_EQ(fork.At(2, 3999)[4], value(2, 3999, 4));
  pool.Close(1);
  pool.Close(2);
  EXPECT_EQ(pool.bytes_in_use(), 0u);
}

// Past the pool's budget a cache grows as far as fits and then refuses, naming the
// budget; closing a sequence gives its bytes back.
TEST(KvCache, ABudgetBoundsAllCachesTogether) {
  KvCachePool pool(2, 4);
  const std::size_t per = pool.bytes_per_position();
  pool.SetBudget(per * 600);
  KvCache& a = pool.Open(1, 10'000);
  KvCache& b = pool.Open(2, 10'000);
  a.Reserve(300);  // doubling wants 512: 344 fit beside b's 256
  EXPECT_EQ(a.allocated(), 344);
  try {
    b.Reserve(257);
    FAIL() << "no room left";
  } catch (const KvBudgetExhausted& e) {
    EXPECT_NE(std::string(e.what()).find("budget of"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("257 positions"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.allocated(), 256) << "a refused growth changes nothing";
  EXPECT_THROW(pool.Open(3, 10), KvBudgetExhausted);
  EXPECT_FALSE(pool.Contains(3));
  pool.Close(1);
  b.Reserve(600);
  EXPECT_EQ(b.allocated(), 600);
  EXPECT_EQ(pool.bytes_in_use(), per * 600);
}

}  // namespace
}  // namespace tandem::rt
