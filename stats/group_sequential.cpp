#include "stats/group_sequential.hpp"

#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "stats/stats_error.hpp"

namespace tandem::stats {

namespace {

// Simpson's rule on 2·kHalf + 1 points across a continuation interval: the density there
// is smooth, and this many points put the exit probabilities within ~1e-9 of the exact ones.
constexpr int kHalf = 400;

double UpperTail(double x) { return 0.5 * std::erfc(x / std::numbers::sqrt2); }  // 1 − Φ(x), exact in the tail
double Density(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi); }

// The sub-density of the score S_k = Z_k·√t_k over the paths that continued at every look
// so far, on a uniform grid across (−a_k, a_k).
struct Continuing {
  double half_width = 0;  // a_k
  std::vector<double> density;
  double Point(int i) const { return half_width * (static_cast<double>(i) / kHalf - 1.0); }
  double Weight(int i) const {
    const double h = half_width / kHalf;
    const int last = 2 * kHalf;
    return h / 3.0 * (i == 0 || i == last ? 1.0 : i % 2 == 1 ? 4.0 : 2.0);
  }
};

void CheckFractions(std::span<const double> fractions) {
  if (fractions.empty()) throw StatsError("group sequential: no looks");
  double previous = 0;
  for (std::size_t k = 0; k < fractions.size(); ++k) {
    const double t = fractions[k];
    if (!(t > previous && t <= 1.0)) {
      throw StatsError(fmt::format("group sequential: information fraction {} of look {} must be in ({}, 1]", t, k + 1, previous));
    }
    previous = t;
  }
}

// Probability of leaving (−a, a) at this look, from `before` (look k−1) over an increment
// of variance `delta` with drift θ·delta.
double ExitFrom(const Continuing& before, double a, double delta, double theta) {
  const double sd = std::sqrt(delta);
  double p = 0;
  for (int i = 0; i <= 2 * kHalf; ++i) {
    const double u = before.Point(i) + theta * delta;
    p += before.Weight(i) * before.density[i] * (UpperTail((a - u) / sd) + UpperTail((a + u) / sd));
  }
  return p;
}

Continuing Advance(const Continuing& before, double a, double delta, double theta) {
  const double sd = std::sqrt(delta);
  Continuing next{a, std::vector<double>(2 * kHalf + 1)};
  for (int j = 0; j <= 2 * kHalf; ++j) {
    const double s = next.Point(j);
    double g = 0;
    for (int i = 0; i <= 2 * kHalf; ++i) g += before.Weight(i) * before.density[i] * Density((s - before.Point(i) - theta * delta) / sd);
    next.density[j] = g / sd;
  }
  return next;
}

Continuing First(double a, double t, double theta) {
  Continuing first{a, std::vector<double>(2 * kHalf + 1)};
  const double sd = std::sqrt(t);
  for (int j = 0; j <= 2 * kHalf; ++j) first.density[j] = Density((first.Point(j) - theta * t) / sd) / sd;
  return first;
}

double ExitFirst(double c, double t, double theta) {
  const double shift = theta * std::sqrt(t);
  return UpperTail(c - shift) + UpperTail(c + shift);
}

}  // namespace

double ObrienFlemingSpent(double alpha, double t) {
  if (!(alpha > 0 && alpha < 1)) throw StatsError(fmt::format("alpha spending: alpha {} must be in (0, 1)", alpha));
  if (!(t > 0 && t <= 1)) throw StatsError(fmt::format("alpha spending: information fraction {} must be in (0, 1]", t));
  // z_{1−α/2}: invert the tail by bisection (monotone; 200 halvings reach double precision).
  double lo = 0, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (2 * UpperTail(mid) > alpha ? lo : hi) = mid;
  }
  return 2 * UpperTail(0.5 * (lo + hi) / std::sqrt(t));
}

std::vector<double> ObrienFlemingBoundaries(std::span<const double> fractions, double alpha) {
  if (!(alpha > 0 && alpha < 0.5)) throw StatsError(fmt::format("group sequential: one-sided alpha {} must be in (0, 0.5)", alpha));
  CheckFractions(fractions);
  std::vector<double> c;
  Continuing state;
  double spent = 0;
  for (std::size_t k = 0; k < fractions.size(); ++k) {
    const double t = fractions[k];
    const double target = 2 * ObrienFlemingSpent(alpha, t) - spent;  // both sides
    const double delta = k == 0 ? t : t - fractions[k - 1];
    const auto exit = [&](double ck) { return k == 0 ? ExitFirst(ck, t, 0) : ExitFrom(state, ck * std::sqrt(t), delta, 0); };
    double lo = 0, hi = 40;  // exit(c) falls as c grows
    for (int i = 0; i < 80; ++i) {
      const double mid = 0.5 * (lo + hi);
      (exit(mid) > target ? lo : hi) = mid;
    }
    const double ck = 0.5 * (lo + hi);
    spent += exit(ck);
    c.push_back(ck);
    if (k + 1 < fractions.size()) state = k == 0 ? First(ck * std::sqrt(t), t, 0) : Advance(state, ck * std::sqrt(t), delta, 0);
  }
  return c;
}

std::vector<double> ExitProbabilities(std::span<const double> fractions, std::span<const double> boundaries, double theta) {
  CheckFractions(fractions);
  if (boundaries.size() != fractions.size()) {
    throw StatsError(fmt::format("group sequential: {} boundaries for {} looks", boundaries.size(), fractions.size()));
  }
  std::vector<double> p;
  Continuing state;
  for (std::size_t k = 0; k < fractions.size(); ++k) {
    const double t = fractions[k];
    const double delta = k == 0 ? t : t - fractions[k - 1];
    const double a = boundaries[k] * std::sqrt(t);
    p.push_back(k == 0 ? ExitFirst(boundaries[k], t, theta) : ExitFrom(state, a, delta, theta));
    if (k + 1 < fractions.size()) state = k == 0 ? First(a, t, theta) : Advance(state, a, delta, theta);
  }
  return p;
}

}  // namespace tandem::stats
