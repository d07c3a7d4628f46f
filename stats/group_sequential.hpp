#pragma once

#include <span>
#include <vector>

// Group-sequential testing by alpha spending (Lan & DeMets 1983): a campaign may look at
// its data after every block of sessions and stop once decided, and still keep its stated
// error rate, because each look may only spend the part of alpha its information
// fraction allows. See docs/statistics.md ("Sequential campaigns").
namespace tandem::stats {

// Cumulative one-sided alpha the Lan–DeMets O'Brien–Fleming-type function allows by
// information fraction t ∈ (0, 1]: α(t) = 2 − 2Φ(z_{1−α/2} / √t); α(1) = α (the form
// gsDesign's sfLDOF and rpact use, so their published boundaries are comparable).
double ObrienFlemingSpent(double alpha, double t);

// Symmetric two-sided boundaries c_1..c_K on the z scale for looks at the information
// fractions given (strictly increasing, each in (0, 1]), each side spending the one-sided
// `alpha`: under H0 (no drift) the probability of first leaving (−c_k, c_k) at look k is
// 2·(α(t_k) − α(t_{k−1})). The gate's two one-sided tests (pass, fail) use one side each. Boundaries
// depend only on the looks actually taken, so later looks may be added. Computed by
// recursive numerical integration of the score process (Armitage, McPherson & Rowe 1969).
std::vector<double> ObrienFlemingBoundaries(std::span<const double> fractions, double alpha = 0.025);

// Probability of first leaving (−c_k, c_k) at each look when the z statistic drifts as
// θ·√t_k (θ = 0: under H0), for boundaries given; the check of the boundaries above and
// the power of a design.
std::vector<double> ExitProbabilities(std::span<const double> fractions, std::span<const double> boundaries, double theta = 0.0);

}  // namespace tandem::stats
