// The report's Prefill section: per workload, layout and arm the matrix the reference
// release report publishes (retained base rows × new-token columns, the median rate of the
// clean children), each cell saying how many of its children were clean or unverified;
// then the A/B table of every cell and the pooled family (higher is better).
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "reports/report_sections.hpp"
#include "stats/descriptive.hpp"

namespace tandem::reports::sections {

namespace {

using store::CampaignRecord;
using store::FamilyScores;

// One cell of one arm in one layout: its children (the measured rounds, the last try of each).
struct CellCount {
  int children = 0, clean = 0, unverified = 0, retries = 0;
};
using CellKey = std::tuple<std::string, std::string, std::string, int, int>;  // workload, layout, arm, base, new

std::map<CellKey, CellCount> CountCells(const CampaignRecord& r) {
  std::map<CellKey, CellCount> out;
  for (const store::SampleRecord& x : r.samples) {
    const store::WorkloadRecord* w = r.Workload(x.run);
    const store::SessionRecord* s = r.Session(x.session);
    if (w == nullptr || s == nullptr || w->kind != store::WorkloadKind::kPrefill || x.repeat < 0) continue;
    if (s->status != store::SessionStatus::kComplete) continue;
    CellCount& c = out[{x.workload, s->layout, s->arm, x.context, x.new_tokens}];
    if (x.role == "retry") ++c.retries;
    if (x.role != "child") continue;
    ++c.children;
    c.unverified += x.unverified ? 1 : 0;
    const auto check = x.checks.find("prefill_cache");
    c.clean += x.valid && check != x.checks.end() && check->second ? 1 : 0;
  }
  return out;
}

std::string CellText(const FamilyScores* f, const std::string& arm, const CellCount& n) {
  if (n.children == 0) return std::string(kNone);
  if (n.unverified == n.children) return "unverified (no cached tokens in usage)";
  std::string rate = std::string(kNone);
  if (f != nullptr) {
    if (const auto it = f->by_arm.find(arm); it != f->by_arm.end() && !it->second.empty()) rate = Rate(stats::Median(it->second));
  }
  std::string text = n.clean == n.children ? rate : fmt::format("{} ({} of {} clean)", rate, n.clean, n.children);
  if (n.retries > 0) text += fmt::format(", {} retried", n.retries);
  return text;
}

const FamilyScores* CellFamily(const CampaignRecord& r, const std::string& workload, const std::string& layout, int base, int add) {
  for (const FamilyScores& f : r.families) {
    if (f.metric == store::FamilyMetric::kPrefill && f.workload == workload && f.layout == layout && f.context == base &&
        f.new_tokens == add) {
      return &f;
    }
  }
  return nullptr;
}

// Each prefill workload once (the first session's run of it), in run order.
std::vector<const store::WorkloadRecord*> PrefillWorkloads(const CampaignRecord& r) {
  std::vector<const store::WorkloadRecord*> out;
  std::set<std::string> seen;
  for (const store::WorkloadRecord& w : r.workloads) {
    if (w.kind == store::WorkloadKind::kPrefill && !w.warmup && seen.insert(w.name).second) out.push_back(&w);
  }
  return out;
}

}  // namespace

void Prefill(const CampaignRecord& r, MarkdownDoc& d) {
  const std::map<CellKey, CellCount> counts = CountCells(r);
  if (counts.empty()) return;
  d.Line("## Prefill");
  d.Blank();
  d.Line(
      "Each cell: a parent prompt of exactly the base's tokens, then a child adding exactly the new tokens; its rate is new tokens / "
      "seconds to its first token; a session's score is the median over its clean children (the base cached and the new tokens "
      "not, by the server's usage), and the cell shows the median of the arm's session scores, tok/s. A cell says how many children were "
      "clean where some were not; \"unverified\" where the server's usage "
      "gave no cached-token count (not scored).");
  d.Blank();
  for (const store::WorkloadRecord* w : PrefillWorkloads(r)) {
    for (const Column& c : LayoutArmColumns(r)) {
      d.Line("### {} · {}", w->name, c.head);
      d.Blank();
      std::vector<std::string> head = {"base"};
      for (int add : w->settings.new_tokens) head.push_back(fmt::format("+{}", add));
      d.Line("{}", Header(head));
      for (int base : w->settings.bases) {
        std::vector<std::string> row = {fmt::format("{}", base)};
        for (int add : w->settings.new_tokens) {
          const auto n = counts.find({w->name, c.layout, c.arm, base, add});
          row.push_back(n == counts.end() ? std::string(kNone) : CellText(CellFamily(r, w->name, c.layout, base, add), c.arm, n->second));
        }
        d.Line("{}", Row(row));
      }
      d.Blank();
    }
  }
  DirectedAbTables(
      r, d, [](const FamilyScores& f) { return store::IsPrefill(f.metric); }, "prefill",
      "A session's score per cell is the median rate of its clean children; the pooled row is the geometric mean of a session's cells.",
      store::Direction::kHigherIsBetter);
}

}  // namespace tandem::reports::sections
