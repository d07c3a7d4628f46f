#pragma once

#include <map>

#include "runtime/draft/drafter.hpp"
#include "runtime/engine/engine.hpp"

namespace tandem::rt {

class Checkpoint;

// DeepSeek-V3's multi-token prediction layer as the drafter. The MTP block at
// position q reads the target's hidden state at q − 1 (after the target's final
// norm) and the embedding of token q, and predicts token q + 1; chained for more
// drafts, each step reads the MTP block's own output instead (as vLLM chains it).
// Its KV cache follows the committed tokens: every row the target commits is fed
// at the next Propose (batched over requests), then the speculative rows, which the
// next Propose drops again. MTP positions are the target's minus the first one fed
// (rotary attention depends only on differences), so a request that started from
// a cached prefix simply drafts without that prefix in the MTP's cache.
class MtpDrafter : public Drafter {
 public:
  // `experts`: the executor of the MTP block's experts (checkpoint layer
  // num_hidden_layers). Throws ModelError when the checkpoint has no MTP layer.
  MtpDrafter(const Checkpoint& ckpt, ThreadPool* pool, const Engine::ExpertExecutorFactory& experts);
  ~MtpDrafter() override;

  std::string_view name() const override { return "mtp"; }
  void Propose(std::span<const DraftRequest> requests, const DraftMore& more, std::vector<Draft>& drafts) override;
  void Forget(SequenceId sequence) override;
  DraftWork last_work() const override { return work_; }
  bool wants_target_hidden() const override { return true; }
  void ObserveTarget(SequenceId sequence, int position, std::span<const TokenId> tokens, const float* hidden, int capacity) override;

 private:
  struct Sequence {
    int first = -1;                       // target position of the first MTP row (its MTP position 0)
    int committed = 0;                    // MTP rows fed from committed target rows
    int observed = 0;                     // target positions observed (the next one expected)
    std::vector<float> last;              // the target's normed hidden at position observed − 1
    std::vector<TokenId> pending_tokens;  // committed rows not yet fed: token q …
    std::vector<float> pending_hidden;    // … and the normed target hidden at q − 1
  };

  Engine engine_;
  std::vector<float> final_norm_;
  float eps_;
  std::int64_t hidden_;
  std::map<SequenceId, Sequence> sequences_;
  ForwardOutput out_;
  DraftWork work_;
  std::vector<Row> rows_;
  std::vector<float> hidden_in_;
};

}  // namespace tandem::rt
