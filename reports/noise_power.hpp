#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/session_scores.hpp"

namespace tandem::reports {

// How noisy one family's session scores are, and what that costs a campaign.
struct FamilyNoise {
  const store::FamilyScores* family = nullptr;
  // arm → sample standard deviation of ln(session score), for arms with ≥ 2 sessions.
  std::map<std::string, double> log_sd;
  // Sessions per arm to detect a relative change of `change` at the larger spread
  // (stats::SessionsNeeded: two-sided 95%, power 80%); none when no arm has two
  // sessions or the spread is beyond what SessionsNeeded plans for.
  std::optional<std::size_t> sessions_needed;
};

// One entry per family, in the order given.
std::vector<FamilyNoise> AssessNoise(const std::vector<store::FamilyScores>& families, double change);

}  // namespace tandem::reports
