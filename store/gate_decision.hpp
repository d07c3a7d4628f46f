#pragma once

#include <optional>
#include <string>
#include <vector>

#include "stats/log_ratio.hpp"
#include "stats/sequential_gate.hpp"
#include "store/campaign_record.hpp"
#include "store/gate_design.hpp"

// The gate's statistical decision over a campaign's sessions: the looks it takes (after
// each block of a sequential campaign, or once at the end), each family's interval at
// every look, and stats::DecideFamilies on them. Shared by `tandem gate` and by `tandem
// run`, which stops a sequential layout once its gated families are decided.
namespace tandem::store {

struct FamilyGate {
  std::string layout, family;
  std::size_t n_baseline = 0, n_candidate = 0;  // sessions with scores, all looks
  Direction direction = Direction::kHigherIsBetter;
  std::optional<stats::RatioInterval> interval;   // the published Welch 95% interval (candidate / baseline), all sessions
  std::optional<stats::FamilyDecision> decision;  // absent: no look had two sessions per arm
  std::vector<double> fractions;                  // information fraction of each look taken
  std::vector<int> look_sessions;                 // sessions per layout at each look taken
  // The Welch 95% interval at each look taken, the way the decision reads it: candidate /
  // baseline, or baseline / candidate for a lower-is-better family (higher is better).
  std::vector<stats::RatioInterval> intervals_at_looks;
  int planned_looks = 1;       // looks the design takes when it runs to its end
  bool final = true;           // the layout ran every session it planned
  bool stopped_early = false;  // a sequential layout skipped the rest: its gated families were decided
  std::string missing;         // why there is no decision
};

// Throws InputError when a gated family was never measured.
std::vector<FamilyGate> DecideGate(const CampaignRecord& record, const GateDesign& design);

// Whether every gated family of `layout` is decided (pass or fail).
bool LayoutDecided(const std::vector<FamilyGate>& gates, const std::string& layout);

// How far the published interval reaches from the ratio: hi / ratio − 1 (the interval is
// symmetric in the log, so lo ≥ (1 − this)·ratio too). Absent without an interval.
std::optional<double> RelativeHalfWidth(const FamilyGate& gate);

// The gated families of `layout` whose interval is not within ±precision (or has none).
std::vector<const FamilyGate*> ImpreciseFamilies(const std::vector<FamilyGate>& gates, const std::string& layout, double precision);

}  // namespace tandem::store
