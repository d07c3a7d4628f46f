#pragma once

#include <string>
#include <vector>

#include "harness/campaign/campaign.hpp"

namespace tandem::harness {

struct PlannedSession {
  int order_index = 0;  // position in the whole campaign, from 0
  int layout_index = 0;
  int index_in_layout = 0;
  std::string layout;
  std::string arm;
};

// The campaign's sessions in run order: each layout's sessions together, their arms
// following `sessions.order` — a pattern of arm letters repeated to per_layout
// (ABBA → ABBAABBA for 8), a balanced seeded shuffle (`random`), or an explicit
// list of labels. Deterministic for the same YAML.
std::vector<PlannedSession> PlanSessions(const Campaign& campaign);

// A stateless 64-bit mix (SplitMix64), the harness's only source of randomness.
std::uint64_t Mix64(std::uint64_t x);

}  // namespace tandem::harness
