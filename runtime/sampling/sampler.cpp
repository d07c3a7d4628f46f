#include "runtime/sampling/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace tandem::rt {

std::uint64_t SplitMix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

namespace {

// TokenDraw in two parts, so a sample mixes (seed, position) once, not once per token.
std::uint64_t DrawStream(std::uint64_t seed, std::int64_t position) {
  return SplitMix64(seed ^ SplitMix64(static_cast<std::uint64_t>(position)));
}

double DrawOf(std::uint64_t stream, TokenId token) {
  const std::uint64_t bits = SplitMix64(stream ^ static_cast<std::uint64_t>(static_cast<std::uint32_t>(token)));
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;  // never 0 or 1: its log is finite and negative
}

}  // namespace

double TokenDraw(std::uint64_t seed, std::int64_t position, TokenId token) { return DrawOf(DrawStream(seed, position), token); }

TokenId ArgMax(std::span<const float> logits) {
  // std::max_element's index, found as the largest value in independent lanes the
  // compiler keeps in vector registers, then its first index (max_element's running
  // index is one serial chain: ~3 cycles a logit, a few percent of a decode step at a
  // 16K vocabulary). The same index with NaNs: max_element never moves to one (a
  // comparison with NaN is false) and stays on one only where it starts, at 0; the
  // lanes never take one either (v > lane is false for a NaN v).
  if (logits.empty() || logits[0] != logits[0]) return 0;
  constexpr std::size_t kLanes = 16;
  const std::size_t n = logits.size(), whole = n - n % kLanes;
  const float* x = logits.data();
  float lane[kLanes];
  std::fill_n(lane, kLanes, -std::numeric_limits<float>::infinity());
  for (std::size_t i = 0; i < whole; i += kLanes) {
    for (std::size_t j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  }
  float largest = x[0];
  for (std::size_t i = whole; i < n; ++i) largest = x[i] > largest ? x[i] : largest;
  for (const float v : lane) largest = v > largest ? v : largest;
  return static_cast<TokenId>(std::find(logits.begin(), logits.end(), largest) - logits.begin());
}

namespace {

// exp((logit − largest) / T) of every token, in token order, into `weight`; returns
// their sum (in that order: the normalising sum of the paths that do not sort the
// whole vocabulary).
double Weights(std::span<const float> logits, double inv_t, std::vector<double>& weight) {
  const double max = logits[static_cast<std::size_t>(ArgMax(logits))];
  weight.resize(logits.size());
  double total = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i) total += weight[i] = std::exp((logits[i] - max) * inv_t);
  return total;
}

// Sample without top-k or top-p (what an API client sends by default): no candidate
// order is needed, so none is sorted (sorting a 16K vocabulary by logit took ~1.5 ms a
// token). The same race over the same survivors as the sorted path: min-p keeps every
// token whose probability reaches min_p × the largest (the sorted path's prefix), a
// tie in the race goes to the higher logit, then the lower id (the earlier survivor in
// the sorted order). The normalising sum runs in token order instead of logit order,
// so the probabilities can differ from the sorted path's in the last bit — the token
// only where two race keys are that close. A token whose key cannot beat the best so
// far (−log u ≥ 1 − u) skips its logarithm.
TokenId SampleUnsorted(std::span<const float> logits, const SamplingParams& params, std::int64_t position) {
  thread_local std::vector<double> weight;
  const double total = Weights(logits, 1.0 / params.temperature, weight);
  const double floor = params.min_p > 0.0f ? params.min_p * (1.0 / total) : 0.0;  // the largest's weight is exp(0) = 1
  const std::uint64_t stream = DrawStream(params.seed, position);
  std::size_t best = logits.size();
  double best_key = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const double p = weight[i] / total;
    if (p < floor) continue;
    const double u = DrawOf(stream, static_cast<TokenId>(i));
    if ((1.0 - u) / p > best_key * (1.0 + 1e-9)) continue;  // its key ≥ (1 − u) / p: it cannot win or tie
    const double key = -std::log(u) / p;
    if (best == logits.size() || key < best_key || (key == best_key && logits[i] > logits[best])) {
      best_key = key;
      best = i;
    }
  }
  return static_cast<TokenId>(best);
}

}  // namespace

