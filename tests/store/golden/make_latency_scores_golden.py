#!/usr/bin/env python3
"""Recorded request timings and the latency families docs/statistics.md defines for them, computed with numpy.

The C++ side (tests/store/latency_scores_test.cpp) loads the samples into a real store and checks
tandem::store::ComputeSessionScores' latency families against `expected`: per session, the 50th,
90th and 99th percentiles (numpy's default, linear interpolation) of each request's TTFT
(t_first_output - t_start), TPOT ((t_finish - t_first_output) / (tokens - 1)), end-to-end time
(t_finish - t_start) and of the inter-token gaps pooled over the requests (ITL); a battery is one
series, a concurrency workload one per level. A percentile needs requests behind it (p50: 1,
p90: 10, p99: 20); a session with fewer has no score and is counted as not estimable. Invalid
samples, a request with no text (no TTFT, no TPOT) and a one-token answer (no TPOT) are included.

    make_latency_scores_golden.py OUT.json        write
    make_latency_scores_golden.py --check FILE    exit 1 if FILE differs from a fresh run
"""
import json
import sys

import numpy as np

from make_session_scores_golden import write_or_check  # the same write / --check behaviour

rng = np.random.default_rng(20261207)
PERCENTILES = (50, 90, 99)
MINIMUM = {50: 1, 90: 10, 99: 20}
METRICS = ("ttft", "itl", "tpot", "e2e")
NAMES = {"ttft": "TTFT", "itl": "ITL", "tpot": "TPOT", "e2e": "E2E"}


def sample(case_id, **kw):
    t0 = round(float(rng.uniform(0.0, 5.0)), 6)
    first = round(t0 + float(rng.uniform(0.02, 0.3)), 6)
    ct = int(rng.integers(4, 40))
    gaps = [round(float(g), 6) for g in rng.uniform(0.01, 0.05, ct - 1)]
    s = dict(case_id=case_id, weight=1.0, repeat=0, level=1, batch=0, slot=0, context=0, role="",
             completion_tokens=ct, t_start=t0, t_first_output=first, t_finish=round(first + sum(gaps), 6),
             gaps=gaps, valid=True)
    s.update(kw)
    return s


def session(order_index, arm, flaws):
    battery = [sample(c, repeat=r) for r in range(6) for c in ("code", "hello", "json_schema", "fable")]
    if "invalid" in flaws:
        battery[3]["valid"] = False
    if "no_text" in flaws:  # its only token was end-of-sequence: no first output, no gaps
        battery[5].update(completion_tokens=1, t_first_output=0.0, t_finish=battery[5]["t_start"] + 0.2, gaps=[])
    if "one_token" in flaws:  # one token: a TTFT, no TPOT, no gaps
        battery[6].update(completion_tokens=1, t_finish=battery[6]["t_first_output"], gaps=[])
    sweep = []
    batch = 0
    for level, repeats in ((1, 2), (4, 3), (8, 3)):
        for repeat in range(repeats):
            sweep += [sample("code", repeat=repeat, level=level, batch=batch, slot=slot) for slot in range(level)]
            batch += 1
    latency = list(METRICS)
    return dict(order_index=order_index, layout="tp1", arm=arm, status="complete", workloads=[
        dict(name="battery", kind="battery", warmup=False, spec=dict(latency=latency), samples=battery),
        dict(name="sweep", kind="concurrency", warmup=False, spec=dict(latency=latency), samples=sweep),
    ])


def values(metric, requests):
    out, n = [], 0
    for s in requests:
        if metric == "itl":
            if s["gaps"]:
                out += s["gaps"]
                n += 1
        elif metric == "ttft":
            if s["t_first_output"] > 0:
                out.append(s["t_first_output"] - s["t_start"])
                n += 1
        elif metric == "tpot":
            if s["completion_tokens"] >= 2 and s["t_first_output"] > 0 and s["t_finish"] > s["t_first_output"]:
                out.append((s["t_finish"] - s["t_first_output"]) / (s["completion_tokens"] - 1))
                n += 1
        else:
            out.append(s["t_finish"] - s["t_start"])
            n += 1
    return out, n


def scores(sess):
    got, unestimable = {}, set()
    for w in sess["workloads"]:
        valid = [s for s in w["samples"] if s["valid"]]
        series = {1: valid} if w["kind"] == "battery" else {}
        if w["kind"] != "battery":
            for s in valid:
                series.setdefault(s["level"], []).append(s)
        for level, requests in series.items():
            for metric in METRICS:
                v, n = values(metric, requests)
                for p in PERCENTILES:
                    label = f"{w['name']}: {NAMES[metric]} p{p}" + ("" if w["kind"] == "battery" else f" C{level}")
                    if n >= MINIMUM[p]:
                        got[label] = float(np.percentile(v, p))
                    else:
                        unestimable.add(label)
    return got, unestimable


def build():
    sessions = [session(0, "A", {"invalid"}), session(1, "B", {"no_text"}), session(2, "B", {"one_token"}), session(3, "A", set())]
    expected, not_estimable = {}, {}
    for sess in sessions:
        got, unestimable = scores(sess)
        for family, value in got.items():
            expected.setdefault(family, {}).setdefault(sess["arm"], []).append(value)
        for family in unestimable:
            not_estimable.setdefault(family, {}).setdefault(sess["arm"], 0)
            not_estimable[family][sess["arm"]] += 1
    families = sorted(set(expected) | set(not_estimable))
    return dict(generator="tests/store/golden/make_latency_scores_golden.py", sessions=sessions,
                expected=[dict(layout="tp1", family=f, by_arm=expected.get(f, {}), not_estimable=not_estimable.get(f, {}))
                          for f in families])


def main():
    return write_or_check(json.dumps(build(), indent=1) + "\n", __doc__)


if __name__ == "__main__":
    sys.exit(main())
