#include "reports/markdown_report.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "reports/comparison.hpp"
#include "reports/quality.hpp"
#include "stats/descriptive.hpp"
#include "stats/sessions_needed.hpp"
#include "stats/stats_error.hpp"

namespace tandem::reports {

namespace {

using harness::FamilyMetric;
using harness::FamilyScores;
using nlohmann::json;

constexpr const char* kNone = "—";

// The document being written, and the samples it links to (listed in the appendix).
struct Doc {
  std::string text;
  std::set<std::int64_t> linked;

  template <typename... Args>
  void Line(fmt::format_string<Args...> format, Args&&... args) {
    text += fmt::format(format, std::forward<Args>(args)...);
    text += '\n';
  }
  void Blank() { text += '\n'; }
  std::string Link(std::int64_t sample) {
    linked.insert(sample);
    return fmt::format("[#{}](#sample-{})", sample, sample);
  }
  std::string Links(const std::vector<std::int64_t>& samples, std::size_t most = 12) {
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < samples.size() && i < most; ++i) parts.push_back(Link(samples[i]));
    std::string out = fmt::format("{}", fmt::join(parts, " "));
    if (samples.size() > most) out += fmt::format(" … (+{})", samples.size() - most);
    return out;
  }
};

// Table cells must not break the table.
std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string Short(const std::string& hex, std::size_t n = 16) { return hex.empty() ? kNone : fmt::format("`{}`", hex.substr(0, n)); }

std::string Rate(double v) { return fmt::format("{:.1f}", v); }

// At most `bytes` bytes of `text`, cut at a UTF-8 character boundary, on one line.
std::string Excerpt(const std::string& text, std::size_t bytes) {
  std::size_t end = std::min(bytes, text.size());
  while (end > 0 && end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  std::string out;
  for (const char c : text.substr(0, end)) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r' || c == '`' || c == '|') {
      out += ' ';
    } else if (u < 0x20 || u == 0x7F) {
      // Control characters a model emitted, shown as their Unicode control pictures
      // (U+2400 + c; DEL as U+2421) so the markdown stays text.
      const unsigned picture = u == 0x7F ? 0x2421 : 0x2400 + u;
      out += static_cast<char>(0xE0 | (picture >> 12));
      out += static_cast<char>(0x80 | ((picture >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (picture & 0x3F));
    } else {
      out += c;
    }
  }
  return out;
}

// "24683652 kB" (/proc/meminfo) as GiB.
std::string Memory(const std::string& meminfo) {
  try {
    if (meminfo.size() > 3 && meminfo.substr(meminfo.size() - 3) == " kB") {
      return fmt::format("{:.1f} GiB", std::stod(meminfo) / (1024.0 * 1024.0));
    }
  } catch (const std::exception&) {
  }
  return meminfo;
}

// A table head; columns from `numbers_from` on hold figures and align right.
std::string Header(const std::vector<std::string>& columns, std::size_t numbers_from = 1) {
  std::string out = "|";
  for (const std::string& c : columns) out += " " + c + " |";
  out += "\n|";
  for (std::size_t i = 0; i < columns.size(); ++i) out += i < numbers_from ? "---|" : "---:|";
  return out;
}

std::string Row(const std::vector<std::string>& cells) {
  std::string out = "|";
  for (const std::string& c : cells) out += " " + c + " |";
  return out;
}

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

// "layout · arm" column heads for every layout and arm.
struct Column {
  std::string layout, arm, head;
};
std::vector<Column> LayoutArmColumns(const CampaignRecord& r) {
  std::vector<Column> out;
  for (const LayoutRecord& l : r.layouts) {
    for (const ArmRecord& a : r.arms) out.push_back({l.name, a.label, r.layouts.size() > 1 ? l.name + " · " + a.label : a.label});
  }
  return out;
}

// The workloads as every session ran them: first occurrence of each name, in order.
std::vector<const WorkloadRecord*> WorkloadPlan(const CampaignRecord& r) {
  std::vector<const WorkloadRecord*> out;
  std::set<std::string> seen;
  for (const WorkloadRecord& w : r.workloads) {
    if (seen.insert(w.name).second) out.push_back(&w);
  }
  return out;
}

std::string DescribeWorkload(const WorkloadRecord& w) {
  const json& s = w.spec;
  std::vector<std::string> parts;
  const auto list = [](const json& j) {
    std::vector<std::string> items;
    if (j.is_array()) {
      for (const json& x : j) items.push_back(x.is_string() ? x.get<std::string>() : x.dump());
    }
    return items;
  };
  const std::vector<std::string> cases = list(s.value("cases", json::array()));
  if (w.kind == "battery") {
    parts.push_back(cases.empty() ? "every weighted case" : fmt::format("cases {}", fmt::join(cases, ", ")));
    if (s.value("counting", true) && cases.empty()) parts.push_back("plus the counting diagnostic");
    parts.push_back(fmt::format("{} repeat{}", s.value("repeats", 1), s.value("repeats", 1) == 1 ? "" : "s"));
  } else if (w.kind == "concurrency") {
    parts.push_back(fmt::format("cases {}", fmt::join(cases, ", ")));
    parts.push_back(fmt::format("C identical requests at once for C in {}", fmt::join(list(s.value("levels", json::array())), ", ")));
    parts.push_back(fmt::format("{} repeat{}", s.value("repeats", 1), s.value("repeats", 1) == 1 ? "" : "s"));
  } else if (w.kind == "mixed") {
    parts.push_back(fmt::format("C requests at once rotating code, fable, topic for C in {}", fmt::join(list(s.value("levels", json::array())), ", ")));
    parts.push_back(fmt::format("{} repeat{}", s.value("repeats", 1), s.value("repeats", 1) == 1 ? "" : "s"));
  } else if (w.kind == "retained_context") {
    parts.push_back(fmt::format("a parent turn filling {} tokens of context, then {} follow-up turns on it",
                                fmt::join(list(s.value("contexts", json::array())), " / "), s.value("children", 2)));
  }
  if (s.value("greedy", true)) {
    parts.push_back("greedy");
  } else {
    parts.push_back(fmt::format("sampled (temperature {}, top_p {}, seed {})", s.value("temperature", 0.0), s.value("top_p", 1.0),
                                s.value("seed", 0)));
  }
  const int max_tokens = s.value("max_tokens", 0);
  parts.push_back(max_tokens > 0 ? fmt::format("at most {} tokens", max_tokens) : "each case's own token budget");
  parts.push_back(fmt::format("nonce seed {}", s.value("nonce_seed", 0)));
  return fmt::format("`{}` ({}): {}", w.name, w.kind, fmt::join(parts, "; "));
}

void Title(const CampaignRecord& r, Doc& d) {
  d.Line("# {}: release report", r.name);
  d.Blank();
  d.Line("Campaign {} in `{}`, created {}, status **{}**. Campaign file `{}` (sha256 {}). Every figure below is recomputed by "
         "`tandem report` from the stored samples; \"{}\" marks a value the campaign did not produce.",
         r.id, r.store_path, r.created_at, r.status, r.file, Short(r.yaml_sha256, 12), kNone);
  d.Blank();
}

void Arms(const CampaignRecord& r, Doc& d) {
  d.Line("## Arms");
  d.Blank();
  d.Line("{}", Header({"arm", "role", "source", "runtime revision", "coordinator image", "worker image", "model", "model revision",
                       "config sha256"},
                      9));
  for (const ArmRecord& a : r.arms) {
    d.Line("{}", Row({a.label, a.position == 0 ? "baseline" : "candidate", a.kind, a.revision.empty() ? kNone : "`" + a.revision + "`",
                      Short(a.coordinator_image), Short(a.worker_image), a.model_id.empty() ? kNone : a.model_id,
                      Short(a.model_revision), Short(a.config_sha256)}));
  }
  d.Blank();
  for (const ArmRecord& a : r.arms) {
    std::vector<std::string> how;
    const json& l = a.launch;
    if (a.kind == "git") how.push_back(fmt::format("built from {} at `{}`", l.value("repository", ""), l.value("ref", "")));
    if (a.kind == "binary") how.push_back(fmt::format("`{}`", l.value("coordinator", "")));
    if (a.kind == "command") how.push_back(fmt::format("command `{}`", l.value("command", "")));
    if (a.kind == "external") how.push_back(fmt::format("external server {}: **not relaunched** between sessions", l.value("base_url", "")));
    for (const char* key : {"options", "worker_options"}) {
      if (l.contains(key) && l[key].is_array() && !l[key].empty()) {
        how.push_back(fmt::format("{} `{}`", key == std::string("options") ? "coordinator options" : "worker options",
                                  fmt::join(l[key].get<std::vector<std::string>>(), " ")));
      }
    }
    if (l.contains("env") && l["env"].is_object() && !l["env"].empty()) {
      std::vector<std::string> env;
      for (const auto& [k, v] : l["env"].items()) env.push_back(k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
      how.push_back(fmt::format("environment `{}`", fmt::join(env, " ")));
    }
    d.Line("- **{}**: {}.", a.label, fmt::join(how, "; "));
  }
  d.Line("- Model: `{}`, revision `{}`.", r.model_path, r.model_revision.empty() ? kNone : r.model_revision);
  d.Blank();
}

void Host(const CampaignRecord& r, Doc& d) {
  const json& h = r.host;
  if (!h.is_object() || h.empty()) return;
  d.Line("## Host");
  d.Blank();
  d.Line("{} · {} logical CPUs · memory {} · {} · host `{}`.", h.value("cpu_model", "?"), h.value("logical_cpus", 0), Memory(h.value("memory", "?")),
         h.value("kernel", "?"), h.value("hostname", "?"));
  std::vector<double> busy;
  int loaded = 0;
  for (const SessionRecord& s : r.sessions) {
    if (s.host.is_object() && s.host.contains("busy_fraction")) busy.push_back(s.host["busy_fraction"].get<double>());
    loaded += s.host.is_object() && s.host.value("load_warning", false) ? 1 : 0;
  }
  if (!busy.empty()) {
    d.Line("CPUs busy in the second before each session: median {:.0f}%, at most {:.0f}%; {} of {} sessions started under other load "
           "(> 25% busy).",
           100 * stats::Median(busy), 100 * stats::Max(busy), loaded, busy.size());
  }
  d.Blank();
}

void Protocol(const CampaignRecord& r, Doc& d) {
  d.Line("## Protocol");
  d.Blank();
  d.Line("{}", Header({"layout", "workers", "experts", "local expert layers", "coordinator ranks", "wire", "partials", "threads (coordinator / worker)",
                       "CPU pinning"},
                      9));
  for (const LayoutRecord& l : r.layouts) {
    const json& s = l.spec;
    const int threads = s.value("coordinator_threads", 0);
    const std::string pin = s.value("coordinator_cpus", "") + (s.value("worker_cpus", "").empty() ? "" : " / " + s.value("worker_cpus", ""));
    d.Line("{}", Row({l.name, std::to_string(s.value("workers", 0)), s.value("expert_parallel", "tp"), std::to_string(s.value("local_expert_layers", 0)),
                      std::to_string(s.value("coordinator_ranks", 1)), s.value("wire_dtype", "bf16"), s.value("partial_dtype", "f64"),
                      fmt::format("{} / {}", threads > 0 ? std::to_string(threads) : "all", s.value("worker_threads", 1)),
                      pin.empty() ? "none" : pin}));
  }
  d.Blank();
  // A figure measured over an emulated link must say so next to the layout.
  bool emulated = false;
  for (const LayoutRecord& l : r.layouts) {
    const int rtt = l.spec.value("emulated_rtt_us", 0);
    if (rtt <= 0) continue;
    d.Line("Layout {}: emulated link, each worker handles a layer request {} µs after it arrives (`--emulated-rtt-us`), "
           "standing in for a network round trip slower than loopback.",
           l.name, rtt);
    emulated = true;
  }
  if (emulated) d.Blank();
  // The order, as letters of the arms' positions.
  std::map<std::string, std::string> orders;
  std::map<std::string, int> per_layout;
  for (const SessionRecord& s : r.sessions) {
    const ArmRecord* a = r.Arm(s.arm);
    orders[s.layout] += static_cast<char>('A' + (a ? a->position : 0));
    ++per_layout[s.layout];
  }
  std::set<std::string> distinct;
  for (const auto& [layout, order] : orders) distinct.insert(order);
  std::vector<std::string> letters;
  for (const ArmRecord& a : r.arms) letters.push_back(fmt::format("{} = {}", static_cast<char>('A' + a.position), a.label));
  const std::string order = distinct.size() == 1 ? *distinct.begin() : "(see each layout)";
  d.Line("Sessions: {} per layout, run layout after layout, arms interleaved in the order {} ({}). Every session launches its arm's "
         "coordinator and workers from scratch on loopback, waits until `/health` answers and `/v1/models` lists the model, runs the "
         "warmup and then the measured workloads, reads `/v1/stats` around each workload, and stops every process it started.",
         per_layout.empty() ? 0 : per_layout.begin()->second, order, fmt::join(letters, ", "));
  if (distinct.size() > 1) {
    for (const auto& [layout, o] : orders) d.Line("- {}: {}", layout, o);
  }
  d.Blank();
  const std::vector<const WorkloadRecord*> plan = WorkloadPlan(r);
  bool any_warmup = false;
  for (const WorkloadRecord* w : plan) any_warmup = any_warmup || w->warmup;
  if (any_warmup) {
    d.Line("Warmup, stored but excluded from every figure:");
    for (const WorkloadRecord* w : plan) {
      if (w->warmup) d.Line("- {}", DescribeWorkload(*w));
    }
    d.Blank();
  }
  d.Line("Measured workloads, in this order in every session (each request's prompt starts with a single-token nonce marker, a pure "
         "function of the workload's seed and the request's position, so no two requests of a session share a prompt prefix):");
  for (const WorkloadRecord* w : plan) {
    if (!w->warmup) d.Line("- {}", DescribeWorkload(*w));
  }
  d.Blank();
}

void AbTables(const CampaignRecord& r, Doc& d) {
  if (r.arms.size() < 2 || r.families.empty()) return;
  const std::string& baseline = r.arms[0].label;
  for (std::size_t k = 1; k < r.arms.size(); ++k) {
    const std::string& candidate = r.arms[k].label;
    const std::vector<FamilyComparison> cmp = CompareArms(r.families, baseline, candidate);
    if (cmp.empty()) continue;
    // The common n, stated once; other cells state theirs.
    std::map<std::pair<std::size_t, std::size_t>, int> ns;
    for (const FamilyComparison& c : cmp) ++ns[{c.n_baseline, c.n_candidate}];
    const auto common = std::max_element(ns.begin(), ns.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
    d.Line("## A/B: {} vs {}", candidate, baseline);
    d.Blank();
    d.Line("Each cell: the ratio of geometric means of session scores ({} / {}) with its Welch 95% interval on the log scores; **bold** "
           "when the interval excludes 1. n = {} {} and {} {} sessions{}. Session scores are defined in docs/statistics.md "
           "(\"Session scores\").",
           candidate, baseline, common.first, baseline, common.second, candidate,
           ns.size() > 1 ? " unless a cell says otherwise" : "");
    d.Blank();
    std::vector<std::string> head = {"family"};
    for (const LayoutRecord& l : r.layouts) head.push_back(l.name);
    d.Line("{}", Header(head));
    std::vector<std::string> rows;
    std::map<std::string, std::map<std::string, std::string>> cells;  // family → layout → cell
    for (const FamilyComparison& c : cmp) {
      const std::string& family = c.scores->family;
      if (!cells.contains(family)) rows.push_back(family);
      std::string cell = kNone;
      if (c.interval) {
        cell = fmt::format("{:.3f} ({:.3f}–{:.3f})", c.interval->ratio, c.interval->lo, c.interval->hi);
        if (c.interval->excludes_one()) cell = "**" + cell + "**";
      }
      if (std::make_pair(c.n_baseline, c.n_candidate) != common) cell += fmt::format(" n={}/{}", c.n_baseline, c.n_candidate);
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

void GreedyAgreement(const CampaignRecord& r, Doc& d) {
  const std::vector<GreedyPrompt> prompts = GreedyPrompts(r);
  if (prompts.empty()) return;
  d.Line("## Greedy output agreement");
  d.Blank();
  d.Line("Greedy prompts (the same request, nonce included) whose output was identical in every session of every arm that sent it; "
         "a prompt counts when at least two sessions sent it.");
  d.Blank();
  std::vector<const GreedyPrompt*> differing;
  for (const LayoutRecord& l : r.layouts) {
    int compared = 0, agreed = 0, across_arms = 0, across_arms_agreed = 0;
    for (const GreedyPrompt& p : prompts) {
      if (p.layout != l.name) continue;
      std::size_t senders = 0;
      for (const auto& [arm, by_sha] : p.outputs) {
        for (const auto& [sha, ids] : by_sha) senders += ids.size();
      }
      if (senders < 2) continue;
      ++compared;
      agreed += p.AllAgree() ? 1 : 0;
      if (p.outputs.size() >= 2) {
        ++across_arms;
        across_arms_agreed += p.AllAgree() ? 1 : 0;
      }
      if (!p.AllAgree()) differing.push_back(&p);
    }
    if (compared == 0) continue;
    d.Line("- {}: **{} of {}** prompts identical everywhere; across arms: {} of {}.", l.name, agreed, compared, across_arms_agreed,
           across_arms);
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

std::string MedianWithValues(const std::vector<double>& values) {
  if (values.empty()) return kNone;
  std::vector<std::string> listed;
  for (double v : values) listed.push_back(Rate(v));
  return fmt::format("**{}** ({})", Rate(stats::Median(values)), fmt::join(listed, ", "));
}

void Headline(const CampaignRecord& r, Doc& d) {
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
  d.Line("tok/s: the median over every repeat of every session of the arm (bold), then the repeats in run order; {}.", fmt::join(what, "; "));
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

void ContentTypes(const CampaignRecord& r, Doc& d) {
  std::vector<std::string> workloads;
  for (const FamilyScores& f : r.families) {
    if (f.metric == FamilyMetric::kCase && std::find(workloads.begin(), workloads.end(), f.workload) == workloads.end()) {
      workloads.push_back(f.workload);
    }
  }
  if (workloads.empty()) return;
  d.Line("## Content-type decode");
  d.Blank();
  d.Line("Median per-request decode rate, (completion_tokens − 1) / (t_finish − t_first_output), over the valid requests of every "
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

void DraftAcceptance(const CampaignRecord& r, Doc& d) {
  // Σ deltas per (layout, arm, workload, case) over distinct batches.
  struct Sums {
    std::int64_t accepted = 0, verified = 0, rounds = 0;
  };
  std::map<std::tuple<std::string, std::string, std::string>, std::map<std::string, Sums>> sums;  // (workload, case) → column → sums
  std::vector<std::pair<std::string, std::string>> order;
  std::set<std::tuple<std::int64_t, std::int64_t, int>> seen;
  bool any = false;
  for (const SampleRecord& x : r.samples) {
    const WorkloadRecord* w = r.Workload(x.run);
    const SessionRecord* s = r.Session(x.session);
    if (w == nullptr || s == nullptr || w->warmup || !x.draft.is_object() || !x.draft.contains("verified_drafts")) continue;
    if (!seen.insert({x.session, x.run, x.batch}).second) continue;
    const std::string case_id = w->kind == "mixed" ? "mixed" : x.case_id;
    const auto key = std::make_tuple(x.workload, case_id, std::string());
    if (!sums.contains(key)) order.push_back({x.workload, case_id});
    Sums& t = sums[key][s->layout + "\x1f" + s->arm];
    t.accepted += x.draft.value("accepted_drafts", std::int64_t{0});
    t.verified += x.draft.value("verified_drafts", std::int64_t{0});
    t.rounds += x.draft.value("request_rounds", std::int64_t{0});
    any = any || x.draft.value("verified_drafts", std::int64_t{0}) > 0;
  }
  if (!any) return;
  d.Line("## Draft acceptance");
  d.Blank();
  d.Line("Accepted per verified draft token, and tokens emitted per request round ((accepted + rounds) / rounds), from the `/v1/stats` "
         "counters read around each batch. A mixed batch counts as one case.");
  d.Blank();
  const std::vector<Column> columns = LayoutArmColumns(r);
  std::vector<std::string> head = {"workload", "case"};
  for (const Column& c : columns) head.push_back(c.head);
  d.Line("{}", Header(head, 2));
  for (const auto& [workload, case_id] : order) {
    std::vector<std::string> row = {workload, case_id};
    for (const Column& c : columns) {
      const auto& by_column = sums[std::make_tuple(workload, case_id, std::string())];
      const auto it = by_column.find(c.layout + "\x1f" + c.arm);
      if (it == by_column.end() || it->second.rounds == 0) {
        row.push_back(kNone);
        continue;
      }
      const Sums& t = it->second;
      const std::string acceptance = t.verified > 0 ? fmt::format("{:.3f}", static_cast<double>(t.accepted) / static_cast<double>(t.verified)) : kNone;
      row.push_back(fmt::format("{} · {:.2f}/round", acceptance, static_cast<double>(t.accepted + t.rounds) / static_cast<double>(t.rounds)));
    }
    d.Line("{}", Row(row));
  }
  d.Blank();
}

void Concurrency(const CampaignRecord& r, Doc& d) {
  // Series: (workload, case) of aggregate families, in family order.
  std::vector<std::pair<std::string, std::string>> series;
  std::map<std::pair<std::string, std::string>, std::set<int>> levels;
  std::map<std::pair<std::string, std::string>, std::string> kind;
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
    d.Blank();
  };
  bool any_concurrency = false, any_mixed = false;
  for (const auto& key : series) (kind[key] == "mixed" ? any_mixed : any_concurrency) = true;
  if (any_concurrency) {
    d.Line("## Concurrency scaling");
    d.Blank();
    d.Line("Aggregate throughput of a batch of C identical requests, Σ(ct − 1) / (max t_finish − min t_first_output), median over "
           "the batches of every session, tok/s; ×: relative to C1 of the same arm.");
    d.Blank();
    for (const auto& key : series) {
      if (kind[key] == "mixed") continue;
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
      if (kind[key] != "mixed") continue;
      d.Line("### {}", key.first);
      d.Blank();
      table(key, true);
    }
  }
}

void Retained(const CampaignRecord& r, Doc& d) {
  std::vector<const FamilyScores*> families;
  for (const FamilyScores& f : r.families) {
    if (f.metric == FamilyMetric::kRetained) families.push_back(&f);
  }
  if (families.empty()) return;
  d.Line("## Retained-context decode");
  d.Blank();
  d.Line("Decode rate of the follow-up turns on a retained prefix, median (min–max) over every session's follow-ups, tok/s.");
  d.Blank();
  const std::vector<Column> columns = LayoutArmColumns(r);
  std::vector<std::string> head = {"workload", "context"};
  for (const Column& c : columns) head.push_back(c.head);
  d.Line("{}", Header(head, 2));
  std::set<std::pair<std::string, int>> done;
  for (const FamilyScores* f : families) {
    if (!done.insert({f->workload, f->context}).second) continue;
    std::vector<std::string> row = {f->workload, fmt::format("{} tokens", f->context)};
    for (const Column& c : columns) {
      const FamilyScores* g = Find(r, c.layout, f->family);
      const std::vector<double> values = g ? Pooled(*g, c.arm) : std::vector<double>{};
      row.push_back(values.empty() ? kNone
                                   : fmt::format("{} ({}–{})", Rate(stats::Median(values)), Rate(stats::Min(values)), Rate(stats::Max(values))));
    }
    d.Line("{}", Row(row));
  }
  d.Blank();
}

void QualitySection(const CampaignRecord& r, Doc& d) {
  const Quality q = AssessQuality(r);
  d.Line("## Quality");
  d.Blank();
  int complete = 0;
  for (const SessionRecord& s : r.sessions) complete += s.status == "complete" ? 1 : 0;
  d.Line("Sessions: {} of {} complete.", complete, r.sessions.size());
  for (const SessionRecord* s : q.failed_sessions) {
    d.Line("- session {} ({}, {}) **failed** after {} attempt{}: {}", s->order_index + 1, s->layout, s->arm, s->attempts,
           s->attempts == 1 ? "" : "s", Cell(s->reason));
  }
  for (const SessionRecord* s : q.unfinished_sessions) {
    d.Line("- session {} ({}, {}) never completed (status {})", s->order_index + 1, s->layout, s->arm, s->status);
  }
  for (const SessionRecord* s : q.retried_sessions) {
    if (s->status == "complete") d.Line("- session {} ({}, {}) completed on attempt {}", s->order_index + 1, s->layout, s->arm, s->attempts);
  }
  d.Blank();
  // Per check and arm: failures of the samples the check ran on (measured workloads).
  std::map<std::string, std::map<std::string, int>> ran;
  for (const SampleRecord& x : r.samples) {
    const WorkloadRecord* w = r.Workload(x.run);
    const SessionRecord* s = r.Session(x.session);
    if (w == nullptr || s == nullptr || w->warmup) continue;
    for (const auto& [check, ok] : x.checks.items()) ++ran[check][s->arm];
  }
  if (q.failed_checks.empty()) {
    d.Line("Every check passed on every measured sample.");
  } else {
    d.Line("Failed checks, measured workloads (failed / checked, then the samples). Integrity checks (stream_complete, usage_consistent, "
           "cache_bound) decide whether a sample is a valid timing; an invalid sample is left out of every figure. Content checks judge "
           "the text; on a synthetic checkpoint (random weights) they are expected to fail.");
    d.Blank();
    std::vector<std::string> head = {"check"};
    for (const ArmRecord& a : r.arms) head.push_back(a.label);
    d.Line("{}", Header(head));
    for (const auto& [check, by_arm] : q.failed_checks) {
      std::vector<std::string> row = {check};
      for (const ArmRecord& a : r.arms) {
        const auto it = by_arm.find(a.label);
        const int n = it == by_arm.end() ? 0 : static_cast<int>(it->second.size());
        row.push_back(n == 0 ? fmt::format("0 / {}", ran[check][a.label])
                             : fmt::format("{} / {}: {}", n, ran[check][a.label], d.Links(it->second, 6)));
      }
      d.Line("{}", Row(row));
    }
  }
  d.Blank();
  std::vector<std::string> disclosed;
  if (q.failed_checks.contains("cache_bound")) {
    int n = 0;
    for (const auto& [arm, ids] : q.failed_checks.at("cache_bound")) n += static_cast<int>(ids.size());
    disclosed.push_back(fmt::format("{} sample{} reported more cached prompt tokens than the bound allows (the prompt hit the prefix "
                                    "cache): excluded from the figures",
                                    n, n == 1 ? "" : "s"));
  }
  for (const auto& [arm, ids] : q.token_flags) {
    disclosed.push_back(fmt::format("{}: {} sample{} where the server's completion_tokens and the tokenizer's count of the text differ by "
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
      which.push_back(fmt::format("{} ({:.0f}% busy)", s->order_index + 1, 100 * s->host.value("busy_fraction", 0.0)));
    }
    disclosed.push_back(fmt::format("sessions started while other work kept the CPUs busy: {}", fmt::join(which, ", ")));
  }
  for (const ArmRecord& a : r.arms) {
    if (a.kind == "external") {
      disclosed.push_back(fmt::format("arm {} is an external server: not relaunched, so its state (prefix cache, warm caches) carried "
                                      "across its sessions; each session used its own nonce markers",
                                      a.label));
    }
    for (const char* key : {"options", "worker_options"}) {
      if (!a.launch.contains(key) || !a.launch[key].is_array()) continue;
      const auto options = a.launch[key].get<std::vector<std::string>>();
      const auto it = std::find(options.begin(), options.end(), "--debug-slowdown");
      if (it != options.end() && it + 1 != options.end()) {
        disclosed.push_back(fmt::format("arm {} ran with `--debug-slowdown {}`: decode deliberately slowed (a test aid)", a.label, *(it + 1)));
      }
    }
  }
  if (!disclosed.empty()) {
    d.Line("Disclosed:");
    for (const std::string& line : disclosed) d.Line("- {}", line);
    d.Blank();
  }
}

void NoiseAndPower(const CampaignRecord& r, Doc& d) {
  if (r.families.empty()) return;
  d.Line("## Noise and power");
  d.Blank();
  d.Line("Spread of the log session scores (sample standard deviation, as %) per arm, and the sessions per arm a campaign needs to "
         "detect a 2% change (two-sided 95%, power 80%, normal approximation) at the larger spread.");
  d.Blank();
  std::vector<std::string> head = {"family", "layout"};
  for (const ArmRecord& a : r.arms) head.push_back("sd " + a.label);
  head.push_back("sessions for 2%");
  d.Line("{}", Header(head, 2));
  for (const FamilyScores& f : r.families) {
    std::vector<std::string> row = {Cell(f.family), f.layout};
    double worst = -1;
    for (const ArmRecord& a : r.arms) {
      const auto it = f.by_arm.find(a.label);
      if (it == f.by_arm.end() || it->second.size() < 2) {
        row.push_back(kNone);
        continue;
      }
      std::vector<double> logs;
      for (double v : it->second) logs.push_back(std::log(v));
      const double sd = stats::SampleStdDev(logs);
      worst = std::max(worst, sd);
      row.push_back(fmt::format("{:.1f}%", 100 * sd));
    }
    std::string needed = kNone;
    if (worst > 0) {
      try {
        needed = std::to_string(stats::SessionsNeeded(worst, 0.02));
      } catch (const stats::StatsError&) {
      }
    } else if (worst == 0) {
      needed = "2";
    }
    row.push_back(needed);
    d.Line("{}", Row(row));
  }
  d.Blank();
}

void Plots(const ReportOptions& o, Doc& d) {
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

void Appendix(const CampaignRecord& r, Doc& d) {
  if (d.linked.empty()) return;
  d.Line("## Appendix: samples referenced above");
  d.Blank();
  for (const SampleRecord& x : r.samples) {
    if (!d.linked.contains(x.id)) continue;
    const SessionRecord* s = r.Session(x.session);
    std::vector<std::string> failed;
    for (const auto& [check, ok] : x.checks.items()) {
      if (ok.is_boolean() && !ok.get<bool>()) failed.push_back(check);
    }
    const std::string excerpt = Excerpt(x.content, 160);
    d.Line("- <a id=\"sample-{}\"></a>**#{}** · session {} ({}, {}) · {} · {} · repeat {} · batch {} slot {} · {} tokens, finish {} · "
           "checks failed: {}{} · content `{}`{}",
           x.id, x.id, s ? s->order_index + 1 : 0, s ? s->layout : "?", s ? s->arm : "?", x.workload, x.case_id, x.repeat, x.batch, x.slot,
           x.completion_tokens, x.finish_reason.empty() ? kNone : x.finish_reason, failed.empty() ? "none" : fmt::format("{}", fmt::join(failed, ", ")),
           x.error.empty() ? "" : " · error: " + Cell(x.error), excerpt, excerpt.size() < x.content.size() ? "…" : "");
  }
  d.Blank();
}

}  // namespace

std::string RenderReport(const CampaignRecord& r, const ReportOptions& options) {
  Doc d;
  Title(r, d);
  Arms(r, d);
  Host(r, d);
  Protocol(r, d);
  AbTables(r, d);
  GreedyAgreement(r, d);
  Headline(r, d);
  ContentTypes(r, d);
  DraftAcceptance(r, d);
  Concurrency(r, d);
  Retained(r, d);
  QualitySection(r, d);
  NoiseAndPower(r, d);
  Plots(options, d);
  Appendix(r, d);
  while (d.text.size() >= 2 && d.text.substr(d.text.size() - 2) == "\n\n") d.text.pop_back();
  return d.text;
}

}  // namespace tandem::reports
