#include "reports/gate.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/input_error.hpp"
#include "reports/quality.hpp"
#include "stats/sessions_needed.hpp"
#include "stats/stats_error.hpp"
#include "store/gate_decision.hpp"
#include "store/session_scores.hpp"

namespace tandem::reports {

using store::ArmRecord;
using store::CampaignRecord;

namespace {

// Beyond this, an "add N sessions" hint is no help: the ratio sits on the threshold.
constexpr std::size_t kMostSessionsWorthSuggesting = 1000;

std::string_view RuleName(GateRule rule) { return rule == GateRule::kProven ? "proven" : "noninferior"; }

}  // namespace

std::string_view ToString(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass:
      return "pass";
    case Verdict::kFail:
      return "fail";
    case Verdict::kInconclusive:
      return "inconclusive";
  }
  return "?";
}

int GateResult::ExitCode() const { return verdict == Verdict::kPass ? 0 : verdict == Verdict::kFail ? 1 : 2; }

namespace {

// The stored design with the command line's overrides, checked; the result's settings from it.
store::GateDesign ResolveDesign(const CampaignRecord& r, const GateOptions& options, GateResult& g) {
  store::GateDesign design = r.gate;
  g.baseline = !options.baseline.empty() ? options.baseline : design.baseline;
  g.candidate = !options.candidate.empty() ? options.candidate : design.candidate;
  for (const std::string* label : {&g.baseline, &g.candidate}) {
    if (r.Arm(*label) == nullptr) {
      std::vector<std::string> labels;
      for (const ArmRecord& a : r.arms) labels.push_back(a.label);
      throw InputError(fmt::format("{}: campaign {} has no arm '{}' (arms: {})", r.store_path, r.id, *label, fmt::join(labels, ", ")));
    }
  }
  if (g.baseline == g.candidate) throw InputError(fmt::format("gate: baseline and candidate are both '{}'", g.baseline));
  g.max_regression = options.max_regression.value_or(design.max_regression);
  if (!(g.max_regression >= 0 && g.max_regression < 1)) {
    throw InputError(fmt::format("gate: max regression {} is outside [0, 1)", g.max_regression));
  }
  g.rule = options.rule.value_or(design.rule);
  if (!options.families.empty()) {
    design.families.clear();
    for (const std::string& label : options.families) design.families.push_back({label, std::nullopt});
  }
  g.sequential = design.sequential;
  g.precision = design.precision;
  g.block = design.block;
  g.arms = static_cast<int>(r.arms.size());
  g.alpha = design.alpha;
  design.baseline = g.baseline;
  design.candidate = g.candidate;
  design.max_regression = g.max_regression;
  design.rule = g.rule;
  return design;
}

// How many sessions per arm would decide an undecided family, at the spread seen so far.
std::size_t SessionsNeededFor(const store::FamilyGate& d, double threshold) {
  if (!d.interval || d.interval->standard_error <= 0) return 0;
  const double n_a = static_cast<double>(d.n_baseline), n_b = static_cast<double>(d.n_candidate);
  const double sd = d.interval->standard_error / std::sqrt(1 / n_a + 1 / n_b);
  const double better = d.direction == store::Direction::kLowerIsBetter ? 1.0 / d.interval->ratio : d.interval->ratio;
  try {
    return stats::SessionsNeeded(sd, better / threshold - 1.0);
  } catch (const stats::StatsError&) {
    return 0;  // the ratio sits on the threshold: no number of sessions decides it
  }
}

// The verdict and its reason, from the family's decision.
void Explain(const store::FamilyGate& d, const GateResult& g, const store::GateDesign& design, GateFamily& f) {
  const stats::FamilyDecision& x = *d.decision;
  // The decision reads intervals the right way up (store::DecideGate): for a lower-is-better
  // family, baseline / candidate; shown as candidate / baseline, its bound is 1 / T.
  const double threshold = 1.0 - g.max_regression;
  const bool lower = d.direction == store::Direction::kLowerIsBetter;
  const double bound = lower ? 1.0 / threshold : threshold;
  const bool adjusted = x.fail_level < design.alpha - 1e-12 || x.pass_level < design.alpha - 1e-12;
  const std::string at_look = g.sequential || f.planned_looks > 1
                                  ? fmt::format(" at look {} of {} (information {:.2f})", f.look, f.planned_looks, f.fraction)
                                  : std::string();
  const std::string levels = adjusted ? fmt::format("; one-sided levels: pass {:.4f}, fail {:.4f}", x.pass_level, x.fail_level) : "";
  switch (x.decision) {
    case stats::Decision::kFail:
      f.verdict = Verdict::kFail;
      f.reason = fmt::format("a regression beyond {:.1f}% is shown{} (p {:.2g} < {:.4f}{})", 100 * g.max_regression, at_look, x.test.p_fail,
                             x.fail_level, g.gated > 1 ? fmt::format(", Holm over {} families", g.gated) : "");
      break;
    case stats::Decision::kPass:
      f.verdict = Verdict::kPass;
      f.reason = g.rule == GateRule::kProven && x.test.p_pass >= x.pass_level
                     ? fmt::format("no regression beyond {:.1f}% is proven (rule proven){}", 100 * g.max_regression, levels)
                     : fmt::format("the interval lies {} {:.3f}{}{}", lower ? "below" : "above", bound, at_look, levels);
      break;
    case stats::Decision::kUndecided:
      f.stopped_early = d.stopped_early;
      f.reason = fmt::format("the interval reaches across {:.3f}{}{}", bound, at_look,
                             d.stopped_early ? "; the layout stopped once its gated families were decided"
                             : !d.final      ? "; the campaign has sessions still to run"
                                             : "");
      f.sessions_needed = SessionsNeededFor(d, threshold);
      break;
  }
  // The interval the decision was taken on, when it is not the published 95% one.
  if (x.decision != stats::Decision::kUndecided && (adjusted || f.planned_looks > 1)) {
    const double level = x.decision == stats::Decision::kFail ? x.fail_level : x.pass_level;
    const auto [lo, hi] = stats::IntervalAtLevel(d.intervals_at_looks[x.look], level);
    f.decision_lo = lower ? 1.0 / hi : lo;
    f.decision_hi = lower ? 1.0 / lo : hi;
  }
}

GateFamily GateFamilyOf(const store::FamilyGate& d, const GateResult& g, const store::GateDesign& design) {
  GateFamily f{d.layout, d.family, d.direction, {}, {}, {}, d.n_baseline, d.n_candidate, Verdict::kInconclusive, d.missing};
  f.planned_looks = d.planned_looks;
  if (d.interval) {
    f.ratio = d.interval->ratio;
    f.lo = d.interval->lo;
    f.hi = d.interval->hi;
    f.half_width = store::RelativeHalfWidth(d);
  }
  if (!d.decision) return f;
  const stats::FamilyDecision& x = *d.decision;
  f.look = static_cast<int>(x.look) + 1;
  f.fraction = d.fractions[x.look];
  f.pass_level = x.pass_level;
  f.fail_level = x.fail_level;
  f.fail_budget = x.fail_budget;
  f.p_pass = x.test.p_pass;
  f.p_fail = x.test.p_fail;
  Explain(d, g, design, f);
  return f;
}

// The breaches of the campaign's GPU conditions in a layout's complete sessions of the two
// arms, as "session N: …": a layout that ran outside them cannot be judged.
std::vector<std::string> ConditionBreaches(const CampaignRecord& r, const std::string& layout, const GateResult& g) {
  std::vector<std::string> out;
  for (const store::SessionRecord& s : r.sessions) {
    if (s.layout != layout || (s.arm != g.baseline && s.arm != g.candidate) || s.status != store::SessionStatus::kComplete) continue;
    for (const std::string& b : s.conditions.breaches) out.push_back(fmt::format("session {}: {}", s.order_index + 1, b));
  }
  return out;
}

}  // namespace

