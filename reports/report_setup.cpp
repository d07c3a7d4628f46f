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
std::string DescribeGpu(const store::GpuFacts& g) {
  const auto number = [](const std::optional<double>& v) { return v ? fmt::format("{:g}", *v) : "?"; };
  return fmt::format("{} (power limit {} W, SM {} / {} MHz, memory {} / {} MHz)", g.name, number(g.power_limit_w), number(g.sm_clock_mhz),
                     number(g.max_sm_clock_mhz), number(g.memory_clock_mhz), number(g.max_memory_clock_mhz));
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
    d.Line("{}", Row({a.label, a.position == 0 ? "baseline" : "candidate", std::string(ToString(a.kind)),
                      a.revision.empty() ? kNone : "`" + a.revision + "`", ImageId(a.coordinator_image), ImageId(a.worker_image),
                      a.model_id.empty() ? kNone : a.model_id, Short(a.model_revision), Short(a.config_sha256)}));
  }
  d.Blank();
  for (const ArmRecord& a : r.arms) {
    std::vector<std::string> how;
    const store::ArmLaunch& l = a.launch;
    if (a.kind == store::ArmKind::kGit) how.push_back(fmt::format("built from {} at `{}`", l.repository, l.ref));
    if (a.kind == store::ArmKind::kBinary) how.push_back(fmt::format("`{}`", l.coordinator));
    // Stores redact secrets as they are written; an older store's are redacted here.
    if (a.kind == store::ArmKind::kCommand) how.push_back(fmt::format("command `{}`", RedactShellCommand(l.command)));
    if (a.kind == store::ArmKind::kMixed) {
      how.push_back(fmt::format("**mixed**: the coordinator of {}, the workers of {}",
                                l.coordinator_from.empty() ? "?" : l.coordinator_from, l.worker_from.empty() ? "?" : l.worker_from));
    }
    if (l.engine) {
      how.push_back(fmt::format("{} images `{}` (coordinator) and `{}` (workers){}", *l.engine, l.coordinator_image, l.worker_image,
                                l.run_args.empty() ? "" : fmt::format(", run with `{}`", fmt::join(RedactArgs(l.run_args), " "))));
    }
    if (a.kind == store::ArmKind::kExternal)
      how.push_back(fmt::format("external server {}: **not relaunched** between sessions", l.base_url));
    if (!l.options.empty()) how.push_back(fmt::format("coordinator options `{}`", fmt::join(RedactArgs(l.options), " ")));
    if (!l.worker_options.empty()) how.push_back(fmt::format("worker options `{}`", fmt::join(RedactArgs(l.worker_options), " ")));
    if (!l.env.empty()) {
      std::vector<std::string> env;
      for (const auto& [k, v] : l.env) env.push_back(k + "=" + (IsSecretName(k) ? std::string(kRedacted) : v));
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
  const store::HostFacts& h = r.host;
  const bool known = h.known;
  const HardwareMix mix = AssessHardware(r);
  if (!known && Machines(mix) < 2) return;
  d.Line("## Host");
  d.Blank();
  if (known) {
    d.Line("{} · memory {} · {} · host `{}`.", DescribeCpu(h), Memory(h.memory), h.kernel, h.hostname);
    for (const store::GpuFacts& g : h.gpus) d.Line("GPU {}: {}.", g.index, DescribeGpu(g));
  }
  std::vector<double> busy;
  int loaded = 0;
  for (const SessionRecord& s : r.sessions) {
    if (s.host.busy_fraction) busy.push_back(*s.host.busy_fraction);
    loaded += s.host.load_warning ? 1 : 0;
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
  std::map<std::string, store::HostFacts> first;
  std::map<std::string, std::vector<double>> busy_of;
  std::map<std::string, int> loaded_of;
  for (const SessionRecord& s : r.sessions) {
    for (const store::HostFacts& facts : s.host.hosts) {
      const std::string& name = facts.name;
      if (!first.contains(name)) first[name] = facts;
      if (facts.busy_fraction) busy_of[name].push_back(*facts.busy_fraction);
      loaded_of[name] += facts.load_warning ? 1 : 0;
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
    for (const store::GpuFacts& g : f.gpus) gpus.push_back(DescribeGpu(g));
    d.Line("{}",
           Row({name, Cell(DescribeCpu(f)), Memory(f.memory), Cell(f.kernel),
                b.empty() ? std::string(kNone) : fmt::format("{:.0f}% / {:.0f}%", 100 * stats::Median(b), 100 * stats::Max(b)),
                std::to_string(loaded_of[name]), gpus.empty() ? std::string(kNone) : Cell(fmt::format("{}", fmt::join(gpus, "; ")))}));
  }
  d.Blank();
}

namespace {

void LayoutTable(const CampaignRecord& r, MarkdownDoc& d) {
  d.Line("{}", Header({"layout", "workers", "experts", "local expert layers", "coordinator ranks", "wire", "partials",
                       "threads (coordinator / worker)", "CPU pinning"},
                      9));
  for (const LayoutRecord& l : r.layouts) {
    const int threads = l.coordinator_threads;
    const std::string pin = l.coordinator_cpus + (l.worker_cpus.empty() ? "" : " / " + l.worker_cpus);
    d.Line("{}",
           Row({l.name, std::to_string(l.workers), l.expert_parallel, std::to_string(l.local_expert_layers),
                std::to_string(l.coordinator_ranks), l.wire_dtype, l.partial_dtype,
                fmt::format("{} / {}", threads > 0 ? std::to_string(threads) : "all", l.worker_threads), pin.empty() ? "none" : pin}));
  }
  d.Blank();
}

// A figure measured over an emulated link must say so next to the layout.
void EmulatedLinks(const CampaignRecord& r, MarkdownDoc& d) {
  bool emulated = false;
  for (const LayoutRecord& l : r.layouts) {
    const int rtt = l.emulated_rtt_us;
    if (rtt <= 0) continue;
    d.Line(
        "Layout {}: emulated link, each worker handles a layer request {} µs after it arrives (`--emulated-rtt-us`), "
        "standing in for a network round trip slower than loopback.",
        l.name, rtt);
    emulated = true;
  }
  if (emulated) d.Blank();
}

// Where each layout's processes ran, when not all on the harness's machine.
void Placement(const CampaignRecord& r, MarkdownDoc& d) {
  bool placed = false;
  for (const LayoutRecord& l : r.layouts) {
    const std::vector<std::string>& workers = l.worker_hosts;
    const std::string& coordinator = l.coordinator_host;
    const bool remote =
        coordinator != "local" || std::any_of(workers.begin(), workers.end(), [](const std::string& w) { return w != "local"; });
    if (!remote) continue;
    d.Line("Layout {}: coordinator on host {}{}{}.", l.name, coordinator,
           workers.empty() ? "" : fmt::format(", workers on {}", fmt::join(workers, ", ")),
           l.peer_host.empty() ? "" : fmt::format(", peer rank on {}", l.peer_host));
    placed = true;
  }
  if (placed) d.Blank();
}

// Sequential: the session count is the most a layout may run; say where each stopped.
void SequentialStops(const CampaignRecord& r, MarkdownDoc& d) {
  d.Blank();
  d.Line(
      "Sequential: the gate looked after every block of {} sessions and a layout stopped once its gated families were decided{} "
      "(O'Brien–Fleming alpha spending; docs/statistics.md).",
      r.gate.block,
      r.gate.precision > 0 ? fmt::format(" and their 95% intervals lay within ±{:.1f}% of the ratio", 100 * r.gate.precision) : "");
  std::map<std::string, std::pair<int, int>> ran_skipped;
  for (const SessionRecord& s : r.sessions) {
    if (s.status == store::SessionStatus::kSkipped) {
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

// The order, as letters of the arms' positions.
void SessionOrder(const CampaignRecord& r, MarkdownDoc& d) {
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
  if (r.gate.sequential) SequentialStops(r, d);
  d.Blank();
}

void WorkloadList(const CampaignRecord& r, MarkdownDoc& d) {
  const std::vector<const WorkloadRecord*> plan = WorkloadPlan(r);
  bool any_warmup = false;
  for (const WorkloadRecord* w : plan) any_warmup = any_warmup || w->warmup;
  if (any_warmup) {
    d.Line("Warmup, stored but excluded from every figure:");
    for (const WorkloadRecord* w : plan) {
      if (w->warmup) d.Line("- {}", store::DescribeWorkload(w->name, w->kind, w->settings));
    }
    d.Blank();
  }
  if (std::none_of(plan.begin(), plan.end(), [](const WorkloadRecord* w) { return !w->warmup; })) {
    d.Line("No measured workloads: every session measures its launch only (Startup, Memory).");
    d.Blank();
    return;
  }
  d.Line(
      "Measured workloads, in this order in every session (each request's prompt starts with a single-token nonce marker, a pure "
      "function of the workload's seed and the request's position, so no two requests of a session share a prompt prefix):");
  for (const WorkloadRecord* w : plan) {
    if (!w->warmup) d.Line("- {}", store::DescribeWorkload(w->name, w->kind, w->settings));
  }
  d.Blank();
}

}  // namespace

void Protocol(const CampaignRecord& r, MarkdownDoc& d) {
  d.Line("## Protocol");
  d.Blank();
  LayoutTable(r, d);
  EmulatedLinks(r, d);
  Placement(r, d);
  SessionOrder(r, d);
  WorkloadList(r, d);
}

}  // namespace tandem::reports::sections
