#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "runtime/engine/kv_cache.hpp"
#include "runtime/engine/row.hpp"

namespace tandem::rt {

class ThreadPool;
class V41Engine;

// One round of DSpark's proposals: the drafted tokens (the block's greedy choices, each
// after the Markov bias of the token before it), their logits and confidence logits.
struct DSparkDraft {
  std::vector<TokenId> tokens;    // [block_size]: for positions position + 2 …
  std::vector<float> logits;      // [block_size × vocab]
  std::vector<float> confidence;  // [block_size]
};

// DeepSeek V4.1's own drafter (the checkpoint's mtp.* stages), as the reference's
// forward_spec computes it, on the coordinator beside the target V41Engine, whose weights it
// shares (the embedding, the head) and whose DSpark input rows (V41EngineOptions::
// keep_hidden) it reads. Per sequence it keeps, for every target position, each stage's KV
// row of the projected target state (the reference's 128-slot ring, kept whole so that a
// rejected round is forgotten by truncating, as the target's cache is). A draft is a block
// of the sampled token and noise tokens through the stages (window attention over the ring
// plus the whole block, each stage's own MoE computed here), then the head with the Markov
// bias token by token.
class V41DSpark {
 public:
  // Chooses the token at block position j from its logits (the Markov bias of the token
  // before added) and confidence logit, or nothing to stop the block there. None: greedy
  // (the reference's temperature 0).
  using Choice = std::function<std::optional<TokenId>(int j, std::span<const float> logits, float confidence)>;

  V41DSpark(const V41Engine& target, ThreadPool* pool);
  ~V41DSpark();

  int block_size() const;
  // A cache per sequence: open it as the target's, truncate and fork it alike.
  KvCachePool& kv();

  // The target's rows just computed (each sequence's consecutive positions from its cache
  // length) and their DSpark inputs ([rows × targets·dim], ForwardOutput::hidden). A
  // sequence's first rows may start past 0 (a prefix the target took from its prefix
  // cache): its ring then holds nothing before them.
  void Observe(std::span<const Row> rows, const float* hidden);
  // With `sequence` observed through `position` and `next` the target's token for position
  // + 1: the block of drafts after it.
  DSparkDraft Draft(SequenceId sequence, std::int64_t position, TokenId next, const Choice& choose = {});
  // Forgets a sequence (closes its cache).
  void Close(SequenceId sequence);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::rt
