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

}  // namespace
}  // namespace tandem::rt
