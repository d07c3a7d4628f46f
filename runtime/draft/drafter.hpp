#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/engine/kv_cache.hpp"
#include "runtime/model/tokenizer.hpp"
#include "runtime/sampling/sampler.hpp"

// Speculative decoding: a drafter proposes the tokens that may follow each decoding
// request; the target verifies them all in one batched step (see
// docs/speculative-decoding.md).
namespace tandem::rt {

struct Draft;

// Restricts a drafter's logits for request `request`, given its drafts so far: a
// structured output's grammar, so its drafts are tokens the target may emit. Returns
// `logits` or a masked copy (valid until the next call).
using DraftMask = std::function<std::span<const float>(std::size_t request, const Draft& so_far, std::span<const float> logits)>;

struct DraftRequest {
  SequenceId sequence = 0;
  // Every committed token of the request, prompt first; the last one (the anchor) is
  // the token the target feeds next. Draft j (from 1) is the token at index
  // context.size() − 1 + j.
  std::span<const TokenId> context;
  int max_drafts = 0;  // 0: propose nothing for this request this step
  int capacity = 0;    // KV positions the request may use
  const SamplingParams* sampling = nullptr;
  const DraftMask* mask = nullptr;  // none: the drafter's logits as they are
};

struct Draft {
  std::vector<TokenId> tokens;
  std::vector<float> confidence;  // the drafter's probability of each token, in [0, 1]
};

// What the last Propose computed: its first forward (catching up on the tokens
// committed since the request last drafted, plus the anchor: `catchup_rows` rows in
// all) and the chained single-row forwards after it. Zero for drafters that compute
// nothing (prompt lookup).
struct DraftWork {
  int catchup_rows = 0;
  double first_s = 0;
  int chained = 0;
  double chained_s = 0;
  bool started = false;

  // Counts one forward of `seconds`: the first of the round, or a chained one.
  void Record(double seconds) {
    if (!started) {
      first_s = seconds;
      started = true;
    } else {
      ++chained;
      chained_s += seconds;
    }
  }
};

// Asked after each drafted token: should request `request` draft another one?
using DraftMore = std::function<bool(std::size_t request, const Draft& so_far)>;

// Appends to `draft` the token a drafter's `logits` (under `q.mask`, if any) give
// request `q` (greedy, or the request's own stateless draw at the token's index) with
// its probability; true when
// the request should draft another one (below max_drafts and `more` agrees).
bool AppendDraft(const DraftRequest& q, std::size_t request, std::span<const float> logits, const DraftMore& more, Draft& draft);

// Drafters hold only derived state (their own KV caches, keyed by the target's
// sequence ids): whatever they computed beyond the committed tokens is forgotten at
// the next Propose, so a rejected draft never advances anything.
class Drafter {
 public:
  virtual ~Drafter() = default;

  virtual std::string_view name() const = 0;

  // drafts[i] gets at most requests[i].max_drafts tokens; drafting stops early for a
  // request when `more` says so.
  virtual void Propose(std::span<const DraftRequest> requests, const DraftMore& more, std::vector<Draft>& drafts) = 0;

  virtual DraftWork last_work() const { return {}; }

  // The request ended: drop what is held for it.
  virtual void Forget(SequenceId /*sequence*/) {}

  // Drafters that continue from the target's hidden states (MTP) say so; the
  // scheduler then has the target keep them and reports every committed row.
  virtual bool wants_target_hidden() const { return false; }
  // Committed rows of `sequence` at positions [position, position + tokens.size()):
  // their tokens and the target's hidden states before its final norm
  // ([tokens.size() × hidden]). `capacity`: the sequence's KV positions.
  virtual void ObserveTarget(SequenceId /*sequence*/, int /*position*/, std::span<const TokenId> /*tokens*/, const float* /*hidden*/,
                             int /*capacity*/) {}
};

}  // namespace tandem::rt
