#!/usr/bin/python3
"""Golden group-sequential boundaries, computed independently with scipy.

Run with Debian's python3 (apt-get install python3-numpy python3-scipy):
    tests/stats/golden/make_sequential_golden.py > tests/stats/golden/sequential_golden.json
    tests/stats/golden/make_sequential_golden.py --check tests/stats/golden/sequential_golden.json

Method (not the C++ one): the z statistics of K looks at information fractions t_k are
jointly normal with corr(Z_i, Z_j) = sqrt(t_i / t_j); the probability of staying inside
(-c_i, c_i) for every look i <= k is a multivariate normal rectangle probability, which
scipy integrates (Genz's algorithm). Each c_k is solved with brentq so that the
probability of first leaving at look k is 2 * (a(t_k) - a(t_{k-1})), where
a(t) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t)) is the Lan-DeMets O'Brien-Fleming-type
spending of the one-sided alpha.
"""
import json
import sys

import numpy as np
from scipy import optimize, stats

ALPHA = 0.025
DESIGNS = [
    [1 / 2, 1],
    [1 / 3, 2 / 3, 1],
    [1 / 4, 2 / 4, 3 / 4, 1],
    [1 / 5, 2 / 5, 3 / 5, 4 / 5, 1],
    # unequal looks, as a campaign that lost a session or was extended takes them
    [0.3, 0.5, 0.9, 1.0],
    [0.15, 0.6, 1.0],
]


def spent(t):
    return 2 - 2 * stats.norm.cdf(stats.norm.ppf(1 - ALPHA / 2) / np.sqrt(t))


def stay(fractions, bounds):
    """P(|Z_i| < c_i for every look i)."""
    k = len(fractions)
    if k == 1:
        return stats.norm.cdf(bounds[0]) - stats.norm.cdf(-bounds[0])
    t = np.array(fractions)
    cov = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    c = np.array(bounds)
    np.random.seed(0)  # Genz's algorithm draws quasi-random points: the same ones on every run
    return stats.multivariate_normal.cdf(c, mean=np.zeros(k), cov=cov, lower_limit=-c, maxpts=100_000 * k, abseps=1e-7, releps=1e-7)


def boundaries(fractions):
    bounds = []
    stayed = 1.0
    for k, t in enumerate(fractions):
        target = 2 * (spent(t) - (spent(fractions[k - 1]) if k else 0.0))
        f = lambda c: (stayed - stay(fractions[: k + 1], bounds + [c])) - target
        c = optimize.brentq(f, 0.5, 12.0, xtol=1e-9)
        bounds.append(c)
        stayed = stay(fractions[: k + 1], bounds)
    return bounds


def golden():
    return {
        "alpha_one_sided": ALPHA,
        "spending": "Lan-DeMets O'Brien-Fleming: 2 - 2 Phi(z_(1-alpha/2) / sqrt(t))",
        "designs": [{"fractions": f, "boundaries": boundaries(f)} for f in DESIGNS],
    }


def main():
    g = golden()
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        with open(sys.argv[2]) as fh:
            committed = json.load(fh)
        for a, b in zip(committed["designs"], g["designs"]):
            if a["fractions"] != b["fractions"] or not np.allclose(a["boundaries"], b["boundaries"], atol=1e-4):
                sys.exit(f"{sys.argv[2]}: design {a['fractions']}: committed {a['boundaries']}, computed now {b['boundaries']}")
        if len(committed["designs"]) != len(g["designs"]):
            sys.exit(f"{sys.argv[2]}: {len(committed['designs'])} designs, the generator has {len(g['designs'])}")
        print(f"{sys.argv[2]}: reproducible")
        return
    json.dump(g, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
