#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/commands/campaign_run.hpp"
#include "harness/launch/session_process.hpp"

namespace tandem::harness {

using nlohmann::json;

// A session left "running" belongs to a harness that died: its local processes got
// SIGKILL from the kernel (PR_SET_PDEATHSIG), but anything they started may remain, and on
// other hosts (processes, containers) everything may.
void KillLeftovers(store::Store& store, const Cluster& cluster, const store::SessionRow& s, Progress& progress) {
  int killed = 0;
  json processes = json::parse(store.SessionProcesses(s.id), nullptr, false);
  if (!processes.is_array()) processes = json::array();
  for (const json& p : processes) {
    if (!p.is_object()) continue;
    const std::string name = p.value("host", "local");
    try {
      killed += KillLeftovers(p, cluster.host(name));
    } catch (const std::out_of_range&) {
      progress.Line(fmt::format("session {}: process {} ran on host {}, which this campaign no longer uses: check it by hand",
                                s.order_index + 1, p.value("role", "?"), name));
    } catch (const std::exception& e) {
      progress.Line(fmt::format("session {}: could not clean up on host {}: {}", s.order_index + 1, name, e.what()));
    }
  }
  if (killed > 0)
    progress.Line(fmt::format("session {}: killed {} process(es) left running by the interrupted run", s.order_index + 1, killed));
}

}  // namespace tandem::harness
