#pragma once

#include <optional>
#include <string>
#include <vector>

#include "stats/log_ratio.hpp"
#include "store/campaign_record.hpp"
#include "store/session_scores.hpp"

namespace tandem::store {

// One family in one layout, candidate against baseline: the Welch interval on the
// session log-scores, or why there is none.
struct FamilyComparison {
  const FamilyScores* scores = nullptr;
  std::optional<stats::RatioInterval> interval;
  std::string missing;  // e.g. "candidate: 1 session (needs 2)"; empty when `interval` is set
  std::size_t n_baseline = 0, n_candidate = 0;
};

// The paired interval of one family in one layout (`sessions.method: paired`): the
// layout's sessions in run order, two at a time (the adjacent pairs of an ABBA order:
// 1–2, 3–4, …); each pair must hold one baseline and one candidate session with a score.
// Pairs are by block position, never by index within an arm, so a lost session refuses
// the interval (naming the pair) instead of pairing sessions that did not run side by side.
struct PairedComparison {
  std::optional<stats::RatioInterval> interval;
  std::string missing;  // why there is none
  std::size_t pairs = 0;
};
PairedComparison PairByBlock(const CampaignRecord& record, const FamilyScores& family, const std::string& baseline,
                             const std::string& candidate);

// One arm's scores in two families, session by session (the sessions with a score in
// both): a concurrency level against C1 of the same sessions, say. The paired interval
// of candidate-family over baseline-family scores.
PairedComparison PairBySession(const FamilyScores& baseline, const FamilyScores& candidate, const std::string& arm);

// Every family (in the order given) that either arm measured.
std::vector<FamilyComparison> CompareArms(const std::vector<FamilyScores>& families, const std::string& baseline,
                                          const std::string& candidate, double level = 0.95);

}  // namespace tandem::store
