#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/redact.hpp"
#include "harness/campaign/spec_json.hpp"
#include "harness/commands/campaign_run.hpp"
#include "harness/traffic/workload_runner.hpp"
#include "store/record_fields.hpp"
#include "store/workload_description.hpp"

namespace tandem::harness {

void PrintPlan(const Prepared& p, std::ostream& out) {
  const Campaign& c = *p.campaign;
  out << fmt::format("campaign {} ({})\n", c.name, c.file.string());
  out << fmt::format("model    {} (revision {})\n", p.model.string(), p.model_revision.empty() ? "written on first run" : p.model_revision);
  out << "arms\n";
  for (const ResolvedArm& a : p.arms) {
    out << fmt::format("  {:<8} {:<8} revision {}\n", a.spec.label, ToString(a.spec.kind), a.revision);
    if (a.spec.kind == ArmKind::kMixed) {
      out << fmt::format("           the coordinator of {}, the workers of {}\n", a.spec.coordinator_from, a.spec.worker_from);
    }
    for (const auto& [role, image] : {std::pair{"coordinator", &a.coordinator}, std::pair{"worker     ", &a.worker}}) {
      if (image->container()) {
        out << fmt::format("           {} {} {} image {}\n", role, image->engine, image->image,
                           image->id.empty() ? std::string("(read on each host)") : image->id.substr(0, 19));
      } else if (!image->executable.empty()) {
        out << fmt::format("           {} {} image {}\n", role, image->executable.string(),
                           a.built ? image->id.substr(0, 16) : std::string("(built on the first run)"));
      }
    }
    if (!a.spec.base_url.empty()) out << fmt::format("           external server {} (not relaunched)\n", a.spec.base_url);
    if (!a.spec.api_key_env.empty())
      out << fmt::format("           API key from ${} (sent as Authorization: Bearer)\n", a.spec.api_key_env);
    if (!a.spec.coordinator_command.empty()) out << fmt::format("           command {}\n", RedactShellCommand(a.spec.coordinator_command));
    if (!a.spec.worker_command.empty()) out << fmt::format("           worker command {}\n", RedactShellCommand(a.spec.worker_command));
    if (!a.spec.options.empty()) out << fmt::format("           options {}\n", fmt::join(RedactArgs(a.spec.options), " "));
    if (!a.spec.worker_options.empty()) {
      out << fmt::format("           worker options {}\n", fmt::join(RedactArgs(a.spec.worker_options), " "));
    }
  }
  out << "layouts\n";
  std::size_t width = 0;
  for (const LayoutSpec& l : c.layouts) width = std::max(width, l.name.size());
  for (const LayoutSpec& l : c.layouts) {
    out << fmt::format("  {:<{}}  {} workers {}, local expert layers {}, coordinator ranks {}, wire {}, partials {}{}\n", l.name, width,
                       l.workers, l.expert_parallel, l.local_expert_layers, l.coordinator_ranks, l.wire_dtype, l.partial_dtype,
                       l.emulated_rtt_us > 0 ? fmt::format(", emulated link {} us", l.emulated_rtt_us) : "");
    if (c.hosts.size() > 1) {
      std::vector<std::string> workers;
      for (int w = 0; w < l.workers; ++w) workers.push_back(WorkerHost(l, w));
      out << fmt::format("  {:<{}}  coordinator on {}{}{}\n", "", width, l.coordinator_host,
                         workers.empty() ? "" : fmt::format(", workers on {}", fmt::join(workers, " ")),
                         l.coordinator_ranks == 2 ? fmt::format(", peer on {}", PeerHost(l)) : "");
    }
  }
  if (c.hosts.size() > 1) {
    out << "hosts\n";
    for (const HostSpec& h : c.hosts) {
      if (h.local()) continue;
      out << fmt::format("  {:<12} ssh {}{}, reached at {}\n", h.name, h.ssh, h.port > 0 ? fmt::format(" port {}", h.port) : "", h.address);
    }
    if (p.cluster) out << "  every host answered and was checked (--check-hosts); what a run would copy or pull is listed above\n";
  }
  if (c.sessions.until_decided) {
    out << fmt::format("sessions (at most {} per layout: the gate looks after every block of {} and stops a layout once it is decided{})\n",
                       c.sessions.per_layout, c.sessions.block(c.arms.size()),
                       c.sessions.precision > 0 ? fmt::format(" and within ±{:.1f}%", 100 * c.sessions.precision) : "");
  } else {
    out << fmt::format("sessions ({} per layout)\n", c.sessions.per_layout);
  }
  std::string current;
  for (const PlannedSession& s : p.plan) {
    if (s.layout != current) {
      out << fmt::format("  {}: ", s.layout);
      current = s.layout;
    }
    out << s.arm << (s.index_in_layout + 1 == c.sessions.per_layout ? "\n" : " ");
  }
  out << fmt::format("workloads (each session, {} requests)\n", p.requests_per_session);
  for (const auto* list : {&c.warmup, &c.workloads}) {
    for (const WorkloadSpec& w : *list) {
      out << fmt::format("  {}{}; {} requests\n", w.warmup ? "[warmup] " : "",
                         store::DescribeWorkload(w.name, w.kind, store::ReadWorkloadSettings(WorkloadSpecJson(w), w.name)),
                         CountRequests(w, p.corpus));
    }
  }
  out << fmt::format("store    {}\n", c.store.string());
}

}  // namespace tandem::harness
