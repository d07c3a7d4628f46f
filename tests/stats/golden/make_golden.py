#!/usr/bin/python3
"""Golden values for tandem::stats, computed independently with numpy and scipy.

Run with Debian's python3 (apt-get install python3-numpy python3-scipy):
    tests/stats/golden/make_golden.py > tests/stats/golden/stats_golden.json
    tests/stats/golden/make_golden.py --check tests/stats/golden/stats_golden.json

The Welch and paired intervals are computed from their textbook formulas with
scipy's Student-t quantile, and cross-checked against scipy.stats.ttest_ind
(equal_var=False) and ttest_rel, so the file does not depend on our C++.
"""
import json
import sys
import warnings

import numpy as np
from scipy import stats

LEVELS = [0.90, 0.95, 0.99]

# ttest_ind warns on the constant-arm cases; the formula above handles them exactly.
warnings.filterwarnings("ignore", message="Precision loss occurred")


def welch(baseline, candidate, level):
    la, lb = np.log(baseline), np.log(candidate)
    va, vb = la.var(ddof=1) / len(la), lb.var(ddof=1) / len(lb)
    d = lb.mean() - la.mean()
    se = np.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
    tq = stats.t.ppf(0.5 + level / 2, df)
    t = d / se
    p = 2 * stats.t.sf(abs(t), df)
    ref = stats.ttest_ind(lb, la, equal_var=False)
    assert np.isclose(ref.statistic, t, rtol=1e-12) and np.isclose(ref.pvalue, p, rtol=1e-9, atol=1e-300)
    return dict(ratio=np.exp(d), lo=np.exp(d - tq * se), hi=np.exp(d + tq * se), df=df, t=t, p=p)


def paired(baseline, candidate, level):
    diffs = np.log(candidate) - np.log(baseline)
    n = len(diffs)
    d = diffs.mean()
    se = diffs.std(ddof=1) / np.sqrt(n)
    tq = stats.t.ppf(0.5 + level / 2, n - 1)
    t = d / se
    p = 2 * stats.t.sf(abs(t), n - 1)
    ref = stats.ttest_rel(np.log(candidate), np.log(baseline))
    assert np.isclose(ref.statistic, t, rtol=1e-12) and np.isclose(ref.pvalue, p, rtol=1e-9, atol=1e-300)
    return dict(ratio=np.exp(d), lo=np.exp(d - tq * se), hi=np.exp(d + tq * se), df=float(n - 1), t=t, p=p)


def scores(rng, n, scale, sd, shift=0.0):
    return scale * np.exp(shift + sd * rng.standard_normal(n))


def interval_cases(rng):
    cases = []

    def add(name, method, a, b, level):
        fn = welch if method == "welch" else paired
        out = {k: float(v) for k, v in fn(np.asarray(a), np.asarray(b), level).items()}
        cases.append(dict(name=name, method=method, level=level, baseline=[float(x) for x in a],
                          candidate=[float(x) for x in b], **out))

    for i in range(60):
        n_a, n_b = int(rng.integers(2, 13)), int(rng.integers(2, 13))
        scale = 10 ** rng.uniform(-3, 5)
        sd_a, sd_b = 10 ** rng.uniform(-3, -0.5), 10 ** rng.uniform(-3, -0.5)
        shift = rng.normal(0, 0.05)
        add(f"welch_random_{i}", "welch", scores(rng, n_a, scale, sd_a),
            scores(rng, n_b, scale, sd_b, shift), LEVELS[i % 3])
    for i in range(60):
        n = int(rng.integers(2, 13))
        scale = 10 ** rng.uniform(-3, 5)
        base = scores(rng, n, scale, 10 ** rng.uniform(-2, -0.5))
        cand = base * np.exp(rng.normal(0, 0.05) + 10 ** rng.uniform(-3, -1) * rng.standard_normal(n))
        add(f"paired_random_{i}", "paired", base, cand, LEVELS[i % 3])

    # Edge cases named in the issue.
    a = scores(rng, 6, 100.0, 0.02)
    b = a * 1.04 * np.exp(0.0 * a)  # same spread on the log scale: equal variances
    b = b[::-1].copy()
    for level in LEVELS:
        add(f"welch_equal_variances_{level}", "welch", a, b, level)
    add("welch_baseline_constant", "welch", [50.0] * 5, scores(rng, 7, 52.0, 0.03), 0.95)
    add("welch_candidate_constant", "welch", scores(rng, 4, 80.0, 0.05), [81.5] * 4, 0.99)
    add("welch_n2", "welch", [99.0, 101.0], [103.0, 104.5], 0.95)
    add("paired_n2", "paired", [99.0, 101.0], [103.0, 104.5], 0.90)
    add("welch_huge", "welch", scores(rng, 5, 1e250, 0.1), scores(rng, 6, 1.1e250, 0.1), 0.95)
    add("welch_tiny", "welch", scores(rng, 5, 1e-250, 0.1), scores(rng, 3, 0.9e-250, 0.1), 0.95)
    add("paired_huge", "paired", scores(rng, 8, 1e300, 0.1), scores(rng, 8, 1e300, 0.1), 0.99)
    add("paired_tiny", "paired", scores(rng, 8, 1e-300, 0.1), scores(rng, 8, 1e-300, 0.1), 0.95)
    return cases


def descriptive_cases(rng):
    cases = []
    for i in range(20):
        n = int(rng.integers(1, 16))
        values = rng.uniform(0.5, 200.0, n) if i % 2 else rng.lognormal(3.0, 1.0, n)
        percentiles = [0.0, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 100.0, float(rng.uniform(0, 100))]
        cases.append(dict(
            values=[float(v) for v in values],
            mean=float(np.mean(values)),
            variance=float(np.var(values, ddof=1)) if n > 1 else None,
            median=float(np.median(values)),
            geometric_mean=float(stats.gmean(values)),
            percentiles=[[q, float(np.percentile(values, q))] for q in percentiles]))
    return cases


def golden():
    rng = np.random.default_rng(20261130)
    return dict(generator="tests/stats/golden/make_golden.py",
                numpy=np.__version__, scipy=__import__("scipy").__version__,
                intervals=interval_cases(rng), descriptive=descriptive_cases(rng))


def main():
    data = golden()
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        with open(sys.argv[2]) as f:
            committed = json.load(f)
        worst = 0.0
        for key in ("intervals", "descriptive"):
            assert len(committed[key]) == len(data[key]), key
            for want, got in zip(data[key], committed[key]):
                for k, v in want.items():
                    if isinstance(v, float):
                        worst = max(worst, abs(v - got[k]) / max(abs(v), 1e-300))
        print(f"largest relative difference from a fresh computation: {worst:.3g}")
        sys.exit(0 if worst < 1e-12 else 1)
    json.dump(data, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
