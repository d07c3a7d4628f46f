// Router::Route against a plain reading of DeepSeek's gate: score every expert,
// rank groups by sorting their members, mask the dropped groups, sort all experts
// and take the first k. Logits drawn from a few values so that ties (which the
// router breaks towards the lower index) are common.
#include "runtime/engine/router.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/model/synthetic_checkpoint.hpp"

namespace tandem::rt {
namespace {

std::vector<ExpertRoute> SortedRoutes(const ModelConfig& c, const std::vector<float>& bias, const std::vector<float>& logits) {
  const int n = c.n_routed_experts, k = c.num_experts_per_tok;
  std::vector<double> scores(static_cast<std::size_t>(n));
  for (int e = 0; e < n; ++e) {
    const double z = logits[static_cast<std::size_t>(e)];
    scores[static_cast<std::size_t>(e)] = 1.0 / (1.0 + std::exp(-z));  // sigmoid, as the configs below use
  }
  std::vector<double> choice = scores;
  if (c.topk_method == TopkMethod::kNoauxTc) {
    for (int e = 0; e < n; ++e) choice[static_cast<std::size_t>(e)] += bias[static_cast<std::size_t>(e)];
  }
  if (c.topk_method != TopkMethod::kGreedy && c.n_group > 1) {
    const int per_group = n / c.n_group;
    std::vector<std::pair<double, int>> groups;
    for (int g = 0; g < c.n_group; ++g) {
      std::vector<double> members(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
      std::sort(members.rbegin(), members.rend());
      const double score = c.topk_method == TopkMethod::kNoauxTc ? members[0] + (per_group > 1 ? members[1] : 0.0) : members[0];
      groups.push_back({-score, g});  // best first, ties to the lower group
    }
    std::sort(groups.begin(), groups.end());
    std::vector<bool> keep(static_cast<std::size_t>(c.n_group), false);
    for (int i = 0; i < c.topk_group; ++i) keep[static_cast<std::size_t>(groups[static_cast<std::size_t>(i)].second)] = true;
    for (int e = 0; e < n; ++e) {
      if (!keep[static_cast<std::size_t>(e / per_group)]) choice[static_cast<std::size_t>(e)] = -std::numeric_limits<double>::infinity();
    }
  }
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const double ca = choice[static_cast<std::size_t>(a)], cb = choice[static_cast<std::size_t>(b)];
    return ca != cb ? ca > cb : a < b;
  });
  double sum = 0.0;
  for (int i = 0; i < k; ++i) sum += scores[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])];
  std::vector<ExpertRoute> routes;
  for (int i = 0; i < k; ++i) {
    double w = scores[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])];
    if (c.norm_topk_prob && k > 1) w /= sum + 1e-20;
    w *= c.routed_scaling_factor;
    routes.push_back({order[static_cast<std::size_t>(i)], static_cast<float>(w)});
  }
  return routes;
}

TEST(Router, ChoosesWhatSortingEveryExpertChoosesWithTiesToTheLowerIndex) {
  for (const TopkMethod method : {TopkMethod::kNoauxTc, TopkMethod::kGroupLimitedGreedy, TopkMethod::kGreedy}) {
    ModelConfig c = FindPreset("small").config;
    c.architecture = Architecture::kDeepseekV3;
    c.scoring_func = ScoringFunc::kSigmoid;
    c.topk_method = method;
    c.norm_topk_prob = true;
    c.routed_scaling_factor = 2.5;
    std::mt19937 rng(static_cast<unsigned>(method) + 20);
    std::uniform_int_distribution<int> level(-3, 3);
    std::vector<float> bias(static_cast<std::size_t>(c.n_routed_experts));
    for (float& b : bias) b = 0.125f * static_cast<float>(level(rng));
    const Router router(c, method == TopkMethod::kNoauxTc ? bias : std::vector<float>());
    for (int trial = 0; trial < 500; ++trial) {
      std::vector<float> logits(static_cast<std::size_t>(c.n_routed_experts));
      for (float& l : logits) l = 0.5f * static_cast<float>(level(rng));
      std::vector<ExpertRoute> routes(static_cast<std::size_t>(c.num_experts_per_tok));
      router.Route(logits, routes);
      const std::vector<ExpertRoute> expected = SortedRoutes(c, bias, logits);
      for (std::size_t i = 0; i < routes.size(); ++i) {
        ASSERT_EQ(routes[i].expert, expected[i].expert) << "method " << static_cast<int>(method) << ", trial " << trial << ", rank " << i;
        ASSERT_EQ(routes[i].weight, expected[i].weight) << "method " << static_cast<int>(method) << ", trial " << trial << ", rank " << i;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::rt
