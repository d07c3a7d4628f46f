#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tandem::harness {

class Store;

// One number per (session, family), computed from the stored samples (valid samples
// of measured workloads only; docs/statistics.md defines each):
//   "<workload>: weighted decode"   battery: median over repeats of the weighted decode
//   "<workload>: <case>"            battery: median decode rate of the case's requests
//   "<workload>: <case> C<n>"       concurrency: median over repeats of aggregate tok/s
//   "<workload>: mixed C<n>"        mixed: the same over the rotating batch
//   "<workload>: retained <n>"      retained_context: median decode rate of the children
struct FamilyScores {
  std::string layout;
  std::string family;
  std::map<std::string, std::vector<double>> by_arm;  // arm label → session scores, in run order
};

std::vector<FamilyScores> ComputeSessionScores(const Store& store, std::int64_t campaign);

// Marks `greedy_match` on every sample of a greedy workload: its content matches the
// majority of the samples with the same prompt — (layout, workload, case, repeat, batch,
// slot, nonce) — across complete sessions and arms. Returns (prompts whose outputs all
// agree, prompts sent at least twice).
std::pair<int, int> MarkGreedyMatches(Store& store, std::int64_t campaign);

}  // namespace tandem::harness
