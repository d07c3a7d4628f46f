#pragma once

#include <map>
#include <memory>

#include "runtime/draft/drafter.hpp"
#include "runtime/engine/engine.hpp"

namespace tandem::rt {

class Checkpoint;

// A local copy of the target that drafts autoregressively with no network round
// trip: the same checkpoint, its large projections read group-quantized when
// `quantize` is set (ModelWeights::Quantize; the full-precision weights are the
// target's own mapped pages), experts from `experts` (QuantizedExpertExecutor in
// production), its own KV caches. Drafts are greedy for greedy requests and, for sampled ones, drawn with
// the request's own stateless (seed, position, token) draws: when the replica's
// distribution is close to the target's, the same draws mostly pick the same token.
class ReplicaDrafter : public Drafter {
 public:
  ReplicaDrafter(const Checkpoint& ckpt, ThreadPool* pool, const Engine::ExpertExecutorFactory& experts, std::string name = "replica",
                 std::optional<QuantFormat> quantize = std::nullopt, int group = 32);
  ~ReplicaDrafter() override;

  std::string_view name() const override { return name_; }
  void Propose(std::span<const DraftRequest> requests, const DraftMore& more, std::vector<Draft>& drafts) override;
  void Forget(SequenceId sequence) override;
  DraftWork last_work() const override { return work_; }

 private:
  std::string name_;
  Engine engine_;
  std::map<SequenceId, std::vector<TokenId>> fed_;  // tokens whose KV the replica holds, per sequence
  ForwardOutput out_;
  DraftWork work_;
  std::vector<Row> rows_;
};

}  // namespace tandem::rt
