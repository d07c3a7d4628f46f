#include "store/comparison.hpp"

#include <fmt/format.h>

#include "stats/stats_error.hpp"

namespace tandem::store {

std::vector<FamilyComparison> CompareArms(const std::vector<FamilyScores>& families, const std::string& baseline,
                                          const std::string& candidate, double level) {
  std::vector<FamilyComparison> out;
  for (const FamilyScores& f : families) {
    const auto a = f.by_arm.find(baseline), b = f.by_arm.find(candidate);
    if (a == f.by_arm.end() && b == f.by_arm.end()) continue;
    FamilyComparison c;
    c.scores = &f;
    c.n_baseline = a == f.by_arm.end() ? 0 : a->second.size();
    c.n_candidate = b == f.by_arm.end() ? 0 : b->second.size();
    if (c.n_baseline < 2 || c.n_candidate < 2) {
      const auto sessions = [](std::size_t n) { return fmt::format("{} session{}", n, n == 1 ? "" : "s"); };
      c.missing = c.n_baseline < 2 ? fmt::format("baseline: {} (needs 2)", sessions(c.n_baseline))
                                   : fmt::format("candidate: {} (needs 2)", sessions(c.n_candidate));
    } else {
      try {
        c.interval = stats::WelchLogRatio(a->second, b->second, level);
      } catch (const stats::StatsError& e) {
        c.missing = e.what();
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace tandem::store
