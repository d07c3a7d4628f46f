#pragma once

#include <memory>
#include <vector>

#include "runtime/draft/drafter.hpp"

namespace tandem::rt {

class ThreadPool;
class V41DSpark;
class V41Engine;

// DeepSeek V4.1's own drafter (the checkpoint's DSpark stages, V41DSpark) behind the
// Drafter interface. The target reports every committed row with its DSpark input (the
// engine must keep them: V41EngineOptions::keep_hidden); a request drafts once its rows up
// to the anchor's position are observed: one block, its tokens chosen as every drafter
// chooses (the request's sampling, its grammar mask), each draft's confidence the sigmoid
// of DSpark's confidence logit — what the draft-length policy weighs. Verification is the
// target's, so the output is the target's whatever DSpark proposes.
class DSparkDrafter : public Drafter {
 public:
  // Throws std::invalid_argument when the checkpoint has no DSpark stages or the target
  // does not keep its DSpark inputs.
  DSparkDrafter(const V41Engine& target, ThreadPool* pool);
  ~DSparkDrafter() override;

  std::string_view name() const override { return "dspark"; }
  void Propose(std::span<const DraftRequest> requests, const DraftMore& more, std::vector<Draft>& drafts) override;
  DraftWork last_work() const override { return work_; }
  void Forget(SequenceId sequence) override;
  bool wants_target_hidden() const override { return true; }
  void ObserveTarget(SequenceId sequence, int position, std::span<const TokenId> tokens, const float* hidden, int capacity) override;

 private:
  std::unique_ptr<V41DSpark> dspark_;
  DraftWork work_;
};

}  // namespace tandem::rt
