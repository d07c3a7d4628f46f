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

}  // namespace

void PredictionError(const store::CampaignRecord& r, MarkdownDoc& d) {
  std::vector<std::string> workloads;
  std::map<std::string, std::map<std::pair<std::string, std::string>, Sums>> sums;  // workload → (layout, arm) → sums
  for (const store::WorkloadRecord& w : r.workloads) {
    const store::SessionRecord* s = r.Session(w.session);
    if (w.warmup || s == nullptr || s->status != store::SessionStatus::kComplete) continue;
    if (!w.prediction_before || !w.prediction_after) continue;
    const store::PredictionSums &before = *w.prediction_before, &after = *w.prediction_after;
    if (!sums.contains(w.name)) workloads.push_back(w.name);
    Sums& t = sums[w.name][{s->layout, s->arm}];
    if (after.rounds < before.rounds || after.abs_rel_error_sum < before.abs_rel_error_sum) {
      t.backwards = true;  // the server restarted between the reads
      continue;
    }
    t.rounds += after.rounds - before.rounds;
    t.abs_rel += after.abs_rel_error_sum - before.abs_rel_error_sum;
    t.error_us += after.error_us_sum - before.error_us_sum;
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
