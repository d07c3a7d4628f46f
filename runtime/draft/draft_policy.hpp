#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "runtime/draft/drafter.hpp"

namespace tandem::rt {

// What one scheduler step with drafts cost: `rows` verified in one target forward
// (every request's anchor and drafts, plus prompt chunks) in `verify_s`, after the
// drafter's work (`work`, draft_s in all).
struct DraftRoundTiming {
  int rows = 0;
  double verify_s = 0;
  double draft_s = 0;
  DraftWork work;
  int drafted = 0;  // the most tokens any request drafted
};

// The step a request drafts for, apart from its own drafts: `rows` (one per decoding
// request, plus prompt chunks) and the decoding `requests`, each of which emits at
// least one token. A request's drafts lengthen the step for all of them.
struct StepShape {
  int rows = 1;
  int requests = 1;
};

// How many tokens each request drafts and verifies per step (`--draft-policy`).
class DraftPolicy {
 public:
  virtual ~DraftPolicy() = default;

  virtual std::string name() const = 0;
  virtual int MaxDrafts() const = 0;  // per request and step
  // While drafting (and before the first draft): should a request that holds
  // `so_far` draft another token?
  virtual bool More(const Draft& so_far, const StepShape& step) const = 0;
  // After drafting: how many of `draft`'s tokens to verify.
  virtual std::size_t Choose(const Draft& draft, const StepShape& step) const = 0;
  // After verification: `verified` drafts were checked, the first `accepted` matched.
  virtual void ObserveAcceptance(const Draft& draft, std::size_t verified, std::size_t accepted) = 0;
  virtual void ObserveRound(const DraftRoundTiming& timing) = 0;
  // Policy-specific figures for /v1/stats (calibration, time model, prediction error).
  virtual void Describe(nlohmann::json& out) const = 0;
};

// "fixed:K" (1 ≤ K ≤ 32) or "adaptive" (up to `adaptive_max` drafts). Throws
// std::invalid_argument naming the bad spec.
std::unique_ptr<DraftPolicy> MakeDraftPolicy(std::string_view spec, int adaptive_max = 8);

}  // namespace tandem::rt
