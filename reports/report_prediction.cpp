// The draft policy's round-time prediction error per workload, as the reference report
// states it: from the lifetime sums in /v1/stats `draft.round_time_prediction`, read
// before and after each workload, the mean absolute relative error and the mean error.
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "reports/report_sections.hpp"

namespace tandem::reports::sections {

namespace {

struct Sums {
  double rounds = 0, abs_rel = 0, error_us = 0;
  bool backwards = false;
};

// The prediction sums of one /v1/stats body; false when the server reports none.
bool Read(const nlohmann::json& stats, Sums& out) {
  if (!stats.is_object() || !stats.contains("draft") || !stats["draft"].is_object()) return false;
  const nlohmann::json& p = stats["draft"].value("round_time_prediction", nlohmann::json());
  if (!p.is_object() || !p.value("rounds", nlohmann::json()).is_number()) return false;
  out.rounds = p.value("rounds", 0.0);
  out.abs_rel = p.value("abs_rel_error_sum", 0.0);
  out.error_us = p.value("error_us_sum", 0.0);
  return true;
}

}  // namespace

void PredictionError(const store::CampaignRecord& r, MarkdownDoc& d) {
  std::vector<std::string> workloads;
  std::map<std::string, std::map<std::pair<std::string, std::string>, Sums>> sums;  // workload → (layout, arm) → sums
  for (const store::WorkloadRecord& w : r.workloads) {
    const store::SessionRecord* s = r.Session(w.session);
    if (w.warmup || s == nullptr || s->status != "complete") continue;
    Sums before, after;
    if (!Read(w.stats_before, before) || !Read(w.stats_after, after)) continue;
    if (!sums.contains(w.name)) workloads.push_back(w.name);
    Sums& t = sums[w.name][{s->layout, s->arm}];
    if (after.rounds < before.rounds || after.abs_rel < before.abs_rel) {
      t.backwards = true;  // the server restarted between the reads
      continue;
    }
    t.rounds += after.rounds - before.rounds;
    t.abs_rel += after.abs_rel - before.abs_rel;
    t.error_us += after.error_us - before.error_us;
  }
  bool any = false;
  for (const auto& [w, columns] : sums) {
    for (const auto& [c, t] : columns) any = any || t.rounds > 0;
  }
  if (!any) return;
  d.Line("## Round-time prediction");
  d.Blank();
  d.Line(
      "How well the draft policy predicted each round's time (drafting + verification), from the lifetime sums of `/v1/stats` "
      "`draft.round_time_prediction` read around each workload: mean absolute relative error, then the mean error (predicted − "
      "measured) in µs, over the rounds the policy predicted (after its first 8).");
  d.Blank();
  const std::vector<Column> columns = LayoutArmColumns(r);
  std::vector<std::string> head = {"workload"};
  for (const Column& c : columns) head.push_back(c.head);
  d.Line("{}", Header(head));
  for (const std::string& w : workloads) {
    std::vector<std::string> row = {w};
    for (const Column& c : columns) {
      const auto it = sums[w].find({c.layout, c.arm});
      if (it == sums[w].end() || (it->second.rounds <= 0 && !it->second.backwards)) {
        row.push_back(kNone);
      } else if (it->second.backwards) {
        row.push_back("error: counters went backwards");
      } else {
        const Sums& t = it->second;
        row.push_back(fmt::format("{:.1f}% · {:+.0f} µs ({} rounds)", 100 * t.abs_rel / t.rounds, t.error_us / t.rounds, t.rounds));
      }
    }
    d.Line("{}", Row(row));
  }
  d.Blank();
}

}  // namespace tandem::reports::sections
