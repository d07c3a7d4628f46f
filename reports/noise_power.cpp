#include "reports/noise_power.hpp"

#include <algorithm>
#include <cmath>

#include "stats/descriptive.hpp"
#include "stats/sessions_needed.hpp"
#include "stats/stats_error.hpp"

namespace tandem::reports {

std::vector<FamilyNoise> AssessNoise(const std::vector<store::FamilyScores>& families, double change) {
  std::vector<FamilyNoise> out;
  for (const store::FamilyScores& f : families) {
    FamilyNoise n;
    n.family = &f;
    double worst = -1;
    for (const auto& [arm, scores] : f.by_arm) {
      if (scores.size() < 2) continue;
      std::vector<double> logs;
      for (double v : scores) logs.push_back(std::log(v));
      const double sd = stats::SampleStdDev(logs);
      n.log_sd[arm] = sd;
      worst = std::max(worst, sd);
    }
    if (worst > 0) {
      try {
        n.sessions_needed = stats::SessionsNeeded(worst, change);
      } catch (const stats::StatsError&) {
      }
    } else if (worst == 0) {
      n.sessions_needed = 2;  // no spread at all: the smallest campaign with an interval
    }
    out.push_back(std::move(n));
  }
  return out;
}

}  // namespace tandem::reports
