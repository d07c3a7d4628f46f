#pragma once

#include <span>
#include <string>
#include <vector>

#include "runtime/engine/kv_cache.hpp"
#include "runtime/engine/rank_stats.hpp"
#include "runtime/engine/row.hpp"

namespace tandem::rt {

class ThreadPool;
struct ForwardOutput;

// What a server's scheduler needs of a model's forward pass, whatever the architecture
// (Engine: DeepSeek V2/V3; V41Engine: DeepSeek V4.1): batches of rows over per-sequence
// caches that can be opened, forked, truncated and closed.
class DecodeEngine {
 public:
  virtual ~DecodeEngine() = default;

  virtual int vocab_size() const = 0;
  // The width of ForwardOutput::hidden rows, when the engine keeps them.
  virtual int hidden_size() const = 0;
  virtual bool keeps_hidden() const = 0;
  virtual KvCachePool& kv() = 0;
  virtual ThreadPool& pool() = 0;
  // Throws std::invalid_argument for rows out of order, of unknown sequences, past a
  // cache's capacity or outside the vocabulary.
  virtual void Forward(std::span<const Row> rows, ForwardOutput& out) = 0;
  // One untimed forward of `rows` rows on a scratch sequence, so that the first real step
  // finds its buffers mapped.
  virtual void WarmUp(int rows) = 0;
  // Remote expert ranks, as far as they have answered (none: every expert is local).
  virtual std::vector<RankStats> RankStatistics() const { return {}; }
  // The ranks late to answer now (callable from any thread); empty when none.
  virtual std::string LateRanks() const { return {}; }
};

}  // namespace tandem::rt
