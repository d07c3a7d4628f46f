#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "store/family_id.hpp"
#include "store/stored_enums.hpp"

namespace tandem::store {

class Store;

// One family's session scores (valid samples of measured workloads of complete
// sessions only; docs/statistics.md defines each). Names:
//   "<workload>: weighted decode"   kWeighted
//   "<workload>: <case>"            kCase
//   "<workload>: <case> C<n>"       kAggregate (case "mixed" for mixed traffic)
//   "<workload>: retained <n>"      kRetained
//   "<workload>: W per content case"  kPooledCases (≥ 2 weighted cases)
//   "<workload>: W <case> C<a>–C<b>"  kPooledLevels (≥ 2 levels above 1; case "mixed")
struct FamilyScores {
  std::string layout;
  std::string family;
  std::string workload;
  WorkloadKind kind = WorkloadKind::kBattery;
  bool greedy = true;  // the workload decodes greedily
  FamilyMetric metric = FamilyMetric::kWeighted;
  std::string case_id;                                               // kCase, kAggregate
  int level = 1;                                                     // kAggregate: concurrency
  int context = 0;                                                   // kRetained: prefix size
  std::map<std::string, std::vector<double>> by_arm;                 // arm label → scores, in run order
  std::map<std::string, std::vector<std::int64_t>> sessions_by_arm;  // the sessions they came from
  // What each score is the median of (repeats' weighted decodes, request rates, batch
  // aggregates), aligned with by_arm: values_by_arm[arm][i] gave by_arm[arm][i].
  std::map<std::string, std::vector<std::vector<double>>> values_by_arm;
  Direction direction = Direction::kHigherIsBetter;  // every decode family: a rate

  FamilyId Id() const;
};

// Every family of a campaign, in report order: greedy batteries (weighted, then each
// case), sampled batteries, then C1 of each concurrency case and mixed traffic, then
// their higher levels (code C2..C16, topic C2..C16, mixed C2..C16), then retained
// context; layouts in campaign order within each family.
std::vector<FamilyScores> ComputeSessionScores(const Store& store, std::int64_t campaign);

// Greedy output agreement, as the reference report states it.
struct GreedyAgreementCounts {
  // Within each arm (determinism): (prompt, arm) pairs the arm sent in ≥ 2 sessions, and
  // those whose output was identical in every one of them.
  int within_agree = 0, within_compared = 0;
  // Across arms: prompts sent by ≥ 2 arms, and those where every arm's (majority) output
  // is the same.
  int across_agree = 0, across_compared = 0;
};

// Marks `greedy_match` on every sample of a greedy workload: its content matches the
// majority of its own arm's samples with the same prompt — (layout, workload, case,
// repeat, batch, slot, nonce) — across complete sessions. Another arm's different text
// never fails a sample (another runtime may legitimately differ); the gate can require
// identity across arms (`gate.require_identical_greedy`).
GreedyAgreementCounts MarkGreedyMatches(Store& store, std::int64_t campaign);

}  // namespace tandem::store
