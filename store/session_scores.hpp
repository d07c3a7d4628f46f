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
//   "<workload>: TTFT p99"          kTtft, kItl, kTpot, kE2e of a battery (lower is better)
//   "<workload>: TTFT p99 C4"       the same of one level of a concurrency or mixed workload
struct FamilyScores {
  std::string layout;
  std::string family;
  std::string workload;
  WorkloadKind kind = WorkloadKind::kBattery;
  bool greedy = true;  // the workload decodes greedily
  FamilyMetric metric = FamilyMetric::kWeighted;
  std::string case_id;  // kCase, kAggregate
  int level = 1;        // kAggregate: concurrency
  int context = 0;      // kRetained: context size; kPrefill: the cell's base
  int new_tokens = 0;   // kPrefill: the tokens the cell adds to its base
  int percentile = 0;   // latency metrics: the session's score is this percentile of its values, not their median
  std::map<std::string, std::vector<double>> by_arm;                 // arm label → scores, in run order
  std::map<std::string, std::vector<std::int64_t>> sessions_by_arm;  // the sessions they came from
  // What each score is the median of (repeats' weighted decodes, request rates, batch
  // aggregates), aligned with by_arm: values_by_arm[arm][i] gave by_arm[arm][i].
  std::map<std::string, std::vector<std::vector<double>>> values_by_arm;
  Direction direction = Direction::kHigherIsBetter;  // every decode family: a rate
  // Latency: sessions of each arm with too few requests for the percentile (LatencyMinimumRequests);
  // they have no score. A family may have no score at all: then this says why.
  std::map<std::string, int> not_estimable_by_arm;

  FamilyId Id() const;
};

// Every family of a campaign, in report order: greedy batteries (weighted, then each
// case), sampled batteries, then C1 of each concurrency case and mixed traffic, then
// their higher levels (code C2..C16, topic C2..C16, mixed C2..C16), then retained
// context; layouts in campaign order within each family.
std::vector<FamilyScores> ComputeSessionScores(const Store& store, std::int64_t campaign);

// The fewest requests a session needs behind a latency percentile: a p99 of fewer than 20
// is one request's time, not a tail (p90: 10; p50: 1).
int LatencyMinimumRequests(int percentile);

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