GateResult EvaluateGate(const CampaignRecord& r, const GateOptions& options) {
  GateResult g;
  g.store = r.store_path;
  g.campaign = r.id;
  const store::GateDesign design = ResolveDesign(r, options, g);
  const std::vector<store::FamilyGate> decided = store::DecideGate(r, design);
  for (const store::FamilyGate& d : decided) g.gated += d.decision ? 1 : 0;
  for (const store::FamilyGate& d : decided) {
    GateFamily f = GateFamilyOf(d, g, design);
    const std::vector<std::string> breaches = ConditionBreaches(r, f.layout, g);
    if (!breaches.empty()) {
      f.verdict = Verdict::kInconclusive;
      f.reason = fmt::format("the layout ran outside the campaign's GPU conditions ({}{}); the figures stand, the verdict does not",
                             breaches.front(), breaches.size() > 1 ? fmt::format(", and {} more", breaches.size() - 1) : "");
    }
    g.families.push_back(std::move(f));
  }
  if (g.families.empty()) g.quality_doubts.push_back("no family was measured for both arms");
  const PairQuality q = AssessPair(r, g.baseline, g.candidate);
  g.quality_failures = q.failures;
  g.quality_doubts.insert(g.quality_doubts.end(), q.doubts.begin(), q.doubts.end());

  const bool any_fail = !g.quality_failures.empty() ||
                        std::any_of(g.families.begin(), g.families.end(), [](const GateFamily& f) { return f.verdict == Verdict::kFail; });
  const bool any_doubt = !g.quality_doubts.empty() || std::any_of(g.families.begin(), g.families.end(),
                                                                  [](const GateFamily& f) { return f.verdict == Verdict::kInconclusive; });
  g.verdict = any_fail ? Verdict::kFail : any_doubt ? Verdict::kInconclusive : Verdict::kPass;
  return g;
}

