#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "reports/noise_power.hpp"
#include "reports/quality.hpp"
#include "reports/report_sections.hpp"

namespace tandem::reports::sections {

using store::ArmRecord;
using store::CampaignRecord;
using store::SampleRecord;
using store::SessionRecord;
using store::WorkloadRecord;

namespace {

// Per workload and case: the samples that passed every content check, of those checked,
// per arm. On a trained model this is the table that says the outputs are still right
// (every case at greedy, most repeats when sampled); on random weights it only shows
// that the checks ran.
void ContentChecksByCase(const CampaignRecord& r, MarkdownDoc& d) {
  struct Counts {
    int passed = 0, checked = 0, truncated = 0;
  };
  std::vector<std::pair<std::string, std::string>> rows;  // (workload, case) in run order
  std::map<std::pair<std::string, std::string>, std::map<std::string, Counts>> counts;
  for (const SampleRecord& x : r.samples) {
    const WorkloadRecord* w = r.Workload(x.run);
    const SessionRecord* s = r.Session(x.session);
    if (w == nullptr || s == nullptr || w->warmup) continue;
    bool any = false, all = true;
    for (const auto& [check, ok] : x.checks) {
      if (!IsContentCheck(check)) continue;
      any = true;
      all = all && ok;
    }
    if (!any) continue;
    const std::pair<std::string, std::string> key = {x.workload, x.case_id};
    if (!counts.contains(key)) rows.push_back(key);
    Counts& c = counts[key][s->arm];
    if (!all && Truncated(x)) {
      ++c.truncated;  // cut short by its token budget: not judged
      continue;
    }
    ++c.checked;
    c.passed += all ? 1 : 0;
  }
  if (rows.empty()) return;
  d.Line(
      "Content checks by case: samples that passed every content check of their case / samples checked, measured workloads; "
      "\"+ N truncated\": answers that failed a check after ending on their token budget (finish_reason length), not judged.");
  d.Blank();
  std::vector<std::string> head = {"workload", "case"};
  for (const ArmRecord& a : r.arms) head.push_back(a.label);
  d.Line("{}", Header(head, 2));
  for (const auto& key : rows) {
    std::vector<std::string> row = {Cell(key.first), Cell(key.second)};
    for (const ArmRecord& a : r.arms) {
      const auto it = counts[key].find(a.label);
      if (it == counts[key].end()) {
        row.push_back(std::string(kNone));
        continue;
      }
      const Counts& c = it->second;
      row.push_back(fmt::format("{} / {}{}", c.passed, c.checked, c.truncated > 0 ? fmt::format(" + {} truncated", c.truncated) : ""));
    }
    d.Line("{}", Row(row));
  }
  d.Blank();
}

// A table of checks by arm: a row per check, a cell per arm from `cell(check, arm, ids)`.
template <typename MakeCell>
void ChecksByArm(const CampaignRecord& r, const std::map<std::string, std::map<std::string, std::vector<std::int64_t>>>& checks,
                 MarkdownDoc& d, MakeCell cell) {
  std::vector<std::string> head = {"check"};
  for (const ArmRecord& a : r.arms) head.push_back(a.label);
  d.Line("{}", Header(head));
  static const std::vector<std::int64_t> kNoIds;
  for (const auto& [check, by_arm] : checks) {
    std::vector<std::string> row = {check};
    for (const ArmRecord& a : r.arms) {
      const auto it = by_arm.find(a.label);
      row.push_back(cell(check, a.label, it == by_arm.end() ? kNoIds : it->second));
    }
    d.Line("{}", Row(row));
  }
}

void SessionLines(const CampaignRecord& r, const Quality& q, MarkdownDoc& d) {
  int complete = 0, skipped = 0;
  for (const SessionRecord& s : r.sessions) {
    complete += s.status == store::SessionStatus::kComplete ? 1 : 0;
    skipped += s.status == store::SessionStatus::kSkipped ? 1 : 0;
  }
  d.Line("Sessions: {} of {} complete{}.", complete, r.sessions.size() - static_cast<std::size_t>(skipped),
         skipped > 0 ? fmt::format(" ({} more planned were not needed: the sequential gate had decided)", skipped) : "");
  for (const SessionRecord* s : q.failed_sessions) {
    d.Line("- session {} ({}, {}) **failed** after {} attempt{}: {}", s->order_index + 1, s->layout, s->arm, s->attempts,
           s->attempts == 1 ? "" : "s", Cell(s->reason));
  }
  for (const SessionRecord* s : q.unfinished_sessions) {
    d.Line("- session {} ({}, {}) never completed (status {})", s->order_index + 1, s->layout, s->arm, ToString(s->status));
  }
  for (const SessionRecord* s : q.retried_sessions) {
    if (s->status == store::SessionStatus::kComplete)
      d.Line("- session {} ({}, {}) completed on attempt {}", s->order_index + 1, s->layout, s->arm, s->attempts);
  }
  d.Blank();
}

// Per check and arm: failures of the samples the check ran on (measured workloads).
void FailedChecks(const CampaignRecord& r, const Quality& q, MarkdownDoc& d) {
  std::map<std::string, std::map<std::string, int>> ran;
  for (const SampleRecord& x : r.samples) {
    const WorkloadRecord* w = r.Workload(x.run);
    const SessionRecord* s = r.Session(x.session);
    if (w == nullptr || s == nullptr || w->warmup) continue;
    for (const auto& [check, ok] : x.checks) ++ran[check][s->arm];
  }
  if (q.failed_checks.empty()) {
    d.Line("{}", q.truncated_checks.empty() ? "Every check passed on every measured sample."
                                            : "Every check passed on every measured sample, but for the truncated answers below.");
  } else {
    d.Line(
        "Failed checks, measured workloads (failed / checked, then the samples). Integrity checks (stream_complete, usage_consistent, "
        "cache_bound) decide whether a sample is a valid timing; an invalid sample is left out of every figure. Content checks judge "
        "the text: whether the answer holds what its case asks, which a model that has not learnt the task fails in every runtime "
        "(compare the arms); one that failed on an answer cut short by its token budget is listed under Truncated below, not here.");
    d.Blank();
    ChecksByArm(r, q.failed_checks, d, [&](const std::string& check, const std::string& arm, const std::vector<std::int64_t>& ids) {
      return ids.empty() ? fmt::format("0 / {}", ran[check][arm])
                         : fmt::format("{} / {}: {}", ids.size(), ran[check][arm], d.Links(ids, 6));
    });
  }
  d.Blank();
}

void TruncatedChecks(const CampaignRecord& r, const Quality& q, MarkdownDoc& d) {
  if (q.truncated_checks.empty()) return;
  d.Line(
      "Truncated: content checks that failed on answers which ended on their token budget (finish_reason length); the text was "
      "cut short, so they are not judged. Raise the workload's max_tokens to judge them.");
  d.Blank();
  ChecksByArm(r, q.truncated_checks, d, [&](const std::string&, const std::string&, const std::vector<std::int64_t>& ids) {
    return ids.empty() ? std::string("0") : fmt::format("{}: {}", ids.size(), d.Links(ids, 6));
  });
  d.Blank();
}

// What an arm's settings do to its figures: an external server's carried state, a deliberate slowdown.
void DiscloseArms(const CampaignRecord& r, std::vector<std::string>& disclosed) {
  for (const ArmRecord& a : r.arms) {
    if (a.kind == store::ArmKind::kExternal) {
      disclosed.push_back(
          fmt::format("arm {} is an external server: not relaunched, so its state (prefix cache, warm caches) carried "
                      "across its sessions; each session used its own nonce markers",
                      a.label));
    }
    for (const std::vector<std::string>* list : {&a.launch.options, &a.launch.worker_options}) {
      const std::vector<std::string>& options = *list;
      const auto it = std::find(options.begin(), options.end(), "--debug-slowdown");
      if (it != options.end() && it + 1 != options.end()) {
        disclosed.push_back(
            fmt::format("arm {} ran with `--debug-slowdown {}`: decode deliberately slowed (a test aid)", a.label, *(it + 1)));
      }
    }
  }
}

// What was left out of the figures, or flagged, and why.
std::vector<std::string> Disclosures(const CampaignRecord& r, const Quality& q, MarkdownDoc& d) {
  std::vector<std::string> disclosed;
  if (q.failed_checks.contains("cache_bound")) {
    int n = 0;
    for (const auto& [arm, ids] : q.failed_checks.at("cache_bound")) n += static_cast<int>(ids.size());
    disclosed.push_back(
        fmt::format("{} sample{} reported more cached prompt tokens than the bound allows (the prompt hit the prefix "
                    "cache): excluded from the figures",
                    n, n == 1 ? "" : "s"));
  }
  if (!r.implausible_samples.empty()) {
    disclosed.push_back(
        fmt::format("{} sample{} stored as valid with times no request can have (not finite, negative, or out of "
                    "order; an edited or damaged store): left out of every figure: {}",
                    r.implausible_samples.size(), r.implausible_samples.size() == 1 ? "" : "s", d.Links(r.implausible_samples, 6)));
  }
  for (const auto& [arm, ids] : q.token_flags) {
    disclosed.push_back(
        fmt::format("{}: {} sample{} where the server's completion_tokens and the tokenizer's count of the text differ by "
                    "more than 1 + 10%: {}",
                    arm, ids.size(), ids.size() == 1 ? "" : "s", d.Links(ids, 6)));
  }
  for (const auto& [arm, ids] : q.failed_warmup) {
    disclosed.push_back(fmt::format("{}: {} warmup sample{} failed a check (warmup never counts): {}", arm, ids.size(),
                                    ids.size() == 1 ? "" : "s", d.Links(ids, 6)));
  }
  if (!q.loaded_sessions.empty()) {
    std::vector<std::string> which;
    for (const SessionRecord* s : q.loaded_sessions) {
      which.push_back(fmt::format("{} ({:.0f}% busy)", s->order_index + 1, 100 * s->host.busy_fraction.value_or(0.0)));
    }
    disclosed.push_back(fmt::format("sessions started while other work kept the CPUs busy: {}", fmt::join(which, ", ")));
  }
  DiscloseArms(r, disclosed);
  return disclosed;
}

}  // namespace

void QualitySection(const CampaignRecord& r, MarkdownDoc& d) {
  const Quality q = AssessQuality(r);
  d.Line("## Quality");
  d.Blank();
  SessionLines(r, q, d);
  FailedChecks(r, q, d);
  TruncatedChecks(r, q, d);
  ContentChecksByCase(r, d);
  const std::vector<std::string> disclosed = Disclosures(r, q, d);
  if (!disclosed.empty()) {
    d.Line("Disclosed:");
    for (const std::string& line : disclosed) d.Line("- {}", line);
    d.Blank();
  }
}

void NoiseAndPower(const CampaignRecord& r, MarkdownDoc& d) {
  if (r.families.empty()) return;
  d.Line("## Noise and power");
  d.Blank();
  d.Line(
      "Spread of the log session scores (sample standard deviation, as %) per arm, and the sessions per arm a campaign needs to "
      "detect a 2% change (two-sided 95%, power 80%, normal approximation) at the larger spread.");
  d.Blank();
  std::vector<std::string> head = {"family", "layout"};
  for (const ArmRecord& a : r.arms) head.push_back("sd " + a.label);
  head.push_back("sessions for 2%");
  d.Line("{}", Header(head, 2));
  for (const FamilyNoise& n : AssessNoise(r.families, 0.02)) {
    if (!store::IsDecodeRate(n.family->metric)) continue;  // the decode families' noise; the others have their own sections
    std::vector<std::string> row = {Cell(n.family->family), n.family->layout};
    for (const ArmRecord& a : r.arms) {
      const auto it = n.log_sd.find(a.label);
      row.push_back(it == n.log_sd.end() ? kNone : fmt::format("{:.1f}%", 100 * it->second));
    }
    row.push_back(n.sessions_needed ? std::to_string(*n.sessions_needed) : kNone);
    d.Line("{}", Row(row));
  }
  d.Blank();
}

void Plots(const ReportOptions& o, MarkdownDoc& d) {
  d.Line("## Plots");
  d.Blank();
  if (!o.plots_requested) {
    d.Line("No plots: run `tandem report` with `--out FILE.md` or `--plots DIR` to draw them (gnuplot).");
  }
  for (const Plot& p : o.plots.plots) {
    std::filesystem::path link = o.markdown_dir.empty() ? p.file : p.file.lexically_proximate(o.markdown_dir);
    d.Line("![{}]({})", p.title, link.generic_string());
    d.Blank();
  }
  if (!o.plots.note.empty()) d.Line("({})", o.plots.note);
  d.Blank();
}

void Appendix(const CampaignRecord& r, MarkdownDoc& d) {
  if (d.linked.empty()) return;
  d.Line("## Appendix: samples referenced above");
  d.Blank();
  for (const SampleRecord& x : r.samples) {
    if (!d.linked.contains(x.id)) continue;
    const SessionRecord* s = r.Session(x.session);
    std::vector<std::string> failed;
    for (const auto& [check, ok] : x.checks) {
      if (!ok) failed.push_back(check);
    }
    const std::string excerpt = Excerpt(x.content, 160);
    d.Line(
        "- <a id=\"sample-{}\"></a>**#{}** · session {} ({}, {}) · {} · {} · repeat {} · batch {} slot {} · {} tokens, finish {} · "
        "checks failed: {}{} · content `{}`{}",
        x.id, x.id, s ? s->order_index + 1 : 0, s ? s->layout : "?", s ? s->arm : "?", x.workload, x.case_id, x.repeat, x.batch, x.slot,
        x.completion_tokens, x.finish_reason.empty() ? kNone : x.finish_reason,
        failed.empty() ? "none" : fmt::format("{}", fmt::join(failed, ", ")), x.error.empty() ? "" : " · error: " + Cell(x.error), excerpt,
        excerpt.size() < x.content.size() ? "…" : "");
  }
  d.Blank();
}

}  // namespace tandem::reports::sections
