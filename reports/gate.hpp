#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/campaign_record.hpp"
#include "store/family_id.hpp"

// `tandem gate`: a campaign turned into pass / fail / inconclusive for CI.
namespace tandem::reports {

// kNoninferior (the default): pass only when a family's interval lies above T = 1 −
// max_regression, fail when it lies below, inconclusive otherwise; kProven: fail only on
// proven regressions (interval below T), everything else passes.
using GateRule = store::GateDesign::Rule;

struct GateOptions {
  std::string baseline, candidate;       // empty: the campaign's gate section, else arms 0 and 1
  std::vector<std::string> families;     // empty: the campaign's, else every family measured
  std::optional<double> max_regression;  // default: the campaign's, else 0.03
  std::optional<GateRule> rule;          // default: the campaign's, else noninferior
};

enum class Verdict { kPass, kFail, kInconclusive };
std::string_view ToString(Verdict verdict);  // "pass" | "fail" | "inconclusive"

struct GateFamily {
  std::string layout, family;
  // Which way is better. The ratio and every interval below are candidate / baseline of the
  // measured value either way; a lower-is-better family passes below 1 / T, not above T.
  store::Direction direction = store::Direction::kHigherIsBetter;
  std::optional<double> ratio, lo, hi;  // the Welch 95% interval over every session
  std::size_t n_baseline = 0, n_candidate = 0;
  Verdict verdict = Verdict::kInconclusive;
  std::string reason;
  // The decision (absent without two sessions per arm): the look it was taken at (1-based)
  // of the looks the design takes, and the one-sided levels the tests used there.
  int look = 0, planned_looks = 1;
  double fraction = 1;  // information fraction at that look
  double pass_level = 0, fail_level = 0, fail_budget = 0, p_pass = 1, p_fail = 1;
  std::optional<double> decision_lo, decision_hi;  // the interval at those levels, at that look
  std::size_t sessions_needed = 0;                 // per arm, at the observed spread (inconclusive only)
  bool stopped_early = false;                      // its sequential layout stopped: no --extend adds to it
  std::optional<double> half_width;                // hi / ratio − 1 of the interval over every session (store::RelativeHalfWidth)
};

struct GateResult {
  std::string store, baseline, candidate;
  std::int64_t campaign = 0;
  GateRule rule = GateRule::kNoninferior;
  bool sequential = false;  // the campaign looks after every block
  double precision = 0;     // its `sessions: precision` (0: none): it also waited for intervals within ±this
  std::size_t gated = 0;    // families whose fail tests share alpha (Holm)
  int block = 0;            // sessions per block (for the extend command)
  int arms = 2;             // arms in the campaign's order
  double alpha = 0.025;     // one-sided level of each test
  double max_regression = 0.03;
  std::vector<GateFamily> families;
  std::vector<std::string> quality_failures, quality_doubts;
  Verdict verdict = Verdict::kInconclusive;

  int ExitCode() const;  // 0 pass, 1 fail, 2 inconclusive
  // `tandem run --resume STORE --extend N`: whole blocks that bring each arm to `sessions_per_arm`.
  std::string ExtendCommand(std::size_t sessions_per_arm, std::size_t have_per_arm) const;
  std::string Text() const;
  nlohmann::json Json() const;
};

// Throws InputError for bad options: an unknown arm or family, a bad setting.
GateResult EvaluateGate(const store::CampaignRecord& record, const GateOptions& options);

}  // namespace tandem::reports
