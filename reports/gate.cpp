#include "reports/gate.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/input_error.hpp"
#include "reports/quality.hpp"
#include "store/comparison.hpp"
#include "store/session_scores.hpp"

namespace tandem::reports {

using store::ArmRecord;
using store::CampaignRecord;
using store::CompareArms;
using store::FamilyComparison;
using store::FamilyScores;

namespace {

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

GateResult EvaluateGate(const CampaignRecord& r, const GateOptions& options) {
  GateResult g;
  const nlohmann::json& defaults = r.gate.is_object() ? r.gate : nlohmann::json::object();
  g.baseline = !options.baseline.empty() ? options.baseline : defaults.value("baseline", r.arms.empty() ? "" : r.arms[0].label);
  g.candidate = !options.candidate.empty() ? options.candidate : defaults.value("candidate", r.arms.size() < 2 ? "" : r.arms[1].label);
  for (const std::string* label : {&g.baseline, &g.candidate}) {
    if (r.Arm(*label) == nullptr) {
      std::vector<std::string> labels;
      for (const ArmRecord& a : r.arms) labels.push_back(a.label);
      throw InputError(fmt::format("{}: campaign {} has no arm '{}' (arms: {})", r.store_path, r.id, *label, fmt::join(labels, ", ")));
    }
  }
  if (g.baseline == g.candidate) throw InputError(fmt::format("gate: baseline and candidate are both '{}'", g.baseline));
  g.max_regression = options.max_regression.value_or(defaults.value("max_regression", 0.03));
  if (!(g.max_regression >= 0 && g.max_regression < 1)) {
    throw InputError(fmt::format("gate: max regression {} is outside [0, 1)", g.max_regression));
  }
  g.rule =
      options.rule.value_or(defaults.value("rule", std::string("proven")) == "noninferior" ? GateRule::kNoninferior : GateRule::kProven);
  std::vector<std::string> wanted = options.families;
  if (wanted.empty() && defaults.contains("families")) wanted = defaults["families"].get<std::vector<std::string>>();

  const std::vector<FamilyScores>& families = r.families;
  std::set<std::string> known;
  for (const FamilyScores& f : families) known.insert(f.family);
  for (const std::string& f : wanted) {
    if (!known.contains(f)) {
      throw InputError(fmt::format("gate: campaign {} measured no family '{}' (families: {})", r.id, f, fmt::join(known, "; ")));
    }
  }
  const double threshold = 1.0 - g.max_regression;
  for (const FamilyComparison& c : CompareArms(families, g.baseline, g.candidate)) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), c.scores->family) == wanted.end()) continue;
    GateFamily f{c.scores->layout, c.scores->family, {}, {}, {}, c.n_baseline, c.n_candidate, Verdict::kInconclusive, c.missing};
    if (c.interval) {
      f.ratio = c.interval->ratio;
      f.lo = c.interval->lo;
      f.hi = c.interval->hi;
      if (c.interval->hi < threshold) {
        f.verdict = Verdict::kFail;
        f.reason = fmt::format("the whole interval is below {:.3f}: a regression beyond {:.1f}%", threshold, 100 * g.max_regression);
      } else if (g.rule == GateRule::kProven || c.interval->lo > threshold) {
        f.verdict = Verdict::kPass;
        f.reason = g.rule == GateRule::kProven ? "no regression beyond the threshold is proven"
                                               : fmt::format("the whole interval is above {:.3f}", threshold);
      } else {
        f.reason = fmt::format("the interval reaches below {:.3f}: noninferiority not shown (more sessions?)", threshold);
      }
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

std::string GateResult::Text() const {
  std::string out = fmt::format(
      "gate: {} vs {} (baseline), rule {}, max regression {:.1f}%: Welch 95% interval of the ratio of geometric "
      "means over sessions\n",
      candidate, baseline, RuleName(rule), 100 * max_regression);
  std::size_t width = 0, lwidth = 0;
  for (const GateFamily& f : families) {
    width = std::max(width, f.family.size());
    lwidth = std::max(lwidth, f.layout.size());
  }
  for (const GateFamily& f : families) {
    const std::string figure = f.ratio ? fmt::format("{:.3f} ({:.3f}–{:.3f}) n={}/{}", *f.ratio, *f.lo, *f.hi, f.n_baseline, f.n_candidate)
                                       : fmt::format("— n={}/{}", f.n_baseline, f.n_candidate);
    out += fmt::format("{:<12} {:<{}}  {:<{}}  {:<34} {}\n", ToString(f.verdict), f.layout, lwidth, f.family, width, figure, f.reason);
  }
  for (const std::string& q : quality_failures) out += fmt::format("fail         quality: {}\n", q);
  for (const std::string& q : quality_doubts) out += fmt::format("inconclusive quality: {}\n", q);
  out += fmt::format("verdict: {}\n", ToString(verdict));
  return out;
}

nlohmann::json GateResult::Json() const {
  nlohmann::json fams = nlohmann::json::array();
  for (const GateFamily& f : families) {
    nlohmann::json j = {{"layout", f.layout},
                        {"family", f.family},
                        {"n_baseline", f.n_baseline},
                        {"n_candidate", f.n_candidate},
                        {"verdict", ToString(f.verdict)},
                        {"reason", f.reason}};
    j["ratio"] = f.ratio ? nlohmann::json(*f.ratio) : nlohmann::json(nullptr);
    j["lo"] = f.lo ? nlohmann::json(*f.lo) : nlohmann::json(nullptr);
    j["hi"] = f.hi ? nlohmann::json(*f.hi) : nlohmann::json(nullptr);
    fams.push_back(std::move(j));
  }
  return {{"baseline", baseline},
          {"candidate", candidate},
          {"rule", RuleName(rule)},
          {"max_regression", max_regression},
          {"level", 0.95},
          {"method", "welch"},
          {"families", fams},
          {"quality_failures", quality_failures},
          {"quality_doubts", quality_doubts},
          {"verdict", ToString(verdict)},
          {"exit_code", ExitCode()}};
}

}  // namespace tandem::reports
