// The report's Startup and Memory sections: each launch's phases and each process's memory
// once ready, per layout and arm, then their A/B tables (lower is better).
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "reports/report_sections.hpp"
#include "stats/descriptive.hpp"

namespace tandem::reports::sections {

namespace {

using store::CampaignRecord;
using store::FamilyMetric;
using store::FamilyScores;

// The median, and the range when there is more than one session, in the family's unit.
std::string Summary(const std::vector<double>& scores, double scale, const char* format) {
  if (scores.empty()) return std::string(kNone);
  const std::string median = fmt::format(fmt::runtime(format), stats::Median(scores) * scale);
  if (scores.size() == 1) return median + " (n=1)";
  return fmt::format("{} ({}–{}) n={}", median, fmt::format(fmt::runtime(format), stats::Min(scores) * scale),
                     fmt::format(fmt::runtime(format), stats::Max(scores) * scale), scores.size());
}

// One arm's sessions in a family: times in seconds, RSS in MiB (stored in bytes), GPU memory in MiB.
std::string ArmCell(const FamilyScores& f, const std::string& arm) {
  const auto scores = f.by_arm.find(arm);
  if (scores == f.by_arm.end()) return std::string(kNone);
  if (f.metric == FamilyMetric::kStartup) return Summary(scores->second, 1.0, "{:.2f}");
  const bool bytes = f.case_id.rfind("gpu:", 0) != 0;
  return Summary(scores->second, bytes ? 1.0 / (1 << 20) : 1.0, "{:.0f}");
}

// A row per family of `metric`, a column per layout and arm: the median over sessions.
void PerArmTable(const CampaignRecord& r, MarkdownDoc& d, FamilyMetric metric) {
  const std::vector<Column> columns = LayoutArmColumns(r);
  std::vector<std::string> rows;
  std::map<std::string, std::map<std::string, const FamilyScores*>> by_label;  // label → layout → family
  for (const FamilyScores& f : r.families) {
    if (f.metric != metric) continue;
    if (!by_label.contains(f.family)) rows.push_back(f.family);
    by_label[f.family][f.layout] = &f;
  }
  std::vector<std::string> head = {"family"};
  for (const Column& c : columns) head.push_back(c.head);
  d.Line("{}", Header(head));
  for (const std::string& label : rows) {
    std::vector<std::string> row = {Cell(label)};
    for (const Column& c : columns) {
      const auto it = by_label[label].find(c.layout);
      row.push_back(it == by_label[label].end() ? std::string(kNone) : ArmCell(*it->second, c.arm));
    }
    d.Line("{}", Row(row));
  }
  d.Blank();
}

bool Any(const CampaignRecord& r, FamilyMetric metric) {
  for (const FamilyScores& f : r.families) {
    if (f.metric == metric) return true;
  }
  return false;
}

}  // namespace

void Startup(const CampaignRecord& r, MarkdownDoc& d) {
  if (!Any(r, FamilyMetric::kStartup)) return;
  d.Line("## Startup");
  d.Blank();
  d.Line(
      "Seconds from a session's launch (just before its first process started) to each phase, as the harness saw it: every "
      "worker saying where it listens (the last of them), the coordinator saying so, the server ready (`/health` answers and "
      "`/v1/models` lists the model) and the first streamed output of the session's first workload. Median (min–max) over the "
      "sessions of each arm; a launch per arm and layout reads its images from a cold cache and is discarded "
      "(`startup.discard`). Lower is better.");
  d.Blank();
  PerArmTable(r, d, FamilyMetric::kStartup);
  DirectedAbTables(
      r, d, [](const FamilyScores& f) { return f.metric == FamilyMetric::kStartup; }, "startup", "One launch per session.");
}

void Memory(const CampaignRecord& r, MarkdownDoc& d) {
  if (!Any(r, FamilyMetric::kMemory)) return;
  d.Line("## Memory");
  d.Blank();
  d.Line(
      "Once the server was ready: the resident memory (RSS) of the coordinator and the sum over the workers, in MiB, read from "
      "`/proc` on the host each ran on; and each GPU's used memory in MiB (`nvidia-smi`) where the hosts have NVIDIA GPUs. Median "
      "(min–max) over the sessions of each arm. Lower is better.");
  d.Blank();
  PerArmTable(r, d, FamilyMetric::kMemory);
  DirectedAbTables(
      r, d, [](const FamilyScores& f) { return f.metric == FamilyMetric::kMemory; }, "memory", "One reading per session, once ready.");
}

}  // namespace tandem::reports::sections
