#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/draft/drafter.hpp"
#include "runtime/draft/quantized_experts.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/serve/scheduler.hpp"
#include "tests/runtime/stream_output.hpp"

// The speculative-decoding tests' common run: every submission at once through a
// scheduler with one drafter, and what came out.
namespace tandem::testing {

struct DraftingRun {
  std::vector<StreamOutput> outputs;  // one per submission, in order
  nlohmann::json draft;               // /v1/stats "draft"
};

using DrafterFactory = std::function<std::unique_ptr<rt::Drafter>(rt::Engine&)>;

// A null factory: no drafter. `keep_hidden`: what an MTP drafter needs from the engine.
DraftingRun RunDrafting(const rt::Checkpoint& ckpt, const rt::Tokenizer& tokenizer, const std::vector<rt::Submission>& submissions,
                        const DrafterFactory& make_drafter, const std::string& policy, bool keep_hidden, int max_context);

// Accepted per verified draft (0 when nothing was verified).
double Acceptance(const DraftingRun& run);

// Text, token count and finish reason of every request equal the plain run's; `what(i)`
// names request i in a failure.
void ExpectSameOutputs(const DraftingRun& run, const DraftingRun& plain, const std::function<std::string(std::size_t)>& what);

// The checkpoint's MTP layer drafting, its experts computed in process on the target's threads.
DrafterFactory MtpDrafterOf(const rt::Checkpoint& ckpt);

// A quantized replica of the target (group 32) drafting on the target's threads.
DrafterFactory ReplicaDrafterOf(const rt::Checkpoint& ckpt, rt::QuantFormat format);

}  // namespace tandem::testing
