#include <algorithm>

#include <fmt/format.h>

#include "harness/commands/campaign_run.hpp"
#include "store/campaign_record.hpp"
#include "store/gate_decision.hpp"

namespace tandem::harness {

// A sequential campaign looks after every block of a layout: once every gated family of
// the layout is decided, its remaining sessions are skipped (status "skipped"). The gate
// recomputes the same looks from the store, so `tandem gate` gives the verdict seen here.
void StopIfDecided(store::Store& store, std::int64_t campaign, const Campaign& c, std::vector<store::SessionRow>& sessions,
                   const store::SessionRow& done, Progress& progress) {
  if (!c.sessions.until_decided) return;
  int position = 0, total = 0;
  for (const store::SessionRow& s : sessions) {
    if (s.layout != done.layout) continue;
    if (s.order_index < done.order_index) ++position;
    ++total;
  }
  const std::vector<int> looks = store::LoadGateDesign(store, campaign).looks;
  if (std::find(looks.begin(), looks.end(), position + 1) == looks.end() || position + 1 == total) return;
  const store::CampaignRecord record = store::LoadCampaignRecord(store, campaign);
  std::vector<store::FamilyGate> gates;
  try {
    gates = store::DecideGate(record, record.gate);
  } catch (const std::exception& e) {
    progress.Line(fmt::format("[{}] look after {} sessions: {}; going on", done.layout, position + 1, e.what()));
    return;
  }
  if (!store::LayoutDecided(gates, done.layout)) {
    progress.Line(fmt::format("[{}] look after {} sessions: undecided, going on", done.layout, position + 1));
    return;
  }
  if (c.sessions.precision > 0) {
    const std::vector<const store::FamilyGate*> wide = store::ImpreciseFamilies(gates, done.layout, c.sessions.precision);
    if (!wide.empty()) {
      const std::optional<double> w = store::RelativeHalfWidth(*wide.front());
      progress.Line(fmt::format("[{}] look after {} sessions: decided, but {}'s interval {} (precision: ±{:.1f}%), going on", done.layout,
                                position + 1, wide.front()->family,
                                w ? fmt::format("is ±{:.1f}%", *w * 100) : std::string("is not computed yet"), c.sessions.precision * 100));
      return;
    }
  }
  const std::string why =
      fmt::format("not needed: the gated families of layout {} were decided{} after {} sessions", done.layout,
                  c.sessions.precision > 0 ? fmt::format(" and within ±{:.1f}%", c.sessions.precision * 100) : "", position + 1);
  int skipped = 0;
  for (store::SessionRow& s : sessions) {
    if (s.layout != done.layout || s.order_index <= done.order_index || s.status == store::SessionStatus::kComplete) continue;
    store.FinishSession(s.id, store::SessionStatus::kSkipped, why, "{}", "[]");
    s.status = store::SessionStatus::kSkipped;
    ++skipped;
  }
  progress.Line(fmt::format("[{}] decided{} after {} sessions: {} planned session(s) skipped", done.layout,
                            c.sessions.precision > 0 ? " and precise" : "", position + 1, skipped));
}

}  // namespace tandem::harness
