#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/campaign_record.hpp"

// `tandem gate`: a campaign turned into pass / fail / inconclusive for CI.
namespace tandem::reports {

enum class GateRule {
  kProven,       // fail only when a family's whole interval lies below 1 − max_regression
  kNoninferior,  // pass only when a family's whole interval lies above 1 − max_regression
};

struct GateOptions {
  std::string baseline, candidate;       // empty: the campaign's gate section, else arms 0 and 1
  std::vector<std::string> families;     // empty: the campaign's, else every family measured
  std::optional<double> max_regression;  // default: the campaign's, else 0.03
  std::optional<GateRule> rule;          // default: the campaign's, else proven
};

enum class Verdict { kPass, kFail, kInconclusive };
std::string_view ToString(Verdict verdict);  // "pass" | "fail" | "inconclusive"

struct GateFamily {
  std::string layout, family;
  std::optional<double> ratio, lo, hi;
  std::size_t n_baseline = 0, n_candidate = 0;
  Verdict verdict = Verdict::kInconclusive;
  std::string reason;
};

struct GateResult {
  std::string baseline, candidate;
  GateRule rule = GateRule::kProven;
  double max_regression = 0.03;
  std::vector<GateFamily> families;
  std::vector<std::string> quality_failures, quality_doubts;
  Verdict verdict = Verdict::kInconclusive;

  int ExitCode() const;  // 0 pass, 1 fail, 2 inconclusive
  std::string Text() const;
  nlohmann::json Json() const;
};

// Throws InputError for bad options: an unknown arm or family, a bad setting.
GateResult EvaluateGate(const store::CampaignRecord& record, const GateOptions& options);

}  // namespace tandem::reports
