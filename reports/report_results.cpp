#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "reports/draft_acceptance.hpp"
#include "reports/quality.hpp"
#include "reports/report_sections.hpp"
#include "stats/decode_metrics.hpp"
#include "stats/descriptive.hpp"
#include "stats/stats_error.hpp"
#include "store/comparison.hpp"

namespace tandem::reports::sections {

using store::ArmRecord;
using store::CampaignRecord;
using store::CompareArms;
using store::FamilyComparison;
using store::FamilyMetric;
using store::FamilyScores;
using store::LayoutRecord;
using store::SampleRecord;

namespace {

std::vector<double> Pooled(const FamilyScores& f, const std::string& arm) {
  std::vector<double> all;
  const auto it = f.values_by_arm.find(arm);
  if (it == f.values_by_arm.end()) return all;
  for (const auto& session : it->second) all.insert(all.end(), session.begin(), session.end());
  return all;
}

const FamilyScores* Find(const CampaignRecord& r, const std::string& layout, const std::string& family) {
  for (const FamilyScores& f : r.families) {
    if (f.layout == layout && f.family == family) return &f;
  }
  return nullptr;
}

}  // namespace

std::vector<Column> LayoutArmColumns(const CampaignRecord& r) {
  std::vector<Column> out;
  for (const LayoutRecord& l : r.layouts) {
    for (const ArmRecord& a : r.arms) out.push_back({l.name, a.label, r.layouts.size() > 1 ? l.name + " · " + a.label : a.label});
  }
  return out;
}

void AbTables(const CampaignRecord& r, MarkdownDoc& d) {
  if (r.arms.size() < 2 || r.families.empty()) return;
  const std::string& baseline = r.arms[0].label;
  const bool paired = r.gate.method == store::GateDesign::Method::kPaired;
  for (std::size_t k = 1; k < r.arms.size(); ++k) {
    const std::string& candidate = r.arms[k].label;
    std::vector<FamilyComparison> cmp = CompareArms(r.families, baseline, candidate);
    // Latency, startup and memory families have their own tables in their sections.
    std::erase_if(cmp, [](const FamilyComparison& c) { return !store::IsDecodeRate(c.scores->metric); });
    if (cmp.empty()) continue;
    // The common n, stated once; other cells state theirs.
    std::map<std::pair<std::size_t, std::size_t>, int> ns;
    for (const FamilyComparison& c : cmp) ++ns[{c.n_baseline, c.n_candidate}];
    const auto common = std::max_element(ns.begin(), ns.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
    d.Line("## A/B: {} vs {}", candidate, baseline);
    d.Blank();
    d.Line(
        "Each cell: the ratio of geometric means of session scores ({} / {}) with its Welch 95% interval on the log scores; **bold** "
        "when the interval excludes 1. n = {} {} and {} {} sessions{}. Session scores are defined in docs/statistics.md "
        "(\"Session scores\").{}",
        candidate, baseline, common.first, baseline, common.second, candidate, ns.size() > 1 ? " unless a cell says otherwise" : "",
        paired ? " The campaign declares `method: paired`: after the Welch headline, the paired 95% interval over its ABBA pairs of "
                 "adjacent sessions (a pair that lost a session refuses it)."
               : "");
    d.Blank();
    std::vector<std::string> head = {"family"};
    for (const LayoutRecord& l : r.layouts) head.push_back(l.name);
    d.Line("{}", Header(head));
    std::vector<std::string> rows;
    std::map<std::string, std::map<std::string, std::string>> cells;  // family → layout → cell
    for (const FamilyComparison& c : cmp) {
      // A family of times (lower is better) says so, and whether a bold ratio is a gain.
      const bool lower = c.scores->direction == store::Direction::kLowerIsBetter;
      const std::string family = lower ? c.scores->family + " (lower is better)" : c.scores->family;
      if (!cells.contains(family)) rows.push_back(family);
      std::string cell = kNone;
      if (c.interval) {
        cell = fmt::format("{:.3f} ({:.3f}–{:.3f})", c.interval->ratio, c.interval->lo, c.interval->hi);
        if (c.interval->excludes_one()) cell = "**" + cell + "**" + (!lower ? "" : c.interval->ratio < 1 ? " better" : " worse");
      }
      if (std::make_pair(c.n_baseline, c.n_candidate) != common) cell += fmt::format(" n={}/{}", c.n_baseline, c.n_candidate);
      if (paired) {
        const store::PairedComparison p = store::PairByBlock(r, *c.scores, baseline, candidate);
        cell += p.interval ? fmt::format("; paired {:.3f} ({:.3f}–{:.3f})", p.interval->ratio, p.interval->lo, p.interval->hi)
                           : fmt::format("; paired: {}", Cell(p.missing.substr(p.missing.rfind("paired: ", 0) == 0 ? 8 : 0)));
      }
      cells[family][c.scores->layout] = cell;
    }
    for (const std::string& family : rows) {
      std::vector<std::string> row = {Cell(family)};
      for (const LayoutRecord& l : r.layouts) row.push_back(cells[family].contains(l.name) ? cells[family][l.name] : kNone);
      d.Line("{}", Row(row));
    }
    d.Blank();
  }
}

void MixedPairs(const CampaignRecord& r, MarkdownDoc& d) {
  // A 2×2 campaign: arms X and Y, and the two mixed arms that swap their sides.
  const auto arm_of = [&](const std::string& coordinator, const std::string& workers) -> const ArmRecord* {
    for (const ArmRecord& a : r.arms) {
      if (coordinator == workers && a.label == coordinator && a.kind != store::ArmKind::kMixed) return &a;
      if (a.kind == store::ArmKind::kMixed && a.launch.coordinator_from == coordinator && a.launch.worker_from == workers) return &a;
    }
    return nullptr;
  };
  for (const ArmRecord& m : r.arms) {
    if (m.kind != store::ArmKind::kMixed) continue;
    const std::string x = m.launch.coordinator_from, y = m.launch.worker_from;
    const ArmRecord* grid[2][2] = {{arm_of(x, x), arm_of(x, y)}, {arm_of(y, x), arm_of(y, y)}};
    if (x == y || !grid[0][0] || !grid[0][1] || !grid[1][0] || !grid[1][1]) continue;
    if (grid[0][1] != &m) continue;  // each pair once, from the arm with X's coordinator
    d.Line("## Coordinator × workers");
    d.Blank();
    d.Line(
        "Which side of the image pair a difference lives in: each cell is the arm that ran the row's coordinator with the column's "
        "workers ({} = {}·{}, {} = {}·{}); its headline family's geometric mean of session scores, tok/s, and the ratio to {} "
        "(both sides from {}) with its Welch 95% interval.",
        grid[0][1]->label, x, y, grid[1][0]->label, y, x, grid[0][0]->label, x);
    d.Blank();
    for (const LayoutRecord& l : r.layouts) {
      const FamilyScores* headline = nullptr;
      for (const FamilyScores& f : r.families) {
        if (f.layout == l.name &&
            (headline == nullptr || (f.metric == FamilyMetric::kWeighted && headline->metric != FamilyMetric::kWeighted))) {
          headline = &f;
        }
      }
      if (headline == nullptr) continue;
      d.Line("{}{}:", r.layouts.size() > 1 ? l.name + ", " : "", Cell(headline->family));
      d.Blank();
      d.Line("{}", Header({"coordinator \\ workers", x, y}));
      const std::vector<FamilyScores> one = {*headline};
      for (int c = 0; c < 2; ++c) {
        std::vector<std::string> row = {c == 0 ? x : y};
        for (int w = 0; w < 2; ++w) {
          const auto it = headline->by_arm.find(grid[c][w]->label);
          if (it == headline->by_arm.end() || it->second.empty()) {
            row.push_back(kNone);
            continue;
          }
          std::string cell = fmt::format("{} `{}`", Rate(stats::GeometricMean(it->second)), grid[c][w]->label);
          if (grid[c][w] != grid[0][0]) {
            const std::vector<FamilyComparison> cmp = CompareArms(one, grid[0][0]->label, grid[c][w]->label);
            if (!cmp.empty() && cmp[0].interval) {
              const stats::RatioInterval& i = *cmp[0].interval;
              const std::string ratio = fmt::format("×{:.3f} ({:.3f}–{:.3f})", i.ratio, i.lo, i.hi);
              cell += " " + (i.excludes_one() ? "**" + ratio + "**" : ratio);
            }
          }
          row.push_back(cell);
        }
        d.Line("{}", Row(row));
      }
      d.Blank();
    }
  }
}

void GreedyAgreement(const CampaignRecord& r, MarkdownDoc& d) {
  const std::vector<GreedyPrompt> prompts = GreedyPrompts(r);
  if (prompts.empty()) return;
  d.Line("## Greedy output agreement");
  d.Blank();
  d.Line(
      "Greedy prompts (the same request, nonce included). **Determinism**: per arm, the prompts it sent in at least two "
      "sessions and how many gave identical output in every one of them. **Across arms**: the prompts both arms sent, and how "
      "many gave the baseline's output in the other arm — a different runtime may legitimately differ, so a difference fails "
      "the gate only with `gate.require_identical_greedy`.");
  d.Blank();
  std::vector<const GreedyPrompt*> differing;
  const std::string baseline = r.arms.empty() ? "" : r.arms[0].label;
  for (const LayoutRecord& l : r.layouts) {
    std::map<std::string, std::pair<int, int>> within;  // arm → (identical, compared)
    std::map<std::string, std::pair<int, int>> across;  // arm → (matched the baseline, compared)
    bool any = false;
    for (const GreedyPrompt& p : prompts) {
      if (p.layout != l.name) continue;
      for (const auto& [arm, by_sha] : p.outputs) {
        std::size_t sent = 0;
        for (const auto& [sha, ids] : by_sha) sent += ids.size();
        if (sent >= 2) {
          ++within[arm].second;
          within[arm].first += by_sha.size() == 1 ? 1 : 0;
          any = true;
        }
      }
      const auto a = p.outputs.find(baseline);
      if (a != p.outputs.end() && a->second.size() == 1) {
        for (const auto& [arm, by_sha] : p.outputs) {
          if (arm == baseline) continue;
          ++across[arm].second;
          across[arm].first += by_sha.size() == 1 && by_sha.begin()->first == a->second.begin()->first ? 1 : 0;
          any = true;
        }
      }
      if (!p.AllAgree()) differing.push_back(&p);
    }
    if (!any) continue;
    std::vector<std::string> det, agree;
    for (const ArmRecord& arm : r.arms) {
      if (const auto w = within.find(arm.label); w != within.end())
        det.push_back(fmt::format("{} **{} of {}**", arm.label, w->second.first, w->second.second));
      if (const auto x = across.find(arm.label); x != across.end()) {
        agree.push_back(
            fmt::format("{} matched {}'s output on **{} of {}** prompts", arm.label, baseline, x->second.first, x->second.second));
      }
    }
    d.Line("- {}: determinism: {}; across arms: {}.", l.name, det.empty() ? std::string("—") : fmt::format("{}", fmt::join(det, ", ")),
           agree.empty() ? std::string("—") : fmt::format("{}", fmt::join(agree, "; ")));
  }
  if (!differing.empty()) {
    d.Blank();
    d.Line("{}", Header({"layout", "workload", "case", "repeat", "batch", "slot", "outputs by arm", "samples"}, 8));
    for (std::size_t i = 0; i < differing.size() && i < 20; ++i) {
      const GreedyPrompt& p = *differing[i];
      std::vector<std::string> by_arm;
      for (const auto& [arm, by_sha] : p.outputs) {
        std::vector<std::string> parts;
        for (const auto& [sha, ids] : by_sha) parts.push_back(fmt::format("`{}`×{}", sha.substr(0, 8), ids.size()));
        by_arm.push_back(fmt::format("{}: {}", arm, fmt::join(parts, " ")));
      }
      d.Line("{}", Row({p.layout, p.workload, p.case_id, std::to_string(p.repeat), std::to_string(p.batch), std::to_string(p.slot),
                        fmt::format("{}", fmt::join(by_arm, "; ")), d.Links(p.SampleIds(), 6)}));
    }
    if (differing.size() > 20) d.Line("({} more differing prompts not listed)", differing.size() - 20);
  }
  d.Blank();
}

namespace {

std::string MedianWithValues(const std::vector<double>& values) {
  if (values.empty()) return kNone;
  std::vector<std::string> listed;
  for (double v : values) listed.push_back(Rate(v));
  return fmt::format("**{}** ({})", Rate(stats::Median(values)), fmt::join(listed, ", "));
}

}  // namespace

void Headline(const CampaignRecord& r, MarkdownDoc& d) {
  // The first greedy battery's counting and weighted families, the first code C1.
  std::string counting, weighted, code_c1;
  for (const FamilyScores& f : r.families) {
    if (counting.empty() && f.metric == FamilyMetric::kCase && f.case_id == "counting" && f.greedy) counting = f.family;
    if (weighted.empty() && f.metric == FamilyMetric::kWeighted && f.greedy) weighted = f.family;
    if (code_c1.empty() && f.metric == FamilyMetric::kAggregate && f.case_id == "code" && f.level == 1) code_c1 = f.family;
  }
  if (counting.empty() && weighted.empty() && code_c1.empty()) return;
  d.Line("## Headline decode");
  d.Blank();
  std::vector<std::string> what;
  if (!counting.empty()) what.push_back("counting: the per-request decode rate of the counting diagnostic");
  if (!weighted.empty()) what.push_back("weighted: the weighted decode of each battery repeat");
  if (!code_c1.empty()) what.push_back("code C1: one code request at a time");
  d.Line("tok/s: the median over every repeat of every session of the arm (bold), then the repeats in run order; {}.",
         fmt::join(what, "; "));
  d.Blank();
  std::vector<std::string> head = {"layout", "arm"};
  const std::size_t text_columns = head.size();
  for (const std::string* f : {&counting, &weighted, &code_c1}) {
    if (!f->empty()) head.push_back(Cell(*f));
  }
  d.Line("{}", Header(head, text_columns));
  for (const LayoutRecord& l : r.layouts) {
    for (const ArmRecord& a : r.arms) {
      std::vector<std::string> row = {l.name, a.label};
      for (const std::string* f : {&counting, &weighted, &code_c1}) {
        if (f->empty()) continue;
        const FamilyScores* fs = Find(r, l.name, *f);
        row.push_back(fs ? MedianWithValues(Pooled(*fs, a.label)) : kNone);
      }
      d.Line("{}", Row(row));
    }
  }
  d.Blank();
}

void ContentTypes(const CampaignRecord& r, MarkdownDoc& d) {
  std::vector<std::string> workloads;
  for (const FamilyScores& f : r.families) {
    if (f.metric == FamilyMetric::kCase && std::find(workloads.begin(), workloads.end(), f.workload) == workloads.end()) {
      workloads.push_back(f.workload);
    }
  }
  if (workloads.empty()) return;
  d.Line("## Content-type decode");
  d.Blank();
  d.Line(
      "Median per-request decode rate, (completion_tokens − 1) / (t_finish − t_first_output), over the valid requests of every "
      "session, tok/s.");
  const std::vector<Column> columns = LayoutArmColumns(r);
  for (const std::string& w : workloads) {
    d.Blank();
    d.Line("### {}", w);
    d.Blank();
    std::vector<std::string> head = {"case", "weight"};
    for (const Column& c : columns) head.push_back(c.head);
    d.Line("{}", Header(head, 1));
    std::vector<std::string> cases;
    for (const FamilyScores& f : r.families) {
      if (f.workload == w && f.metric == FamilyMetric::kCase && std::find(cases.begin(), cases.end(), f.case_id) == cases.end()) {
        cases.push_back(f.case_id);
      }
    }
    for (const std::string& c : cases) {
      double weight = 0;
      for (const SampleRecord& x : r.samples) {
        if (x.workload == w && x.case_id == c) {
          weight = x.weight;
          break;
        }
      }
      std::vector<std::string> row = {c, fmt::format("{:g}", weight)};
      for (const Column& col : columns) {
        const FamilyScores* f = Find(r, col.layout, w + ": " + c);
        const std::vector<double> values = f ? Pooled(*f, col.arm) : std::vector<double>{};
        row.push_back(values.empty() ? kNone : Rate(stats::Median(values)));
      }
      d.Line("{}", Row(row));
    }
  }
  d.Blank();
}

void DraftAcceptance(const CampaignRecord& r, MarkdownDoc& d) {
  const std::vector<DraftCounterSums> sums = SumDraftCounters(r);
  if (sums.empty()) return;
  d.Line("## Draft acceptance");
  d.Blank();
  d.Line(
      "Accepted per verified draft token, and tokens emitted per request round ((accepted + rounds) / rounds), from the `/v1/stats` "
      "counters read around each batch. A mixed batch counts as one case.");
  d.Blank();
  const std::vector<Column> columns = LayoutArmColumns(r);
  std::vector<std::string> head = {"workload", "case"};
  for (const Column& c : columns) head.push_back(c.head);
  d.Line("{}", Header(head, 2));
  std::vector<std::string> counter_errors;
  for (const DraftCounterSums& s : sums) {
    std::vector<std::string> row = {s.workload, s.case_id};
    for (const Column& c : columns) {
      const auto it = s.by_layout_arm.find({c.layout, c.arm});
      std::string cell = kNone;
      if (const auto e = s.errors.find({c.layout, c.arm}); e != s.errors.end()) {
        cell = "error: counters went backwards";
        counter_errors.push_back(fmt::format("{} {} ({} · {}): {}", s.workload, s.case_id, c.layout, c.arm, e->second));
      } else if (it != s.by_layout_arm.end() && it->second.request_rounds > 0) {
        try {
          const stats::DraftRates rates = stats::DraftRatesOf(it->second);
          cell = fmt::format("{} · {:.2f}/round", rates.acceptance ? fmt::format("{:.3f}", *rates.acceptance) : std::string(kNone),
                             rates.emitted_per_round);
        } catch (const stats::StatsError&) {
        }
      }
      row.push_back(cell);
    }
    d.Line("{}", Row(row));
  }
  d.Blank();
  if (!counter_errors.empty()) {
    d.Line("No figure where the server's draft counters went backwards between two reads (it restarted, or a counter wrapped):");
    for (const std::string& e : counter_errors) d.Line("- {}", e);
    d.Blank();
  }
}

namespace {

// Cn over C1 of the same arm session by session (a session's score at a level is the
// median of its batches there): the geometric mean of the per-session ratios with a
// paired 95% t interval (store::PairBySession). Sessions are the independent units;
// the batches within one are not.
std::string ScalingCell(const FamilyScores* c1, const FamilyScores* cn, const std::string& arm) {
  if (c1 == nullptr || cn == nullptr) return std::string(kNone);
  const store::PairedComparison p = store::PairBySession(*c1, *cn, arm);
  if (!p.interval) return std::string(kNone);
  return fmt::format("×{:.2f} ({:.2f}–{:.2f})", p.interval->ratio, p.interval->lo, p.interval->hi);
}

}  // namespace

void Concurrency(const CampaignRecord& r, MarkdownDoc& d) {
  // Series: (workload, case) of aggregate families, in family order.
  std::vector<std::pair<std::string, std::string>> series;
  std::map<std::pair<std::string, std::string>, std::set<int>> levels;
  std::map<std::pair<std::string, std::string>, store::WorkloadKind> kind;
  for (const FamilyScores& f : r.families) {
    if (f.metric != FamilyMetric::kAggregate) continue;
    const auto key = std::make_pair(f.workload, f.case_id);
    if (!levels.contains(key)) series.push_back(key);
    levels[key].insert(f.level);
    kind[key] = f.kind;
  }
  if (series.empty()) return;
  const std::vector<Column> columns = LayoutArmColumns(r);
  auto table = [&](const std::pair<std::string, std::string>& key, bool with_range) {
    std::vector<std::string> head = {"level"};
    for (const Column& c : columns) head.push_back(c.head);
    d.Line("{}", Header(head));
    for (int level : levels[key]) {
      std::vector<std::string> row = {fmt::format("C{}", level)};
      for (const Column& c : columns) {
        const FamilyScores* f = Find(r, c.layout, fmt::format("{}: {} C{}", key.first, key.second, level));
        const std::vector<double> values = f ? Pooled(*f, c.arm) : std::vector<double>{};
        if (values.empty()) {
          row.push_back(kNone);
          continue;
        }
        std::string cell = Rate(stats::Median(values));
        if (with_range) cell += fmt::format(" ({}–{})", Rate(stats::Min(values)), Rate(stats::Max(values)));
        const FamilyScores* c1 = Find(r, c.layout, fmt::format("{}: {} C1", key.first, key.second));
        const std::vector<double> base = c1 && level != 1 ? Pooled(*c1, c.arm) : std::vector<double>{};
        if (!base.empty()) cell += fmt::format(" ×{:.2f}", stats::Median(values) / stats::Median(base));
        row.push_back(cell);
      }
      d.Line("{}", Row(row));
    }
    if (!with_range && levels[key].contains(1)) {
      for (int level : levels[key]) {
        if (level == 1) continue;
        std::vector<std::string> row = {fmt::format("C{}/C1 by session", level)};
        for (const Column& c : columns) {
          row.push_back(ScalingCell(Find(r, c.layout, fmt::format("{}: {} C1", key.first, key.second)),
                                    Find(r, c.layout, fmt::format("{}: {} C{}", key.first, key.second, level)), c.arm));
        }
        d.Line("{}", Row(row));
      }
    }
    d.Blank();
  };
  bool any_concurrency = false, any_mixed = false;
  for (const auto& key : series) (kind[key] == store::WorkloadKind::kMixed ? any_mixed : any_concurrency) = true;
  if (any_concurrency) {
    d.Line("## Concurrency scaling");
    d.Blank();
    d.Line(
        "Aggregate throughput of a batch of C identical requests, Σ(ct − 1) / (max t_finish − min t_first_output), median over "
        "the batches of every session, tok/s; ×: relative to C1 of the same arm. Cn/C1 by session: each session's Cn score over its "
        "C1 score (a score is the median of the session's batches), geometric mean over the sessions with a paired 95% t interval.");
    d.Blank();
    for (const auto& key : series) {
      if (kind[key] == store::WorkloadKind::kMixed) continue;
      d.Line("### {}: {}", key.first, key.second);
      d.Blank();
      table(key, false);
    }
  }
  if (any_mixed) {
    d.Line("## Mixed traffic");
    d.Blank();
    d.Line("C requests at once rotating code, fable and topic; aggregate tok/s, median (min–max) over the batches of every session.");
    d.Blank();
    for (const auto& key : series) {
      if (kind[key] != store::WorkloadKind::kMixed) continue;
      d.Line("### {}", key.first);
      d.Blank();
      table(key, true);
    }
  }
}

void Retained(const CampaignRecord& r, MarkdownDoc& d) {
  std::vector<const FamilyScores*> families;
  for (const FamilyScores& f : r.families) {
    if (f.metric == FamilyMetric::kRetained) families.push_back(&f);
  }
  if (families.empty()) return;
  d.Line("## Retained-context decode");
  d.Blank();
  // A store from before contexts were exact has no fresh-launch control: its families are
  // the follow-ups' request rates.
  const bool exact =
      std::any_of(families.begin(), families.end(), [](const FamilyScores* f) { return f->case_id.starts_with("fresh-launch"); });
  d.Line("{}", exact ? "Weighted decode of the child turns (every case, once per repeat) on a parent prompt of exactly the context's "
                       "tokens, median (min–max) over every session's repeats, tok/s; \"fresh launch\": the same cases as fresh "
                       "conversations, first in the workload. A child whose cache hit fell outside the parent's own text and the "
                       "conversation before its own message is not scored (Quality, `retained_cache`)."
                     : "Decode rate of the follow-up turns on a retained prefix, median (min–max) over every session's follow-ups, tok/s.");
  d.Blank();
  const std::vector<Column> columns = LayoutArmColumns(r);
  std::vector<std::string> head = {"workload", "context"};
  for (const Column& c : columns) head.push_back(c.head);
  d.Line("{}", Header(head, 2));
  std::set<std::string> done;
  for (const FamilyScores* f : families) {
    if (!done.insert(f->family).second) continue;
    const std::string thinking = f->case_id.ends_with("thinking") ? ", thinking" : "";
    const std::string context = f->case_id.starts_with("fresh-launch") ? "fresh launch" : fmt::format("{} tokens", f->context);
    std::vector<std::string> row = {f->workload, context + thinking};
    for (const Column& c : columns) {
      const FamilyScores* g = Find(r, c.layout, f->family);
      const std::vector<double> values = g ? Pooled(*g, c.arm) : std::vector<double>{};
      row.push_back(values.empty()
                        ? kNone
                        : fmt::format("{} ({}–{})", Rate(stats::Median(values)), Rate(stats::Min(values)), Rate(stats::Max(values))));
    }
    d.Line("{}", Row(row));
  }
  d.Blank();
}

}  // namespace tandem::reports::sections
