// What a session's launch cost, as the session's row stores it (store::SessionStartup): the
// launch record of its arm, each GPU's memory on the hosts its layout used, and whether the
// launch is one of the first of its arm in its layout (discarded: a cold page cache).
#include <set>
#include <sstream>

#include "harness/commands/campaign_run.hpp"
#include "harness/launch/arm_instance.hpp"
#include "harness/launch/host_facts.hpp"

namespace tandem::harness {

std::vector<store::GpuMemory> GpuMemoryOn(const Host& host) {
  std::vector<store::GpuMemory> out;
  CommandResult r;
  try {
    r = host.Run(
        "command -v nvidia-smi >/dev/null 2>&1 || exit 0\n"
        "nvidia-smi --query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits",
        std::chrono::seconds(30));
  } catch (const std::exception&) {
    return out;  // the host did not answer: no figure rather than a wrong one
  }
  if (r.code != 0) return out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const std::vector<std::string> f = SplitNvidiaSmiCsv(line);
    if (f.size() != 4) continue;
    try {
      out.push_back({host.name(), std::stoi(f[0]), f[1], std::stod(f[2]), std::stod(f[3])});
    } catch (const std::exception&) {
      continue;  // "[N/A]": this GPU does not say
    }
  }
  return out;
}

std::vector<const Host*> LayoutHosts(const LayoutSpec& layout, const Cluster& cluster) {
  std::set<std::string> names = {layout.coordinator_host};
  for (int w = 0; w < layout.workers; ++w) names.insert(WorkerHost(layout, w));
  if (layout.coordinator_ranks == 2) names.insert(PeerHost(layout));
  std::vector<const Host*> out;
  for (const std::string& name : names) out.push_back(&cluster.host(name));
  return out;
}

store::SessionStartup MeasureLaunch(const ArmInstance& instance, const LayoutSpec& layout, const Cluster& cluster, bool discarded) {
  const ArmInstance::LaunchRecord& launch = instance.launch_record();
  store::SessionStartup s;
  s.discarded = discarded;
  s.listening = launch.listening;
  s.ready_s = launch.ready_s;
  s.resident_bytes = launch.resident_bytes;
  s.server_phases = launch.server_phases;
  s.weight_bytes = launch.weight_bytes;
  s.worker_loads = launch.worker_loads;
  if (!launch.ready_s) return s;  // an external server: nothing was launched
  for (const Host* host : LayoutHosts(layout, cluster)) {
    for (store::GpuMemory& g : GpuMemoryOn(*host)) s.gpus.push_back(std::move(g));
  }
  return s;
}

int LaunchIndex(const std::vector<store::SessionRow>& sessions, const store::SessionRow& s) {
  int earlier = 0;
  for (const store::SessionRow& other : sessions) {
    earlier += other.layout == s.layout && other.arm == s.arm && other.order_index < s.order_index ? 1 : 0;
  }
  return earlier;
}

}  // namespace tandem::harness
