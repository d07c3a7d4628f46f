#include "harness/campaign/session_plan.hpp"

#include <algorithm>

namespace tandem::harness {

std::uint64_t Mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::vector<PlannedSession> PlanSessions(const Campaign& c) {
  const SessionSpec& s = c.sessions;
  std::vector<std::string> arms;  // one layout's sequence of arm labels
  switch (s.order) {
    case SessionSpec::Order::kPattern:
      for (int i = 0; i < s.per_layout; ++i) arms.push_back(c.arms[static_cast<std::size_t>(s.pattern[i % s.pattern.size()] - 'A')].label);
      break;
    case SessionSpec::Order::kExplicit:
      arms = s.sequence;
      break;
    case SessionSpec::Order::kRandom: {
      // Balanced: each arm in turn, then a Fisher–Yates shuffle driven by Mix64 (the
      // standard library's shuffle is not specified, so it could differ between builds).
      for (int i = 0; i < s.per_layout; ++i) arms.push_back(c.arms[static_cast<std::size_t>(i) % c.arms.size()].label);
      std::uint64_t state = s.seed;
      for (std::size_t i = arms.size(); i > 1; --i) {
        state = Mix64(state);
        std::swap(arms[i - 1], arms[state % i]);
      }
      break;
    }
  }
  std::vector<PlannedSession> plan;
  for (std::size_t l = 0; l < c.layouts.size(); ++l) {
    for (std::size_t i = 0; i < arms.size(); ++i) {
      plan.push_back({static_cast<int>(plan.size()), static_cast<int>(l), static_cast<int>(i), c.layouts[l].name, arms[i]});
    }
  }
  return plan;
}

}  // namespace tandem::harness
