#include <fmt/format.h>

#include "harness/commands/campaign_run.hpp"
#include "stats/log_ratio.hpp"
#include "store/comparison.hpp"
#include "store/session_scores.hpp"

namespace tandem::harness {

void PrintSummary(const store::Store& store, std::int64_t campaign, const std::vector<ResolvedArm>& arms,
                  const store::GreedyAgreementCounts& greedy, std::ostream& out) {
  const std::vector<store::FamilyScores> families = ComputeSessionScores(store, campaign);
  if (families.empty() || arms.size() < 2) return;
  const std::string& a = arms[0].spec.label;
  out << fmt::format("\nsummary: candidate / baseline ratio of geometric means over sessions, Welch 95% interval (* excludes 1)\n");
  for (std::size_t k = 1; k < arms.size(); ++k) {
    const std::string& b = arms[k].spec.label;
    out << fmt::format("{} vs {}\n", b, a);
    std::string layout;
    std::size_t others = 0;  // latency, startup and memory: in the report, where each says which way is better
    for (const store::FamilyComparison& c : store::CompareArms(families, a, b)) {
      if (!store::IsDecodeRate(c.scores->metric) && !store::IsPrefill(c.scores->metric)) {  // the rates are listed
        ++others;
        continue;
      }
      if (c.scores->layout != layout) {
        out << fmt::format("  [{}]\n", c.scores->layout);
        layout = c.scores->layout;
      }
      std::string cell = "—";
      if (c.interval) {
        const stats::RatioInterval& r = *c.interval;
        cell =
            fmt::format("{:.3f} ({:.3f}–{:.3f}){} n={}/{}", r.ratio, r.lo, r.hi, r.excludes_one() ? " *" : "", r.n_baseline, r.n_candidate);
      } else if (c.n_baseline > 0 && c.n_candidate > 0) {
        cell = fmt::format("— ({})", c.missing);
      }
      out << fmt::format("    {:<40} {}\n", c.scores->family, cell);
    }
    if (others > 0) out << fmt::format("  and {} latency, startup and memory comparisons (lower is better): `tandem report`\n", others);
  }
  if (greedy.within_compared > 0) {
    out << fmt::format("greedy determinism: {} of {} prompts gave identical output in every session of the arm that sent them\n",
                       greedy.within_agree, greedy.within_compared);
  }
  if (greedy.across_compared > 0) {
    out << fmt::format("greedy agreement across arms: {} of {} prompts gave the same output in every arm\n", greedy.across_agree,
                       greedy.across_compared);
  }
  for (const ResolvedArm& arm : arms) {
    if (arm.spec.kind == ArmKind::kExternal) {
      out << fmt::format(
          "note: arm {} is an external server ({}), not relaunched between sessions: its state carried over, and its "
          "sessions after the first used salted nonces\n",
          arm.spec.label, arm.spec.base_url);
    }
  }
}

}  // namespace tandem::harness
