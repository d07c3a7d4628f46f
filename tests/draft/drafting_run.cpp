#include "tests/draft/drafting_run.hpp"

#include <algorithm>

#include <gtest/gtest.h>

#include "runtime/draft/draft_policy.hpp"
#include "runtime/draft/mtp_drafter.hpp"
#include "runtime/draft/replica_drafter.hpp"
#include "runtime/engine/local_experts.hpp"

namespace tandem::testing {

DraftingRun RunDrafting(const rt::Checkpoint& ckpt, const rt::Tokenizer& tokenizer, const std::vector<rt::Submission>& submissions,
                        const DrafterFactory& make_drafter, const std::string& policy, bool keep_hidden, int max_context) {
  rt::Engine engine(ckpt, rt::EngineOptions{.threads = 2, .keep_hidden = keep_hidden});
  rt::SchedulerOptions options;
  options.max_context = max_context;
  options.eos = static_cast<rt::TokenId>(ckpt.config().eos_token_id);
  rt::Scheduler scheduler(engine, tokenizer, options, make_drafter ? make_drafter(engine) : nullptr, rt::MakeDraftPolicy(policy));
  std::vector<std::shared_ptr<rt::RequestStream>> streams;
  for (const rt::Submission& s : submissions) streams.push_back(scheduler.Submit(s));
  DraftingRun run;
  for (auto& stream : streams) run.outputs.push_back(ReadToEnd(*stream));
  run.draft = nlohmann::json::parse(scheduler.StatsJson())["draft"];
  return run;
}

double Acceptance(const DraftingRun& run) {
  return run.draft["accepted_drafts"].get<double>() / std::max(1.0, run.draft["verified_drafts"].get<double>());
}

void ExpectSameOutputs(const DraftingRun& run, const DraftingRun& plain, const std::function<std::string(std::size_t)>& what) {
  ASSERT_EQ(run.outputs.size(), plain.outputs.size());
  for (std::size_t i = 0; i < run.outputs.size(); ++i) {
    EXPECT_EQ(run.outputs[i].text, plain.outputs[i].text) << what(i);
    EXPECT_EQ(run.outputs[i].completion_tokens, plain.outputs[i].completion_tokens) << what(i);
    EXPECT_EQ(run.outputs[i].finish_reason, plain.outputs[i].finish_reason) << what(i);
  }
}

DrafterFactory MtpDrafterOf(const rt::Checkpoint& ckpt) {
  return [&ckpt](rt::Engine& target) {
    const rt::ModelConfig& c = ckpt.config();
    const std::vector<rt::LayerSlice> layer = {
        {c.num_hidden_layers, 0, c.n_routed_experts, 0, c.moe_intermediate_size, 0, c.moe_intermediate_size * c.n_shared_experts}};
    return std::make_unique<rt::MtpDrafter>(ckpt, &target.pool(), [&ckpt, layer](rt::ThreadPool& p) {
      return std::make_shared<rt::LocalExpertExecutor>(ckpt, &p, false, layer);
    });
  };
}

DrafterFactory ReplicaDrafterOf(const rt::Checkpoint& ckpt, rt::QuantFormat format) {
  return [&ckpt, format](rt::Engine& target) {
    return std::make_unique<rt::ReplicaDrafter>(ckpt, &target.pool(), [&ckpt, format](rt::ThreadPool& p) {
      return std::make_shared<rt::QuantizedExpertExecutor>(ckpt, format, 32, &p);
    });
  };
}

}  // namespace tandem::testing
