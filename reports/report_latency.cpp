// The report's latency tables: the latency families' A/B comparison (gated like any family),
// then time to first output and inter-token latency per case, median and tail (p90, p99),
// as users of other serving benchmarks read them.
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "reports/report_sections.hpp"
#include "stats/descriptive.hpp"

namespace tandem::reports::sections {

namespace {

using store::CampaignRecord;
using store::SampleRecord;

// (workload, case, level) in the order first measured.
using Series = std::tuple<std::string, std::string, int>;

std::string Quantiles(const std::vector<double>& seconds) {
  if (seconds.empty()) return "—";
  return fmt::format("{:.1f} / {:.1f} / {:.1f}", 1e3 * stats::Median(seconds), 1e3 * stats::Percentile(seconds, 90),
                     1e3 * stats::Percentile(seconds, 99));
}

}  // namespace

void Latency(const CampaignRecord& r, MarkdownDoc& d) {
  std::vector<Series> rows;
  std::map<Series, std::map<std::pair<std::string, std::string>, std::vector<double>>> ttft, itl;  // → (layout, arm) → values
  for (const SampleRecord& x : r.samples) {
    const store::WorkloadRecord* w = r.Workload(x.run);
    const store::SessionRecord* s = r.Session(x.session);
    if (w == nullptr || s == nullptr || w->warmup || !x.valid || s->status != store::SessionStatus::kComplete) continue;
    if (w->kind != store::WorkloadKind::kBattery && w->kind != store::WorkloadKind::kConcurrency && w->kind != store::WorkloadKind::kMixed)
      continue;
    const Series row{x.workload, w->kind == store::WorkloadKind::kMixed ? "mixed" : x.case_id,
                     w->kind == store::WorkloadKind::kBattery ? 0 : x.level};
    if (!ttft.contains(row) && !itl.contains(row)) rows.push_back(row);
    const std::pair<std::string, std::string> column{s->layout, s->arm};
    if (x.t_first_output > 0) ttft[row][column].push_back(x.t_first_output - x.t_start);  // no text: no first output
    std::vector<double>& gaps = itl[row][column];
    gaps.insert(gaps.end(), x.gaps.begin(), x.gaps.end());
  }
  if (rows.empty()) return;
  const std::vector<Column> columns = LayoutArmColumns(r);
  d.Line("## Latency");
  d.Blank();
  d.Line(
      "Time to first output (TTFT = t_first_output − t_start, per request) and inter-token latency (ITL: the gaps between "
      "consecutive streamed text deltas, pooled over the requests), valid requests of the measured workloads of every complete "
      "session; median / p90 / p99 in ms. Both are timed on the harness's side, so they include the HTTP client; at concurrency "
      "C, requests share the server.");
  d.Blank();
  DirectedAbTables(
      r, d, [](const store::FamilyScores& f) { return store::IsLatency(f.metric); }, "latency families",
      "A session's score is a percentile of its own requests (docs/statistics.md, \"Latency families\"); a p90 "
      "needs 10 requests in the session, a p99 20.");
  for (const auto& [title, data] : {std::pair{"TTFT", &ttft}, std::pair{"ITL", &itl}}) {
    d.Line("### {} (ms, median / p90 / p99)", title);
    d.Blank();
    std::vector<std::string> h = {"workload", "case"};
    for (const Column& c : columns) h.push_back(c.head);
    d.Line("{}", Header(h, 2));
    for (const Series& row : rows) {
      const auto& [workload, case_id, level] = row;
      std::vector<std::string> cells = {workload, level > 0 ? fmt::format("{} C{}", case_id, level) : case_id};
      const auto it = data->find(row);
      for (const Column& c : columns) {
        const std::vector<double>* v = nullptr;
        if (it != data->end()) {
          const auto jt = it->second.find({c.layout, c.arm});
          if (jt != it->second.end()) v = &jt->second;
        }
        cells.push_back(v != nullptr ? Quantiles(*v) : "—");
      }
      d.Line("{}", Row(cells));
    }
    d.Blank();
  }
}

}  // namespace tandem::reports::sections