std::string GateResult::ExtendCommand(std::size_t sessions_per_arm, std::size_t have_per_arm) const {
  // A block (one repetition of the order) gives each arm block / arms sessions.
  const std::size_t per_block = std::max<std::size_t>(1, static_cast<std::size_t>(block) / static_cast<std::size_t>(std::max(1, arms)));
  const std::size_t more = sessions_per_arm > have_per_arm ? sessions_per_arm - have_per_arm : 0;
  const std::size_t blocks = (more + per_block - 1) / per_block;
  return fmt::format("tandem run --resume {} --extend {}", store, std::max<std::size_t>(1, blocks) * static_cast<std::size_t>(block));
}

std::string GateResult::Text() const {
  std::string out = fmt::format(
      "gate: {} vs {} (baseline), rule {}, T = 1 − max regression = {:.3f}: Welch 95% interval of the ratio of geometric "
      "means over sessions{}{}\n",
      candidate, baseline, RuleName(rule), 1.0 - max_regression,
      sequential ? "; sequential (O'Brien–Fleming alpha spending over the looks)" : "",
      precision > 0 ? fmt::format(", stopping once decided and within ±{:.1f}%", 100 * precision) : "");
  if (gated > 1) {
    out += fmt::format("{} gated families: the fail tests share alpha {} by Holm's step-down (levels below); pass needs every family\n",
                       gated, alpha);
  }
  // A lower-is-better family says so: its ratio passes below 1 / T.
  const auto label = [](const GateFamily& f) {
    return f.direction == store::Direction::kLowerIsBetter ? f.family + " (lower is better)" : f.family;
  };
  std::size_t width = 0, lwidth = 0;
  for (const GateFamily& f : families) {
    width = std::max(width, label(f).size());
    lwidth = std::max(lwidth, f.layout.size());
  }
  for (const GateFamily& f : families) {
    const std::string figure = f.ratio ? fmt::format("{:.3f} ({:.3f}–{:.3f}) n={}/{}", *f.ratio, *f.lo, *f.hi, f.n_baseline, f.n_candidate)
                                       : fmt::format("— n={}/{}", f.n_baseline, f.n_candidate);
    out += fmt::format("{:<12} {:<{}}  {:<{}}  {:<34} {}\n", ToString(f.verdict), f.layout, lwidth, label(f), width, figure, f.reason);
    const std::string indent(13, ' ');
    if (f.decision_lo) {
      out += fmt::format("{}decided on the interval ({:.3f}–{:.3f}) at look {} (one-sided level {:.4f})\n", indent, *f.decision_lo,
                         *f.decision_hi, f.look, f.verdict == Verdict::kFail ? f.fail_level : f.pass_level);
    }
    // The campaign asked for this precision; a layout that ran out of sessions may miss it.
    if (precision > 0 && f.half_width && *f.half_width > precision) {
      out += fmt::format("{}the interval reaches ±{:.1f}% from the ratio: wider than the campaign's precision (±{:.1f}%)\n", indent,
                         100 * *f.half_width, 100 * precision);
    }
    if (f.verdict == Verdict::kInconclusive && f.ratio && f.stopped_early) {
      out += fmt::format("{}to decide: gate this family in a campaign of its own (a decided sequential layout is not extended)\n", indent);
    } else if (f.verdict == Verdict::kInconclusive && f.ratio) {
      if (f.sessions_needed > kMostSessionsWorthSuggesting) {
        out += fmt::format("{}to decide: more than {} sessions per arm at this spread: the ratio ({:.3f}) is too close to the threshold\n",
                           indent, kMostSessionsWorthSuggesting, *f.ratio);
      } else if (f.sessions_needed > 0) {
        const std::size_t have = std::min(f.n_baseline, f.n_candidate);
        out += fmt::format("{}to decide: about {} sessions per arm at this spread (now {}): {}\n", indent, f.sessions_needed, have,
                           ExtendCommand(f.sessions_needed, have));
      } else {
        out += fmt::format("{}to decide: the ratio sits on the threshold; no number of sessions will separate them\n", indent);
      }
    }
  }
  for (const std::string& q : quality_failures) out += fmt::format("fail         quality: {}\n", q);
  for (const std::string& q : quality_doubts) out += fmt::format("inconclusive quality: {}\n", q);
  out += fmt::format("verdict: {}\n", ToString(verdict));
  return out;
}

