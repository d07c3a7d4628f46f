#include "runtime/serve/prefix_cache.hpp"

#include <gtest/gtest.h>

namespace tandem::rt {
namespace {

// A sequence whose KV row at position p is filled with `tag + p`, so copies can be checked.
void Fill(KvCachePool& pool, SequenceId id, const std::vector<TokenId>& tokens, float tag) {
  KvCache& c = pool.Open(id, static_cast<int>(tokens.size()) + 4);
  for (int p = 0; p < static_cast<int>(tokens.size()); ++p) c.At(0, p)[0] = tag + static_cast<float>(p);
  c.SetLength(static_cast<int>(tokens.size()));
}

TEST(PrefixCache, FindsTheLongestSharedPrefixEvenInsideAnEntry) {
  KvCachePool pool(1, 1);
  PrefixCache cache(pool, 8, 1000);
  const std::vector<TokenId> a = {1, 2, 3, 4, 5};
  Fill(pool, 1, a, 100.0f);
  cache.Insert(a, 1);
  pool.Close(1);
  EXPECT_EQ(cache.entries(), 1u);

  const auto m = cache.Lookup(std::vector<TokenId>{1, 2, 3, 9, 9}, 100);
  EXPECT_EQ(m.length, 3);
  ASSERT_TRUE(pool.Contains(m.sequence));
  EXPECT_EQ(pool.Get(m.sequence).At(0, 2)[0], 102.0f) << "the entry's KV, copied at insert";
  EXPECT_EQ(cache.Lookup(std::vector<TokenId>{1, 2, 3, 4, 5, 6}, 100).length, 5);
  EXPECT_EQ(cache.Lookup(std::vector<TokenId>{1, 2, 3, 4, 5, 6}, 2).length, 2) << "the caller's limit";
  EXPECT_EQ(cache.Lookup(std::vector<TokenId>{7, 1, 2}, 100).length, 0);
}

TEST(PrefixCache, SplitsEdgesAndEvictsTheLeastRecentlyUsed) {
  KvCachePool pool(1, 1);
  PrefixCache cache(pool, 2, 1000);
  const std::vector<std::vector<TokenId>> seqs = {{1, 2, 3, 4}, {1, 2, 7, 8}, {5, 6}};
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    Fill(pool, 10 + i, seqs[i], 10.0f * static_cast<float>(i));
    if (i == 2) cache.Lookup(seqs[1], 10);  // touch the second, so the first is the oldest
    cache.Insert(seqs[i], 10 + i);
    pool.Close(10 + i);
  }
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(cache.Lookup(std::vector<TokenId>{1, 2, 3, 4, 9}, 10).length, 2) << "{1,2,3,4} was evicted; {1,2,7,8} shares 2";
  EXPECT_EQ(cache.Lookup(std::vector<TokenId>{1, 2, 7, 8, 9}, 10).length, 4);
  EXPECT_EQ(cache.Lookup(std::vector<TokenId>{5, 6, 0}, 10).length, 2);
  EXPECT_EQ(pool.size(), 2u) << "only the two entries' sequences remain";
}

TEST(PrefixCache, ZeroEntriesKeepsNothing) {
  KvCachePool pool(1, 1);
  PrefixCache cache(pool, 0, 1000);
  Fill(pool, 1, {1, 2}, 0.0f);
  cache.Insert(std::vector<TokenId>{1, 2}, 1);
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_EQ(cache.Lookup(std::vector<TokenId>{1, 2, 3}, 10).length, 0);
}

}  // namespace
}  // namespace tandem::rt
