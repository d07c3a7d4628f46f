#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/engine/kv_cache.hpp"
#include "runtime/model/tokenizer.hpp"

namespace tandem::rt {

// Token sequences whose KV is kept after their request ended, in a radix tree over
// token ids, so a new request can start from the longest prefix any of them shares
// with its prompt (a repeated system prompt, a conversation's next turn). Each
// entry owns a sequence in the KvCachePool; the least recently used entry is
// evicted beyond `max_entries`. Not thread-safe: the scheduler owns it.
class PrefixCache {
 public:
  PrefixCache(KvCachePool& pool, std::size_t max_entries, SequenceId first_id);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  struct Match {
    SequenceId sequence = 0;  // an entry whose first `length` tokens equal the prompt's
    int length = 0;           // 0: nothing reusable
  };
  // The longest prefix of `tokens` held, at most `limit` tokens long.
  Match Lookup(std::span<const TokenId> tokens, int limit);

  // Keeps the first `length` positions of sequence `source` (whose KV holds
  // `tokens`) as an entry: copied into a cache-owned sequence of exactly that size.
  // A sequence already covered by an existing entry only refreshes that entry. Past
  // the pool's KV budget, older entries are evicted to make room, or the entry is not kept.
  void Insert(std::span<const TokenId> tokens, SequenceId source);

  // Frees the least recently used entry's KV; false when there is none.
  bool EvictOldest();

  std::size_t entries() const;

 private:
  struct Node;
  struct Entry;
  void Evict();
  bool EvictOldestBut(const Entry* keep);
  void Remove(Entry* entry);

  KvCachePool& pool_;
  std::size_t max_entries_;
  SequenceId next_id_;
  std::uint64_t clock_ = 0;
  std::unique_ptr<Node> root_;
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace tandem::rt
