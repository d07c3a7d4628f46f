#include "runtime/engine/router.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::rt {

Router::Router(const ModelConfig& config, std::vector<float> correction_bias) : config_(config), bias_(std::move(correction_bias)) {}

namespace {

// Route's working vectors, kept per thread so a decode step does not allocate.
struct RouteScratch {
  std::vector<double> scores, choice, group_score;
  std::vector<int> groups, order;
  std::vector<bool> keep;
};

// The k best of [0, count) under `better` (a strict total order), best first, into
// `best`: one pass, each candidate inserted into the sorted list of the best so far.
template <typename Better>
void BestK(int count, int k, const Better& better, std::vector<int>& best) {
  best.resize(static_cast<std::size_t>(k));
  int found = 0;
  for (int e = 0; e < count; ++e) {
    if (found == k && !better(e, best[k - 1])) continue;
    int j = found < k ? found++ : k - 1;
    for (; j > 0 && better(e, best[j - 1]); --j) best[j] = best[j - 1];
    best[j] = e;
  }
}

}  // namespace

void Router::Route(std::span<const float> logits, std::span<ExpertRoute> routes) const {
  const int n = config_.n_routed_experts;
  const int k = config_.num_experts_per_tok;
  thread_local RouteScratch scratch;
  std::vector<double>& scores = scratch.scores;
  scores.assign(static_cast<std::size_t>(n), 0.0);
  switch (config_.scoring_func) {
    case ScoringFunc::kSoftmax: {
      const double max = *std::max_element(logits.begin(), logits.end());
      double sum = 0.0;
      for (int e = 0; e < n; ++e) sum += scores[e] = std::exp(logits[e] - max);
      for (double& s : scores) s /= sum;
      break;
    }
    case ScoringFunc::kSigmoid:
      for (int e = 0; e < n; ++e) scores[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[e])));
      break;
    case ScoringFunc::kSqrtSoftplus:
      for (int e = 0; e < n; ++e) {
        const double z = logits[e];
        const double softplus = z > 30.0 ? z : std::log1p(std::exp(z));  // exact to double precision above 30
        scores[e] = std::sqrt(softplus);
      }
      break;
  }

  constexpr double kMasked = -std::numeric_limits<double>::infinity();
  std::vector<double>& choice = scratch.choice;
  choice.assign(scores.begin(), scores.end());
  if (config_.topk_method == TopkMethod::kNoauxTc && !bias_.empty()) {
    for (int e = 0; e < n; ++e) choice[e] += bias_[e];
  }
  // A NaN score (from NaN logits) ranks last rather than breaking the ordering.
  for (double& c : choice) c = std::isnan(c) ? kMasked : c;
  if (config_.topk_method != TopkMethod::kGreedy && config_.n_group > 1) {
    const int per_group = n / config_.n_group;
    std::vector<double>& group_score = scratch.group_score;
    group_score.assign(static_cast<std::size_t>(config_.n_group), 0.0);
    for (int g = 0; g < config_.n_group; ++g) {
      // The group's best and second best member (duplicates count twice).
      double best = kMasked, second = kMasked;
      for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
        if (choice[e] > best) {
          second = best;
          best = choice[e];
        } else if (choice[e] > second) {
          second = choice[e];
        }
      }
      group_score[g] = config_.topk_method == TopkMethod::kNoauxTc ? best + (per_group > 1 ? second : 0.0) : best;
    }
    // The topk_group best groups, ties to the lower group.
    std::vector<int>& groups = scratch.groups;
    BestK(
        config_.n_group, config_.topk_group,
        [&](int a, int b) { return group_score[a] != group_score[b] ? group_score[a] > group_score[b] : a < b; }, groups);
    std::vector<bool>& keep = scratch.keep;
    keep.assign(static_cast<std::size_t>(config_.n_group), false);
    for (int g : groups) keep[g] = true;
    for (int e = 0; e < n; ++e) {
      if (!keep[e / per_group]) choice[e] = kMasked;
    }
  }

  // The k best experts, ties to the lower index.
  std::vector<int>& order = scratch.order;
  BestK(
      n, k, [&](int a, int b) { return choice[a] != choice[b] ? choice[a] > choice[b] : a < b; }, order);

  double sum = 0.0;
  for (int i = 0; i < k; ++i) sum += scores[order[i]];
  const bool normalise = k > 1 && config_.norm_topk_prob;
  const bool scale = config_.architecture == Architecture::kDeepseekV3 || !normalise;
  for (int i = 0; i < k; ++i) {
    double w = scores[order[i]];
    if (normalise) w /= sum + 1e-20;
    if (scale) w *= config_.routed_scaling_factor;
    routes[i] = {order[i], static_cast<float>(w)};
  }
}

}  // namespace tandem::rt