TokenId Sample(std::span<const float> logits, const SamplingParams& params, std::int64_t position) {
  if (logits.empty()) return 0;
  if (!(params.temperature > 0.0f)) return ArgMax(logits);
  if (params.top_p >= 1.0f && (params.top_k <= 0 || static_cast<std::size_t>(params.top_k) >= logits.size())) {
    return SampleUnsorted(logits, params, position);
  }

  // Candidates sorted by logit (descending), ties by id; top-k cuts the list.
  std::vector<TokenId> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const auto by_logit = [&](TokenId a, TokenId b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; };
  const double inv_t = 1.0 / params.temperature;
  std::size_t keep = order.size();
  std::vector<double> prob;
  if (params.top_k > 0 && static_cast<std::size_t>(params.top_k) < keep) {
    keep = static_cast<std::size_t>(params.top_k);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), by_logit);
    order.resize(keep);
    prob.resize(keep);
    const double max = logits[order[0]];
    double total = 0.0;
    for (std::size_t i = 0; i < keep; ++i) total += prob[i] = std::exp((logits[order[i]] - max) * inv_t);
    for (double& p : prob) p /= total;
    if (params.top_p < 1.0f) {
      double mass = 0.0;
      std::size_t n = 0;
      while (n < keep && mass < params.top_p) mass += prob[n++];
      keep = std::max<std::size_t>(n, 1);
    }
  } else {
    // top-p alone: the normalising sum over every token in token order (as
    // SampleUnsorted), then the order only as far as the mass needs — a partial sort,
    // widened eightfold until the prefix reaches top_p — instead of the whole vocabulary.
    thread_local std::vector<double> weight;
    const double total = Weights(logits, inv_t, weight);
    std::size_t sorted = std::min<std::size_t>(keep, 64);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(sorted), order.end(), by_logit);
    double mass = 0.0;
    std::size_t n = 0;
    for (;;) {
      while (n < sorted && mass < params.top_p) mass += weight[static_cast<std::size_t>(order[n++])] / total;
      if (mass >= params.top_p || sorted == keep) break;
      // Past a quarter of the vocabulary a whole sort of the rest is the cheaper one.
      const std::size_t more = sorted * 8 * 4 >= keep ? keep : sorted * 8;
      const auto from = order.begin() + static_cast<std::ptrdiff_t>(sorted), to = order.begin() + static_cast<std::ptrdiff_t>(more);
      if (more == keep) {
        std::sort(from, order.end(), by_logit);
      } else {
        std::partial_sort(from, to, order.end(), by_logit);
      }
      sorted = more;
    }
    keep = std::max<std::size_t>(n, 1);  // the prefix whose mass reaches top_p
    order.resize(keep);
    prob.resize(keep);
    for (std::size_t i = 0; i < keep; ++i) prob[i] = weight[static_cast<std::size_t>(order[i])] / total;
  }
  if (params.min_p > 0.0f) {
    const double floor = params.min_p * prob[0];
    std::size_t n = 1;
    while (n < keep && prob[n] >= floor) ++n;
    keep = n;
  }
  // An exponential race with one draw per token, not one draw walked down the sorted
  // list: a drafter whose distribution is close to the target's, given the same
  // draws, then picks the same token about as often as the two distributions overlap
  // (sample-and-match verification accepts exactly those). With a single draw, a
  // nearly flat distribution's running mass shifts by more than one token's share
  // under the slightest change, and sampled drafts were almost never accepted.
  const std::uint64_t stream = DrawStream(params.seed, position);
  std::size_t best = 0;
  double best_key = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < keep; ++i) {
    const double key = -std::log(DrawOf(stream, order[i])) / prob[i];
    if (key < best_key) {
      best_key = key;
      best = i;
    }
  }
  return order[best];
}

float Probability(std::span<const float> logits, TokenId token) {
  const float top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - top));
  return static_cast<float>(std::exp(static_cast<double>(logits[static_cast<std::size_t>(token)] - top)) / sum);
}

}  // namespace tandem::rt
