#include "store/gate_decision.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/input_error.hpp"
#include "stats/stats_error.hpp"

namespace tandem::store {

namespace {

// Statistical information of a two-arm comparison with n_a and n_b sessions, up to the
// (common) variance of one session's log score.
double Information(double n_a, double n_b) { return n_a * n_b / (n_a + n_b); }

struct LayoutSessions {
  std::map<std::int64_t, int> index;  // session id → position in the layout's run order
  std::map<std::string, int> planned_by_arm;
  int ran = 0;  // sessions run (complete or failed) before the first one that did not
  bool final = true;
  bool skipped = false;
};

std::map<std::string, LayoutSessions> SessionsByLayout(const CampaignRecord& r) {
  std::map<std::string, LayoutSessions> out;
  for (const SessionRecord& s : r.sessions) {  // in run order
    LayoutSessions& l = out[s.layout];
    const int position = static_cast<int>(l.index.size());
    l.index[s.id] = position;
    ++l.planned_by_arm[s.arm];
    const bool ran = s.status == SessionStatus::kComplete || s.status == SessionStatus::kFailed;
    if (ran && l.ran == position) ++l.ran;
    if (!ran) l.final = false;
    if (s.status == SessionStatus::kSkipped) l.skipped = true;
  }
  return out;
}

}  // namespace

// Every gated family must be one the campaign measured.
static void CheckSelectorsMeasured(const CampaignRecord& r, const GateDesign& design) {
  for (const FamilySelector& s : design.families) {
    if (std::none_of(r.families.begin(), r.families.end(), [&](const FamilyScores& f) { return s.Selects(f.family, f.Id()); })) {
      std::set<std::string> known;
      for (const FamilyScores& f : r.families) known.insert(f.family);
      throw InputError(fmt::format("gate: campaign {} measured no family '{}' (families: {})", r.id, s.Describe(), fmt::join(known, "; ")));
    }
  }
}

// One family in one layout: its published interval, and in `fl` the looks taken so far
// (none: `missing` says why there is no decision).
static FamilyGate GateOf(const FamilyScores& f, const LayoutSessions& sessions, const GateDesign& design, stats::FamilyLooks& fl) {
  const auto a = f.by_arm.find(design.baseline), b = f.by_arm.find(design.candidate);
  FamilyGate g{f.layout, f.family};
  g.direction = f.direction;
  g.n_baseline = a == f.by_arm.end() ? 0 : a->second.size();
  g.n_candidate = b == f.by_arm.end() ? 0 : b->second.size();
  const int total = static_cast<int>(sessions.index.size());
  std::vector<int> planned = design.looks;
  planned.erase(std::remove_if(planned.begin(), planned.end(), [&](int n) { return n <= 0 || n >= total; }), planned.end());
  planned.push_back(total);
  g.planned_looks = static_cast<int>(planned.size());
  g.final = sessions.final;
  g.stopped_early = sessions.skipped;
  if (g.n_baseline < 2 || g.n_candidate < 2) {
    const auto count = [](std::size_t n) { return fmt::format("{} session{}", n, n == 1 ? "" : "s"); };
    const std::string& arm = g.n_baseline < 2 ? design.baseline : design.candidate;
    g.missing = g.n_baseline < 2 ? fmt::format("baseline: {} (needs 2)", count(g.n_baseline))
                                 : fmt::format("candidate: {} (needs 2)", count(g.n_candidate));
    if (const auto it = f.not_estimable_by_arm.find(arm); it != f.not_estimable_by_arm.end()) {
      g.missing =
          fmt::format("not estimable: {} of the {}'s sessions had fewer than {} requests behind a p{} (or a tail of zero)", it->second,
                      arm == design.baseline ? "baseline" : "candidate", LatencyMinimumRequests(f.percentile), f.percentile);
    }
    return g;
  }
  try {
    g.interval = stats::WelchLogRatio(a->second, b->second);
  } catch (const stats::StatsError& e) {
    g.missing = e.what();
    return g;
  }
  // The scores of the sessions among the first `n` of the layout.
  const auto up_to = [&](const std::string& arm, int n) {
    std::vector<double> v;
    const std::vector<double>& scores = f.by_arm.at(arm);
    const std::vector<std::int64_t>& ids = f.sessions_by_arm.at(arm);
    for (std::size_t i = 0; i < scores.size(); ++i) {
      if (sessions.index.at(ids[i]) < n) v.push_back(scores[i]);
    }
    return v;
  };
  const double full = Information(sessions.planned_by_arm.at(design.baseline), sessions.planned_by_arm.at(design.candidate));
  for (int n : planned) {
    if (n > sessions.ran) break;  // not taken yet
    const std::vector<double> base = up_to(design.baseline, n), cand = up_to(design.candidate, n);
    if (base.size() < 2 || cand.size() < 2) continue;  // nothing to test at this look
    const bool last = n == total && sessions.final;
    const double t = last ? 1.0 : std::min(1.0, Information(static_cast<double>(base.size()), static_cast<double>(cand.size())) / full);
    if (!fl.fractions.empty() && t <= fl.fractions.back()) continue;
    try {
      // The decision reads the ratio the right way up: for a lower-is-better family a
      // regression is a rise, so it tests baseline / candidate against the threshold.
      fl.intervals.push_back(f.direction == Direction::kLowerIsBetter ? stats::WelchLogRatio(cand, base)
                                                                      : stats::WelchLogRatio(base, cand));
    } catch (const stats::StatsError&) {
      continue;  // no spread yet
    }
    fl.fractions.push_back(t);
    g.look_sessions.push_back(n);
  }
  g.fractions = fl.fractions;
  g.intervals_at_looks = fl.intervals;
  if (fl.fractions.empty()) g.missing = "no look yet had two sessions per arm";
  return g;
}

std::vector<FamilyGate> DecideGate(const CampaignRecord& r, const GateDesign& design) {
  const auto selected = [&](const FamilyScores& f) {
    return std::any_of(design.families.begin(), design.families.end(),
                       [&](const FamilySelector& s) { return s.Selects(f.family, f.Id()); });
  };
  CheckSelectorsMeasured(r, design);
  const std::map<std::string, LayoutSessions> layouts = SessionsByLayout(r);
  std::vector<FamilyGate> gates;
  std::vector<stats::FamilyLooks> looks;
  std::vector<std::size_t> decided;  // gates[decided[i]] ↔ looks[i]
  for (const FamilyScores& f : r.families) {
    // With no families named, every decode rate is gated; latency, startup and memory only where named.
    if (design.families.empty() ? !IsDecodeRate(f.metric) : !selected(f)) continue;
    const auto measured = [&](const std::string& arm) { return f.by_arm.contains(arm) || f.not_estimable_by_arm.contains(arm); };
    if (!measured(design.baseline) && !measured(design.candidate)) continue;
    stats::FamilyLooks fl;
    FamilyGate g = GateOf(f, layouts.at(f.layout), design, fl);
    if (!fl.fractions.empty()) {
      decided.push_back(gates.size());
      looks.push_back(std::move(fl));
    }
    gates.push_back(std::move(g));
  }
  const stats::DecisionRule rule{
      .threshold = 1.0 - design.max_regression, .alpha = design.alpha, .fail_only = design.rule == GateDesign::Rule::kProven, .holm = true};
  const std::vector<stats::FamilyDecision> decisions = stats::DecideFamilies(looks, rule);
  for (std::size_t i = 0; i < decisions.size(); ++i) gates[decided[i]].decision = decisions[i];
  return gates;
}

bool LayoutDecided(const std::vector<FamilyGate>& gates, const std::string& layout) {
  bool any = false;
  for (const FamilyGate& g : gates) {
    if (g.layout != layout) continue;
    any = true;
    if (!g.decision || g.decision->decision == stats::Decision::kUndecided) return false;
  }
  return any;
}

std::optional<double> RelativeHalfWidth(const FamilyGate& gate) {
  if (!gate.interval || !(gate.interval->ratio > 0)) return std::nullopt;
  return gate.interval->hi / gate.interval->ratio - 1.0;
}

std::vector<const FamilyGate*> ImpreciseFamilies(const std::vector<FamilyGate>& gates, const std::string& layout, double precision) {
  std::vector<const FamilyGate*> out;
  for (const FamilyGate& g : gates) {
    if (g.layout != layout) continue;
    const std::optional<double> w = RelativeHalfWidth(g);
    if (!w || *w > precision) out.push_back(&g);
  }
  return out;
}

}  // namespace tandem::store
