#include <algorithm>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "common/input_error.hpp"
#include "harness/commands/campaign_run.hpp"
#include "store/campaign_record.hpp"

namespace tandem::harness {

// `--extend N`: N more sessions per layout, continuing each layout's order, and the gate's
// looks to go with them (every block when sequential, else one more at the new end). The
// gate then computes every look's boundary for the new size: docs/statistics.md says what
// that does to the error rates.
void Extend(store::Store& store, std::int64_t campaign, const Campaign& c, int more) {
  const int block = c.sessions.block(c.arms.size());
  if (c.sessions.order == SessionSpec::Order::kExplicit) {
    throw InputError(
        fmt::format("{}: an explicit session order cannot be extended; use a pattern (e.g. ABBA) or random", store.file().string()));
  }
  if (more % block != 0) throw InputError(fmt::format("--extend {}: must be a whole number of blocks of {} sessions", more, block));
  const std::vector<store::SessionRow> sessions = store.Sessions(campaign);
  store::GateDesign gate = store::LoadGateDesign(store, campaign);
  std::vector<int>& looks = gate.looks;
  int next = 0;
  for (const store::SessionRow& s : sessions) next = std::max(next, s.order_index + 1);
  std::map<std::string, std::vector<const store::SessionRow*>> by_layout;
  std::vector<std::string> layouts;
  for (const store::SessionRow& s : sessions) {
    if (!by_layout.contains(s.layout)) layouts.push_back(s.layout);
    by_layout[s.layout].push_back(&s);
  }
  int have = 0;
  store.Transaction([&] {
    for (const std::string& name : layouts) {
      const std::vector<const store::SessionRow*>& rows = by_layout[name];
      have = static_cast<int>(rows.size());
      if (std::any_of(rows.begin(), rows.end(), [](const store::SessionRow* r) { return r->status == store::SessionStatus::kSkipped; })) {
        std::cerr << fmt::format("layout {}: decided before its last session; not extended\n", name);
        continue;
      }
      Campaign longer = c;
      longer.sessions.per_layout = have + more;
      std::map<std::string, std::int64_t> arm_ids;
      for (const store::SessionRow* r : rows) arm_ids[r->arm] = r->arm_id;
      for (const PlannedSession& planned : PlanSessions(longer)) {
        if (planned.layout != name || planned.index_in_layout < have) continue;
        store.AddSession(campaign, next++, rows.front()->layout_id, arm_ids.at(planned.arm));
      }
    }
    if (c.sessions.until_decided) {
      for (int n = have + block; n <= have + more; n += block) looks.push_back(n);
    } else {
      looks.push_back(have + more);
    }
    gate.extended.push_back({have, have + more});
    store.SetCampaignGate(campaign, gate.ToJson());
  });
  std::cerr << fmt::format("extended campaign {} by {} sessions per layout ({} → {})\n", campaign, more, have, have + more);
}

}  // namespace tandem::harness