nlohmann::json GateResult::Json() const {
  const auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  nlohmann::json fams = nlohmann::json::array();
  for (const GateFamily& f : families) {
    nlohmann::json j = {{"layout", f.layout},
                        {"family", f.family},
                        {"better", f.direction == store::Direction::kLowerIsBetter ? "lower" : "higher"},
                        {"n_baseline", f.n_baseline},
                        {"n_candidate", f.n_candidate},
                        {"verdict", ToString(f.verdict)},
                        {"reason", f.reason},
                        {"ratio", opt(f.ratio)},
                        {"lo", opt(f.lo)},
                        {"hi", opt(f.hi)},
                        {"look", f.look},
                        {"planned_looks", f.planned_looks},
                        {"information_fraction", f.fraction},
                        {"pass_level", f.pass_level},
                        {"fail_level", f.fail_level},
                        {"fail_budget", f.fail_budget},
                        {"p_pass", f.p_pass},
                        {"p_fail", f.p_fail},
                        {"decision_lo", opt(f.decision_lo)},
                        {"decision_hi", opt(f.decision_hi)}};
    if (f.verdict == Verdict::kInconclusive && !f.stopped_early && f.sessions_needed > 0 &&
        f.sessions_needed <= kMostSessionsWorthSuggesting) {
      j["sessions_needed_per_arm"] = f.sessions_needed;
      j["extend_command"] = ExtendCommand(f.sessions_needed, std::min(f.n_baseline, f.n_candidate));
    }
    fams.push_back(std::move(j));
  }
  return {{"baseline", baseline},
          {"candidate", candidate},
          {"rule", RuleName(rule)},
          {"max_regression", max_regression},
          {"threshold", 1.0 - max_regression},
          {"level", 0.95},
          {"method", "welch"},
          {"sequential", sequential},
          {"precision", precision > 0 ? nlohmann::json(precision) : nlohmann::json(nullptr)},
          {"multiplicity", gated > 1 ? "holm" : "none"},
          {"gated_families", gated},
          {"families", fams},
          {"quality_failures", quality_failures},
          {"quality_doubts", quality_doubts},
          {"verdict", ToString(verdict)},
          {"exit_code", ExitCode()}};
}

}  // namespace tandem::reports
