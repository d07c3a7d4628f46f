#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/redact.hpp"
#include "reports/host_hardware.hpp"
#include "reports/report_sections.hpp"
#include "stats/descriptive.hpp"
#include "store/workload_description.hpp"

namespace tandem::reports::sections {

using nlohmann::json;
using store::ArmRecord;
using store::CampaignRecord;
using store::LayoutRecord;
using store::SessionRecord;
using store::WorkloadRecord;

namespace {

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

// The workloads as every session ran them: first occurrence of each name, in order.
std::vector<const WorkloadRecord*> WorkloadPlan(const CampaignRecord& r) {
  std::vector<const WorkloadRecord*> out;
  std::set<std::string> seen;
  for (const WorkloadRecord& w : r.workloads) {
    if (seen.insert(w.name).second) out.push_back(&w);
  }
  return out;
}

// An image's identity, short: a container image ID as docker prints it (12 hex digits).
std::string ImageId(const std::string& id) { return Short(id, id.rfind("sha256:", 0) == 0 ? 19 : 16); }

// One GPU of nvidia-smi's facts: "NVIDIA H200 (power limit 700 W, SM 1980 / 1980 MHz, memory 3201 / 3201 MHz)".
std::string DescribeGpu(const json& g) {
  const auto number = [&](const char* key) {
    return g.contains(key) ? (g[key].is_number() ? fmt::format("{:g}", g[key].get<double>()) : g[key].dump()) : "?";
  };
  return fmt::format("{} (power limit {} W, SM {} / {} MHz, memory {} / {} MHz)", g.value("name", "?"), number("power_limit_w"),
                     number("sm_clock_mhz"), number("max_sm_clock_mhz"), number("memory_clock_mhz"), number("max_memory_clock_mhz"));
}

// When the sessions did not all run on the same hardware: which ran where, per arm, and
// for each pair the gate compares whether the arms are spread alike over the machines.
void Hardware(const CampaignRecord& r, const HardwareMix& mix, MarkdownDoc& d) {
  const std::size_t machines = Machines(mix);
  if (machines < 2) return;
  d.Line(
      "**The hardware changed during the campaign**: its completed sessions ran on {} different machines (as each session's host "
      "facts describe them). Interleaving keeps a ratio fair only where each machine ran the arms' sessions in like shares; "
      "absolute rates mix machines.",
      machines);
  d.Blank();
  std::vector<std::string> header = {"layout", "machine"};
  for (const ArmRecord& a : r.arms) header.push_back(a.label + " sessions");
  d.Line("{}", Header(header, 2));
  for (const auto& [layout, by_hardware] : mix) {
    for (const auto& [hardware, arms] : by_hardware) {
      std::vector<std::string> row = {layout, Cell(hardware)};
      for (const ArmRecord& a : r.arms) row.push_back(std::to_string(arms.contains(a.label) ? arms.at(a.label) : 0));
      d.Line("{}", Row(row));
    }
  }
  d.Blank();
  bool listed = false;
  for (std::size_t i = 1; i < r.arms.size(); ++i) {
    for (const std::string& s : LopsidedHardware(mix, r.arms[0].label, r.arms[i].label)) {
      d.Line("- {} against {}: {}.", r.arms[i].label, r.arms[0].label, s);
      listed = true;
    }
  }
  if (listed) d.Blank();
}

bool UsesOtherHosts(const CampaignRecord& r) {
  for (const ArmRecord& a : r.arms) {
    for (const store::ArmImageRecord& i : a.images) {
      if (i.host != "local") return true;
    }
  }
  return false;
}

}  // namespace

void Title(const CampaignRecord& r, MarkdownDoc& d) {
  d.Line("# {}: release report", r.name);
  d.Blank();
  d.Line(
      "Campaign {} in `{}`, created {}, status **{}**. Campaign file `{}` (sha256 {}). Every figure below is recomputed by "
      "`tandem report` from the stored samples; \"{}\" marks a value the campaign did not produce.",
      r.id, r.store_path, r.created_at, r.status, r.file, Short(r.yaml_sha256, 12), kNone);
  d.Blank();
}

void Arms(const CampaignRecord& r, MarkdownDoc& d) {
  d.Line("## Arms");
  d.Blank();
  d.Line("{}", Header({"arm", "role", "source", "runtime revision", "coordinator image", "worker image", "model", "model revision",
                       "config sha256"},
                      9));
  for (const ArmRecord& a : r.arms) {
    d.Line("{}", Row({a.label, a.position == 0 ? "baseline" : "candidate", a.kind, a.revision.empty() ? kNone : "`" + a.revision + "`",
                      ImageId(a.coordinator_image), ImageId(a.worker_image), a.model_id.empty() ? kNone : a.model_id,
                      Short(a.model_revision), Short(a.config_sha256)}));
  }
  d.Blank();
  for (const ArmRecord& a : r.arms) {
    std::vector<std::string> how;
    const json& l = a.launch;
    if (a.kind == "git") how.push_back(fmt::format("built from {} at `{}`", l.value("repository", ""), l.value("ref", "")));
    if (a.kind == "binary") how.push_back(fmt::format("`{}`", l.value("coordinator", "")));
    // Stores redact secrets as they are written; an older store's are redacted here.
    if (a.kind == "command") how.push_back(fmt::format("command `{}`", RedactShellCommand(l.value("command", ""))));
    if (a.kind == "mixed") {
      how.push_back(fmt::format("**mixed**: the coordinator of {}, the workers of {}", l.value("coordinator_from", "?"),
                                l.value("worker_from", "?")));
    }
    if (l.contains("engine")) {
      how.push_back(
          fmt::format("{} images `{}` (coordinator) and `{}` (workers){}", l.value("engine", ""), l.value("coordinator_image", ""),
                      l.value("worker_image", ""),
                      l.contains("run_args") && l["run_args"].is_array() && !l["run_args"].empty()
                          ? fmt::format(", run with `{}`", fmt::join(RedactArgs(l["run_args"].get<std::vector<std::string>>()), " "))
                          : ""));
    }
    if (a.kind == "external")
      how.push_back(fmt::format("external server {}: **not relaunched** between sessions", l.value("base_url", "")));
    for (const char* key : {"options", "worker_options"}) {
      if (l.contains(key) && l[key].is_array() && !l[key].empty()) {
        how.push_back(fmt::format("{} `{}`", key == std::string("options") ? "coordinator options" : "worker options",
                                  fmt::join(RedactArgs(l[key].get<std::vector<std::string>>()), " ")));
      }
    }
    if (l.contains("env") && l["env"].is_object() && !l["env"].empty()) {
      std::vector<std::string> env;
      for (const auto& [k, v] : l["env"].items()) {
        env.push_back(k + "=" + (IsSecretName(k) ? std::string(kRedacted) : v.is_string() ? v.get<std::string>() : v.dump()));
      }
      how.push_back(fmt::format("environment `{}`", fmt::join(env, " ")));
    }
    d.Line("- **{}**: {}.", a.label, fmt::join(how, "; "));
  }
  d.Line("- Model: `{}`, revision `{}`.", r.model_path, r.model_revision.empty() ? kNone : r.model_revision);
  d.Blank();
  if (!UsesOtherHosts(r)) return;
  // Where each role ran: one row per arm and host, one column per role.
  d.Line(
      "Images per host, read on each host before the first session (an executable's sha256 computed there, a container image's "
      "ID there; the harness refuses a campaign whose hosts disagree):");
  d.Blank();
  d.Line("{}", Header({"arm", "host", "coordinator image", "worker image"}, 4));
  for (const ArmRecord& a : r.arms) {
    std::map<std::string, std::pair<std::string, std::string>> by_host;
    for (const store::ArmImageRecord& i : a.images) (i.role == "coordinator" ? by_host[i.host].first : by_host[i.host].second) = i.id;
    for (const auto& [host, ids] : by_host) {
      d.Line("{}", Row({a.label, host, ids.first.empty() ? kNone : ImageId(ids.first), ids.second.empty() ? kNone : ImageId(ids.second)}));
    }
  }
  d.Blank();
}

void Host(const CampaignRecord& r, MarkdownDoc& d) {
  const json& h = r.host;
  const bool known = h.is_object() && !h.empty();
  const HardwareMix mix = AssessHardware(r);
  if (!known && Machines(mix) < 2) return;
  d.Line("## Host");
  d.Blank();
  if (known) {
    d.Line("{} · memory {} · {} · host `{}`.", DescribeCpu(h), Memory(h.value("memory", "?")), h.value("kernel", "?"),
           h.value("hostname", "?"));
    if (h.contains("gpus") && h["gpus"].is_array()) {
      for (const json& g : h["gpus"]) d.Line("GPU {}: {}.", g.value("index", 0.0), DescribeGpu(g));
    }
  }
  std::vector<double> busy;
  int loaded = 0;
  for (const SessionRecord& s : r.sessions) {
    if (s.host.is_object() && s.host.contains("busy_fraction")) busy.push_back(s.host["busy_fraction"].get<double>());
    loaded += s.host.is_object() && s.host.value("load_warning", false) ? 1 : 0;
  }
  if (!busy.empty()) {
    d.Line(
        "CPUs busy in the second before each session: median {:.0f}%, at most {:.0f}%; {} of {} sessions started under other load "
        "(> 25% busy).",
        100 * stats::Median(busy), 100 * stats::Max(busy), loaded, busy.size());
  }
  d.Blank();
  Hardware(r, mix, d);
  // The other hosts, as each session read them: the first reading, and the busy samples of all.
  std::map<std::string, json> first;
  std::map<std::string, std::vector<double>> busy_of;
  std::map<std::string, int> loaded_of;
  for (const SessionRecord& s : r.sessions) {
    if (!s.host.is_object() || !s.host.contains("hosts") || !s.host["hosts"].is_object()) continue;
    for (const auto& [name, facts] : s.host["hosts"].items()) {
      if (!first.contains(name)) first[name] = facts;
      if (facts.contains("busy_fraction")) busy_of[name].push_back(facts["busy_fraction"].get<double>());
      loaded_of[name] += facts.value("load_warning", false) ? 1 : 0;
    }
  }
  if (first.empty()) return;
  d.Line(
      "The other hosts, read over SSH before every session (CPU busy in the second before it: median, most; sessions under "
      "other load):");
  d.Blank();
  d.Line("{}", Header({"host", "CPU", "memory", "kernel", "busy", "loaded", "GPUs"}, 2));
  for (const auto& [name, f] : first) {
    const std::vector<double>& b = busy_of[name];
    std::vector<std::string> gpus;
    if (f.contains("gpus") && f["gpus"].is_array()) {
      for (const json& g : f["gpus"]) gpus.push_back(DescribeGpu(g));
    }
    d.Line("{}",
           Row({name, Cell(DescribeCpu(f)), Memory(f.value("memory", "?")), Cell(f.value("kernel", "?")),
                b.empty() ? std::string(kNone) : fmt::format("{:.0f}% / {:.0f}%", 100 * stats::Median(b), 100 * stats::Max(b)),
                std::to_string(loaded_of[name]), gpus.empty() ? std::string(kNone) : Cell(fmt::format("{}", fmt::join(gpus, "; ")))}));
  }
  d.Blank();
}

void Protocol(const CampaignRecord& r, MarkdownDoc& d) {
  d.Line("## Protocol");
  d.Blank();
  d.Line("{}", Header({"layout", "workers", "experts", "local expert layers", "coordinator ranks", "wire", "partials",
                       "threads (coordinator / worker)", "CPU pinning"},
                      9));
  for (const LayoutRecord& l : r.layouts) {
    const json& s = l.spec;
    const int threads = s.value("coordinator_threads", 0);
    const std::string pin =
        s.value("coordinator_cpus", "") + (s.value("worker_cpus", "").empty() ? "" : " / " + s.value("worker_cpus", ""));
    d.Line("{}", Row({l.name, std::to_string(s.value("workers", 0)), s.value("expert_parallel", "tp"),
                      std::to_string(s.value("local_expert_layers", 0)), std::to_string(s.value("coordinator_ranks", 1)),
                      s.value("wire_dtype", "bf16"), s.value("partial_dtype", "f64"),
                      fmt::format("{} / {}", threads > 0 ? std::to_string(threads) : "all", s.value("worker_threads", 1)),
                      pin.empty() ? "none" : pin}));
  }
  d.Blank();
  // A figure measured over an emulated link must say so next to the layout.
  bool emulated = false;
  for (const LayoutRecord& l : r.layouts) {
    const int rtt = l.spec.value("emulated_rtt_us", 0);
    if (rtt <= 0) continue;
    d.Line(
        "Layout {}: emulated link, each worker handles a layer request {} µs after it arrives (`--emulated-rtt-us`), "
        "standing in for a network round trip slower than loopback.",
        l.name, rtt);
    emulated = true;
  }
  if (emulated) d.Blank();
  // Where each layout's processes ran, when not all on the harness's machine.
  bool placed = false;
  for (const LayoutRecord& l : r.layouts) {
    const json& spec = l.spec;
    std::vector<std::string> workers;
    if (spec.contains("worker_hosts") && spec["worker_hosts"].is_array()) {
      for (const json& w : spec["worker_hosts"]) workers.push_back(w.is_string() ? w.get<std::string>() : w.dump());
    }
    const std::string coordinator = spec.value("coordinator_host", "local");
    const bool remote =
        coordinator != "local" || std::any_of(workers.begin(), workers.end(), [](const std::string& w) { return w != "local"; });
    if (!remote) continue;
    d.Line("Layout {}: coordinator on host {}{}{}.", l.name, coordinator,
           workers.empty() ? "" : fmt::format(", workers on {}", fmt::join(workers, ", ")),
           spec.value("peer_host", "").empty() ? "" : fmt::format(", peer rank on {}", spec.value("peer_host", "")));
    placed = true;
  }
  if (placed) d.Blank();
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
  d.Line(
      "Sessions: {}{} per layout, run layout after layout, arms interleaved in the order {} ({}). Every session launches its arm's "
      "coordinator and workers from scratch {}, waits until `/health` answers and `/v1/models` lists the model, runs the "
      "warmup and then the measured workloads, reads `/v1/stats` around each workload, and stops every process it started.",
      r.gate.sequential ? "at most " : "", per_layout.empty() ? 0 : per_layout.begin()->second, order, fmt::join(letters, ", "),
      UsesOtherHosts(r) ? "on its layout's hosts (over SSH)" : "on loopback");
  if (distinct.size() > 1) {
    for (const auto& [layout, o] : orders) d.Line("- {}: {}", layout, o);
  }
  if (r.gate.sequential) {
    // Sequential: the count above is the most a layout may run; say where each stopped.
    d.Blank();
    d.Line(
        "Sequential: the gate looked after every block of {} sessions and a layout stopped once its gated families were decided{} "
        "(O'Brien–Fleming alpha spending; docs/statistics.md).",
        r.gate.block,
        r.gate.precision > 0 ? fmt::format(" and their 95% intervals lay within ±{:.1f}% of the ratio", 100 * r.gate.precision) : "");
    std::map<std::string, std::pair<int, int>> ran_skipped;
    for (const SessionRecord& s : r.sessions) {
      if (s.status == "skipped") {
        ++ran_skipped[s.layout].second;
      } else {
        ++ran_skipped[s.layout].first;
      }
    }
    for (const auto& [layout, counts] : ran_skipped) {
      d.Line("- {}: {} sessions run{}", layout, counts.first,
             counts.second > 0 ? fmt::format(", then decided ({} not needed)", counts.second) : ", the most it plans");
    }
  }
  d.Blank();
  const std::vector<const WorkloadRecord*> plan = WorkloadPlan(r);
  bool any_warmup = false;
  for (const WorkloadRecord* w : plan) any_warmup = any_warmup || w->warmup;
  if (any_warmup) {
    d.Line("Warmup, stored but excluded from every figure:");
    for (const WorkloadRecord* w : plan) {
      if (w->warmup) d.Line("- {}", store::DescribeWorkload(w->name, w->kind, w->spec));
    }
    d.Blank();
  }
  d.Line(
      "Measured workloads, in this order in every session (each request's prompt starts with a single-token nonce marker, a pure "
      "function of the workload's seed and the request's position, so no two requests of a session share a prompt prefix):");
  for (const WorkloadRecord* w : plan) {
    if (!w->warmup) d.Line("- {}", store::DescribeWorkload(w->name, w->kind, w->spec));
  }
  d.Blank();
}

}  // namespace tandem::reports::sections
