#pragma once

#include <memory>
#include <span>

#include "runtime/engine/decode_engine.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/engine/kv_cache.hpp"
#include "runtime/engine/row.hpp"

namespace tandem::rt {

class ThreadPool;
class V41Checkpoint;
struct V41Config;
struct V41Weights;

struct V41EngineOptions {
  int threads = 0;             // 0: all cores
  ThreadPool* pool = nullptr;  // when set (not owned), computes on it instead of its own
  // Rounds the experts' input rows as a hybrid layout's wire does (as Engine's option).
  ExpertInputPrecision expert_input = ExpertInputPrecision::kF32;
  // Every row's DSpark input in ForwardOutput::hidden: for each of dspark_target_layer_ids,
  // the mean of the hc copies of the stream entering that layer (after Engram), bf16,
  // concatenated — [rows × targets·dim].
  bool keep_hidden = false;
};

// The forward pass of DeepSeek V4.1 (docs/v41-attention.md) over batches of rows, beside
// the V3 Engine and with the same contract: rows of several sequences, each sequence's
// rows consecutive positions from its cache length; a row's logits bit-identical alone or
// among others, and a prompt fed whole or token by token.
//
// A sequence's cache (KvCachePool, one "layer" of CacheWidth floats per position) keeps,
// per position: its token (Engram's history), each layer's window KV row, and on KV
// sources the compressed latent and index key of the group it completes and the raw
// compressor rows an unfinished group waits with. Keeping every position rather than a
// ring of the window's is what lets a cache be truncated (speculative rollback) and
// forked (prefix reuse) exactly as the V3 cache is.
class V41Engine : public DecodeEngine {
 public:
  // An empty `experts` factory computes every expert in this process (V41MoeSlices).
  explicit V41Engine(const V41Checkpoint& ckpt, V41EngineOptions options = {}, const Engine::ExpertExecutorFactory& experts = {});
  ~V41Engine() override;

  const V41Config& config() const;
  // Its weights (the DSpark stages' too), for a drafter computing beside it.
  const V41Weights& weights() const;
  KvCachePool& kv() override;
  ThreadPool& pool() override;
  int vocab_size() const override;
  int hidden_size() const override;  // targets·dim: the width of the kept rows
  bool keeps_hidden() const override;
  std::vector<RankStats> RankStatistics() const override;
  std::string LateRanks() const override;
  // Floats a cache holds per position.
  static int CacheWidth(const V41Config& config);

  // Throws std::invalid_argument for rows that break the rules above.
  void Forward(std::span<const Row> rows, ForwardOutput& out) override;
  void WarmUp(int rows) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::rt
