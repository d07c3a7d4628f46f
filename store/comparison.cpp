#include "store/comparison.hpp"

#include <map>
#include <span>

#include <fmt/format.h>

#include "stats/stats_error.hpp"

namespace tandem::store {

namespace {

// Adds one arm's scores in family `f` to `score`, by session.
void ScoresBySession(const FamilyScores& f, const std::string& arm, std::map<std::int64_t, double>& score) {
  const auto scores = f.by_arm.find(arm);
  const auto ids = f.sessions_by_arm.find(arm);
  if (scores == f.by_arm.end() || ids == f.sessions_by_arm.end()) return;
  for (std::size_t i = 0; i < scores->second.size() && i < ids->second.size(); ++i) score[ids->second[i]] = scores->second[i];
}

void Interval(std::span<const stats::SessionPair> pairs, PairedComparison& out) {
  out.pairs = pairs.size();
  try {
    out.interval = stats::PairedLogRatio(pairs);
  } catch (const stats::StatsError& e) {
    out.missing = e.what();
  }
}

}  // namespace

PairedComparison PairByBlock(const CampaignRecord& r, const FamilyScores& f, const std::string& baseline, const std::string& candidate) {
  PairedComparison out;
  std::map<std::int64_t, double> score;  // session → this family's score
  ScoresBySession(f, baseline, score);
  ScoresBySession(f, candidate, score);
  std::vector<const SessionRecord*> order;  // the layout's sessions of the two arms, in run order
  for (const SessionRecord& s : r.sessions) {
    if (s.layout == f.layout && (s.arm == baseline || s.arm == candidate) && s.status != SessionStatus::kSkipped) order.push_back(&s);
  }
  if (order.size() % 2 != 0) {
    out.missing =
        fmt::format("paired: {} sessions of {} and {} in layout {}, not whole pairs", order.size(), baseline, candidate, f.layout);
    return out;
  }
  std::vector<stats::SessionPair> pairs;
  for (std::size_t k = 0; k + 1 < order.size(); k += 2) {
    const SessionRecord* x = order[k];
    const SessionRecord* y = order[k + 1];
    if (x->arm == y->arm) {
      out.missing = fmt::format("paired: sessions {} and {} of layout {} are both {}: the order does not pair the arms", x->order_index + 1,
                                y->order_index + 1, f.layout, x->arm);
      return out;
    }
    const SessionRecord* a = x->arm == baseline ? x : y;
    const SessionRecord* b = x->arm == baseline ? y : x;
    const auto sa = score.find(a->id), sb = score.find(b->id);
    if (sa == score.end() || sb == score.end()) {
      const SessionRecord* lost = sa == score.end() ? a : b;
      out.missing = fmt::format("paired: the pair of sessions {} and {} lost session {} ({}, {}): no score in this family",
                                x->order_index + 1, y->order_index + 1, lost->order_index + 1, lost->arm, ToString(lost->status));
      return out;
    }
    pairs.push_back({sa->second, sb->second});
  }
  Interval(pairs, out);
  return out;
}

PairedComparison PairBySession(const FamilyScores& baseline, const FamilyScores& candidate, const std::string& arm) {
  std::map<std::int64_t, double> a, b;
  ScoresBySession(baseline, arm, a);
  ScoresBySession(candidate, arm, b);
  std::vector<stats::SessionPair> pairs;
  for (const auto& [session, score] : b) {
    if (const auto at = a.find(session); at != a.end()) pairs.push_back({at->second, score});
  }
  PairedComparison out;
  Interval(pairs, out);
  return out;
}

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
