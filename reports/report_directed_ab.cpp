// The A/B tables of the families with sections of their own (latency, startup, memory:
// lower is better; the prefill matrix: higher), each saying which way is better, so a bold
// ratio says whether it is a gain.
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "reports/report_sections.hpp"
#include "stats/log_ratio.hpp"
#include "stats/stats_error.hpp"

namespace tandem::reports::sections {

namespace {

// One family in one layout: the ratio and its interval (bold, and which way, when it
// excludes 1), or why there is none.
std::string AbCell(const store::FamilyScores& f, const std::string& baseline, const std::string& candidate) {
  const bool lower = f.direction == store::Direction::kLowerIsBetter;
  const auto a = f.by_arm.find(baseline), b = f.by_arm.find(candidate);
  const std::size_t n_a = a == f.by_arm.end() ? 0 : a->second.size(), n_b = b == f.by_arm.end() ? 0 : b->second.size();
  if (n_a < 2 || n_b < 2) {
    const bool unestimable = f.not_estimable_by_arm.contains(n_a < 2 ? baseline : candidate);
    return unestimable ? fmt::format("not estimable (p{} needs ≥ {} requests a session) n={}/{}", f.percentile,
                                     store::LatencyMinimumRequests(f.percentile), n_a, n_b)
                       : fmt::format("{} n={}/{}", kNone, n_a, n_b);
  }
  try {
    const stats::RatioInterval i = stats::WelchLogRatio(a->second, b->second);
    const std::string cell = fmt::format("{:.3f} ({:.3f}–{:.3f})", i.ratio, i.lo, i.hi);
    const std::string n = fmt::format(" n={}/{}", n_a, n_b);
    return i.excludes_one() ? fmt::format("**{}** {}{}", cell, (i.ratio < 1) == lower ? "better" : "worse", n) : cell + n;
  } catch (const stats::StatsError& e) {
    return Cell(e.what());
  }
}

}  // namespace

void DirectedAbTables(const store::CampaignRecord& r, MarkdownDoc& d, const std::function<bool(const store::FamilyScores&)>& pick,
                      const std::string& what, const std::string& note, store::Direction direction) {
  std::vector<std::string> rows;
  std::map<std::string, std::map<std::string, const store::FamilyScores*>> by_label;  // label → layout → family
  for (const store::FamilyScores& f : r.families) {
    if (!pick(f)) continue;
    if (!by_label.contains(f.family)) rows.push_back(f.family);
    by_label[f.family][f.layout] = &f;
  }
  if (rows.empty() || r.arms.size() < 2) return;
  const std::string& baseline = r.arms[0].label;
  for (std::size_t k = 1; k < r.arms.size(); ++k) {
    const std::string& candidate = r.arms[k].label;
    d.Line("### A/B: {} vs {}, {} ({})", candidate, baseline, what,
           direction == store::Direction::kLowerIsBetter ? "lower is better; a ratio below 1 is a gain"
                                                         : "higher is better; a ratio above 1 is a gain");
    d.Blank();
    d.Line(
        "Each cell: the ratio of geometric means of session scores ({} / {}) with its Welch 95% interval on the log scores; **bold** "
        "when the interval excludes 1, with whether that is better or worse. {}",
        candidate, baseline, note);
    d.Blank();
    std::vector<std::string> head = {"family"};
    for (const store::LayoutRecord& l : r.layouts) head.push_back(l.name);
    d.Line("{}", Header(head));
    for (const std::string& label : rows) {
      std::vector<std::string> row = {Cell(label)};
      for (const store::LayoutRecord& l : r.layouts) {
        const auto it = by_label[label].find(l.name);
        row.push_back(it == by_label[label].end() ? std::string(kNone) : AbCell(*it->second, baseline, candidate));
      }
      d.Line("{}", Row(row));
    }
    d.Blank();
  }
}

}  // namespace tandem::reports::sections
