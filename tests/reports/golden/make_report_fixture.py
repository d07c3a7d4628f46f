#!/usr/bin/env python3
"""A hand-built campaign for the report golden test, and the figures its report must show.

Writes report_fixture.json: the campaign in the fixture format of
tests/support/fixture_store.hpp (2 arms, 2 layouts, 4 sessions each in ABBA order; a
warmup, greedy and sampled batteries, a concurrency sweep, mixed traffic and retained
context; a cache-bound failure, a content-check failure, a changed greedy output, a
token-count flag, draft counters, a retried session and one under other load), plus
"expected": table rows computed here, independently of the C++ code, with numpy and
scipy (session scores as DESIGN.md defines them, Welch intervals on log scores):

  expected.ab_rows        the A/B table rows, exactly as markdown
  expected.headline_rows  the headline-decode rows

    make_report_fixture.py OUT.json        write
    make_report_fixture.py --check FILE    exit 1 if FILE differs from a fresh run
"""
import hashlib
import json
import math
import os
import sys

import numpy as np
from scipy import stats

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "store", "golden"))
from make_session_scores_golden import scores, write_or_check  # noqa: E402  (the session-score definitions)

rng = np.random.default_rng(7)
ARMS = ["v13", "v14"]
LAYOUTS = ["tp4", "ep2"]
SPEEDUP = {("tp4", "v14"): 1.12, ("ep2", "v14"): 1.0}
BASE_RATE = {"code": 41.0, "hello": 55.0, "json_schema": 38.0, "counting": 60.0, "fable": 47.0, "topic": 44.0}
WEIGHTS = {"code": 1.0, "hello": 1.0, "json_schema": 0.5, "counting": 0.0, "fable": 1.0, "topic": 1.0}


def Digest(text):
    """A stable hash (Python's own hash() is salted per process)."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:15], 16)


def r6(x):
    return round(float(x), 6)


class Session:
    def __init__(self, order_index, layout, arm):
        self.layout, self.arm = layout, arm
        self.factor = SPEEDUP.get((layout, arm), 1.0) * math.exp(rng.normal(0, 0.01))
        self.clock = 100.0 * (order_index + 1)
        self.batch = 0

    def request(self, case_id, repeat=0, level=1, slot=0, batch=None, tokens=None, context=0, role="", key=None, start=None):
        rate = BASE_RATE[case_id] * self.factor * math.exp(rng.normal(0, 0.01)) * (0.8 if level > 1 else 1.0)
        ct = tokens if tokens is not None else int(rng.integers(40, 120))
        t0 = self.clock if start is None else start
        key = key or f"{case_id}/{repeat}/{level}/{slot}"
        t_first = t0 + 0.05 + 0.01 * (Digest("ttft" + key) % 7)  # 50-110 ms to first output
        t_finish = t_first + (ct - 1) / rate
        # Gaps between the streamed deltas: uneven (0.5x-1.5x the mean), summing to the decode time.
        w = [0.5 + 0.25 * (Digest(f"gap/{key}/{i}") % 5) for i in range(ct - 1)]
        gaps = [r6((t_finish - t_first) * x / sum(w)) for x in w]
        if start is None:
            self.clock = t_finish + 0.01
        return dict(case_id=case_id, weight=WEIGHTS[case_id], repeat=repeat, level=level, slot=slot,
                    batch=self.batch if batch is None else batch, context=context, role=role,
                    nonce=f"Word{Digest(key) % 1000}: ", completion_tokens=ct, prompt_tokens=30,
                    cached_tokens=1, chunks=ct, tokenizer_tokens=ct, t_start=r6(t0), t_first_output=r6(t_first),
                    t_first_content=r6(t_first), t_finish=r6(t_finish), content=f"output for {key}",
                    content_sha256=f"{Digest('content' + key) % 16**12:012x}", finish_reason="length", gaps=gaps,
                    checks={"stream_complete": True, "usage_consistent": True, "cache_bound": True, "non_empty": True},
                    valid=True)


def build_session(order_index, layout, arm):
    s = Session(order_index, layout, arm)
    workloads = []
    warm = [s.request("hello", key="warm")]
    workloads.append(dict(name="warmup", kind="battery", warmup=True, spec=dict(cases=["hello"], repeats=1, greedy=True, max_tokens=16, nonce_seed=1500), samples=warm))

    greedy = []
    for repeat in range(2):
        for case_id in ["code", "hello", "json_schema", "counting"]:
            x = s.request(case_id, repeat=repeat, key=f"g/{case_id}/{repeat}")
            s.batch += 1
            if case_id == "code":
                x["checks"]["regex"] = True
            if case_id == "json_schema":
                x["checks"]["json_fields"] = True
            greedy.append(x)
    workloads.append(dict(name="greedy-battery", kind="battery", warmup=False,
                          spec=dict(cases=[], repeats=2, greedy=True, max_tokens=0, nonce_seed=1000, counting=True), samples=greedy))

    sampled = []
    s.batch = 0
    for repeat in range(2):
        for case_id in ["code", "hello"]:
            x = s.request(case_id, repeat=repeat, key=f"s/{order_index}/{case_id}/{repeat}")
            s.batch += 1
            sampled.append(x)
    workloads.append(dict(name="sampled-battery", kind="battery", warmup=False,
                          spec=dict(cases=["code", "hello"], repeats=2, greedy=False, temperature=0.7, top_p=0.95, seed=3, max_tokens=0, nonce_seed=1001),
                          samples=sampled))

    sweep = []
    s.batch = 0
    for level in (1, 2, 4):
        for repeat in range(2):
            start = s.clock
            batch = [s.request("code", repeat=repeat, level=level, slot=k, tokens=64, key=f"c/{level}/{repeat}", start=start) for k in range(level)]
            s.clock = max(x["t_finish"] for x in batch) + 0.01
            for x in batch:
                x["batch"] = s.batch
                x["draft"] = ({"accepted_drafts": 30 * level, "verified_drafts": 48 * level, "request_rounds": 40 * level}
                              if arm == "v14" else {"accepted_drafts": 0, "verified_drafts": 0, "request_rounds": 63 * level})
            s.batch += 1
            sweep.extend(batch)
    workloads.append(dict(name="code-sweep", kind="concurrency", warmup=False,
                          spec=dict(cases=["code"], levels=[1, 2, 4], repeats=2, greedy=True, max_tokens=64, nonce_seed=1002), samples=sweep))

    mixed = []
    s.batch = 0
    start = s.clock
    batch = [s.request(c, level=3, slot=k, tokens=48, key=f"m/{k}", start=start) for k, c in enumerate(["code", "fable", "topic"])]
    s.clock = max(x["t_finish"] for x in batch) + 0.01
    mixed.extend(batch)
    workloads.append(dict(name="mixed-sweep", kind="mixed", warmup=False,
                          spec=dict(levels=[3], repeats=1, greedy=True, max_tokens=48, nonce_seed=1003), samples=mixed))

    retained = [s.request("topic", context=128, role="parent", tokens=32, key="r/p")]
    s.batch += 1
    for k in range(2):
        x = s.request("topic", context=128, role="child", slot=k, tokens=50, key=f"r/c{k}")
        x["batch"] = s.batch
        x["cached_tokens"] = 130
        x["checks"]["retained_cache"] = True
        s.batch += 1
        retained.append(x)
    workloads.append(dict(name="retained", kind="retained_context", warmup=False,
                          spec=dict(contexts=[128], children=2, repeats=1, greedy=True, max_tokens=50, nonce_seed=1004), samples=retained))
    host = dict(cpu_model="Test CPU 9000", cpu_vendor="GenuineTest", cpu_family="6", cpu_model_number="143", cpu_stepping="8",
                cpu_isa=["avx2", "fma", "avx512f", "amx_tile"], logical_cpus=16, memory="65536000 kB", kernel="Linux 6.1.0", hostname="bench-1",
                load_average=[0.1, 0.1, 0.1], busy_fraction=0.02, busy_sample_s=1.0)
    return dict(order_index=order_index, layout=layout, arm=arm, status="complete", attempts=1, host=host,
                served=dict(id="tandem", model_revision="cd" * 32), workloads=workloads,
                processes=[dict(role="coordinator", pid=100 + order_index, start_ticks=1, cpu_seconds=12.5, log="/logs/c.log")])


def build():
    sessions = []
    order = "ABBA"
    for li, layout in enumerate(LAYOUTS):
        for i, letter in enumerate(order):
            sessions.append(build_session(li * 4 + i, layout, ARMS[ord(letter) - ord("A")]))
    # Disclosures and failures the report must show.
    s = sessions[1]  # tp4, v14
    cache_hit = s["workloads"][1]["samples"][5]  # greedy-battery, repeat 1, hello
    cache_hit["cached_tokens"] = 29
    cache_hit["checks"]["cache_bound"] = False
    cache_hit["valid"] = False
    s["workloads"][1]["samples"][2]["checks"]["json_fields"] = False  # a content failure
    s["workloads"][1]["samples"][2]["content"] = "not json at all"
    changed = sessions[2]["workloads"][1]["samples"][0]  # tp4, v14: a greedy output that differs
    changed["content_sha256"] = "ffffffffffff"
    sessions[6]["workloads"][1]["samples"][1]["tokenizer_tokens"] = 7  # ep2, v14
    sessions[6]["workloads"][1]["samples"][1]["flags"] = {"token_count_mismatch": {"usage": sessions[6]["workloads"][1]["samples"][1]["completion_tokens"], "tokenizer": 7, "chunks": 3}}
    sessions[5]["attempts"] = 2
    sessions[7]["host"]["busy_fraction"] = 0.61
    sessions[7]["host"]["load_warning"] = True

    arms = [
        dict(label="v13", kind="binary", revision="1" * 40, coordinator_image="a1" * 32, worker_image="a2" * 32,
             launch=dict(kind="binary", coordinator="/opt/v13/tandem-rt", worker="/opt/v13/tandem-rt", options=[], worker_options=[], env={}),
             model_id="tandem", model_revision="cd" * 32, config_sha256="ef" * 32),
        dict(label="v14", kind="git", revision="2" * 40, coordinator_image="b1" * 32, worker_image="b1" * 32,
             launch=dict(kind="git", repository="/src/tandem", ref="v14", options=["--threads", "2"], worker_options=[], env={"OMP_NUM_THREADS": "1"}),
             model_id="tandem", model_revision="cd" * 32, config_sha256="ef" * 32),
    ]
    layouts = [
        dict(name="tp4", spec=dict(name="tp4", workers=4, expert_parallel="tp", local_expert_layers=0, coordinator_ranks=1, wire_dtype="bf16",
                                   partial_dtype="f64", coordinator_threads=0, worker_threads=1, coordinator_cpus="", worker_cpus="")),
        dict(name="ep2", spec=dict(name="ep2", workers=2, expert_parallel="ep", local_expert_layers=1, coordinator_ranks=1, wire_dtype="fp8",
                                   partial_dtype="f32", coordinator_threads=2, worker_threads=1, emulated_rtt_us=500, coordinator_cpus="0-1",
                                   worker_cpus="2-7")),
    ]
    campaign = dict(name="release-fixture", file="/campaigns/release-fixture.yaml", yaml_sha256="ab" * 32, model_path="/models/fixture",
                    model_revision="cd" * 32, created_at="2026-11-30T12:00:00Z", status="complete",
                    host=sessions[0]["host"], gate=dict(baseline="v13", candidate="v14", max_regression=0.03, rule="proven"))
    fixture = dict(generator="tests/reports/golden/make_report_fixture.py", campaign=campaign, arms=arms, layouts=layouts, sessions=sessions)
    fixture["expected"] = expected(sessions)
    return fixture


def welch_cell(a, b):
    la, lb = np.log(a), np.log(b)
    d = lb.mean() - la.mean()
    va, vb = la.var(ddof=1) / len(la), lb.var(ddof=1) / len(lb)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(la) - 1) + vb ** 2 / (len(lb) - 1))
    t = stats.t.ppf(0.975, df)
    ratio, lo, hi = math.exp(d), math.exp(d - t * se), math.exp(d + t * se)
    cell = f"{ratio:.3f} ({lo:.3f}–{hi:.3f})"
    return f"**{cell}**" if lo > 1 or hi < 1 else cell


def expected(sessions):
    per = {}  # (family, layout, arm) -> [session scores]
    order = []
    for s in sessions:
        for family, value in scores(s).items():
            if family not in order:
                order.append(family)
            per.setdefault((family, s["layout"], s["arm"]), []).append(value)
    rows = []
    for family in order:
        cells = []
        for layout in LAYOUTS:
            a, b = per.get((family, layout, "v13"), []), per.get((family, layout, "v14"), [])
            cells.append(welch_cell(np.array(a), np.array(b)) if len(a) >= 2 and len(b) >= 2 else "—")
        rows.append(f"| {family} | {' | '.join(cells)} |")
    # Headline: pooled repeats of the first greedy battery (counting, weighted) and code C1.
    headline = []
    for layout in LAYOUTS:
        for arm in ARMS:
            counting, weighted, c1 = [], [], []
            for s in sessions:
                if s["layout"] != layout or s["arm"] != arm:
                    continue
                g = next(w for w in s["workloads"] if w["name"] == "greedy-battery")
                counting += [(x["completion_tokens"] - 1) / (x["t_finish"] - x["t_first_output"]) for x in g["samples"] if x["case_id"] == "counting" and x["valid"]]
                for repeat in (0, 1):
                    xs = [x for x in g["samples"] if x["repeat"] == repeat and x["weight"] > 0]
                    if all(x["valid"] for x in xs):
                        weighted.append(sum(x["weight"] * (x["completion_tokens"] - 1) for x in xs) / sum(x["weight"] * (x["t_finish"] - x["t_first_output"]) for x in xs))
                c = next(w for w in s["workloads"] if w["name"] == "code-sweep")
                c1 += [(x["completion_tokens"] - 1) / (x["t_finish"] - x["t_first_output"]) for x in c["samples"] if x["level"] == 1]
            cell = lambda v: f"**{np.median(v):.1f}** ({', '.join(f'{x:.1f}' for x in v)})"
            headline.append(f"| {layout} | {arm} | {cell(counting)} | {cell(weighted)} | {cell(c1)} |")
    # Latency: TTFT per request and the pooled gaps, per greedy-battery case and column.
    q = lambda v: f"{1e3 * np.median(v):.1f} / {1e3 * np.percentile(v, 90):.1f} / {1e3 * np.percentile(v, 99):.1f}" if v else "—"
    latency = {"ttft": [], "itl": []}
    for case_id in ["code", "hello", "json_schema", "counting"]:
        cells = {"ttft": [], "itl": []}
        for layout in LAYOUTS:
            for arm in ARMS:
                xs = [x for s in sessions if s["layout"] == layout and s["arm"] == arm
                      for w in s["workloads"] if w["name"] == "greedy-battery"
                      for x in w["samples"] if x["case_id"] == case_id and x["valid"]]
                cells["ttft"].append(q([x["t_first_output"] - x["t_start"] for x in xs]))
                cells["itl"].append(q([g for x in xs for g in x["gaps"]]))
        for table in ("ttft", "itl"):
            latency[table].append(f"| greedy-battery | {case_id} | {' | '.join(cells[table])} |")
    columns = [(layout, arm) for layout in LAYOUTS for arm in ARMS]
    measured = lambda layout, arm, name: [x for s in sessions if s["layout"] == layout and s["arm"] == arm
                                          for w in s["workloads"] if w["name"] == name for x in w["samples"] if x["valid"]]
    decode = lambda x: (x["completion_tokens"] - 1) / (x["t_finish"] - x["t_first_output"])
    spread = lambda v: f"{np.median(v):.1f} ({min(v):.1f}–{max(v):.1f})"

    def aggregates(layout, arm, name, level):
        by_batch = {}
        for s in sessions:
            if s["layout"] != layout or s["arm"] != arm:
                continue
            for w in s["workloads"]:
                if w["name"] == name:
                    for x in w["samples"]:
                        if x["level"] == level:
                            by_batch.setdefault((s["order_index"], x["batch"]), []).append(x)
        out = []
        for members in by_batch.values():
            if all(x["valid"] for x in members):
                out.append(sum(x["completion_tokens"] - 1 for x in members) /
                           (max(x["t_finish"] for x in members) - min(x["t_first_output"] for x in members)))
        return out

    # Content-type decode: the median per-request rate per case, every session of the column.
    content = []
    for name, cases in (("greedy-battery", ["code", "hello", "json_schema", "counting"]), ("sampled-battery", ["code", "hello"])):
        for case_id in cases:
            cells = [f"{np.median([decode(x) for x in measured(l, a, name) if x['case_id'] == case_id]):.1f}" for l, a in columns]
            content.append(f"| {case_id} | {WEIGHTS[case_id]:g} | {' | '.join(cells)} |")
    # Concurrency scaling: median aggregate per level, × its C1.
    concurrency = []
    for level in (1, 2, 4):
        cells = []
        for l, a in columns:
            m = np.median(aggregates(l, a, "code-sweep", level))
            cells.append(f"{m:.1f}" if level == 1 else f"{m:.1f} ×{m / np.median(aggregates(l, a, 'code-sweep', 1)):.2f}")
        concurrency.append(f"| C{level} | {' | '.join(cells)} |")
    # ... then Cn over C1 session by session: each session's own family scores (the
    # median of its batches), their log ratios' mean with a one-sample t interval.
    for level in (2, 4):
        cells = []
        for l, a in columns:
            logs = []
            for s in sessions:
                if s["layout"] != l or s["arm"] != a:
                    continue
                sc = scores(s)
                c1, cn = sc.get("code-sweep: code C1"), sc.get(f"code-sweep: code C{level}")
                if c1 is not None and cn is not None:
                    logs.append(math.log(cn / c1))
            logs = np.array(logs)
            if len(logs) < 2:
                cells.append("—")
                continue
            m, se = logs.mean(), logs.std(ddof=1) / math.sqrt(len(logs))
            t = stats.t.ppf(0.975, len(logs) - 1)
            cells.append(f"×{math.exp(m):.2f} ({math.exp(m - t * se):.2f}–{math.exp(m + t * se):.2f})")
        concurrency.append(f"| C{level}/C1 by session | {' | '.join(cells)} |")
    mixed = [f"| C3 | {' | '.join(spread(aggregates(l, a, 'mixed-sweep', 3)) for l, a in columns)} |"]
    retained = [f"| retained | 128 tokens | {' | '.join(spread([decode(x) for x in measured(l, a, 'retained') if x['role'] == 'child']) for l, a in columns)} |"]
    # Draft acceptance: each batch's counter deltas once, summed per column.
    cells = []
    for l, a in columns:
        seen, acc, ver, rounds = set(), 0, 0, 0
        for s in sessions:
            if s["layout"] != l or s["arm"] != a:
                continue
            for w in s["workloads"]:
                if w["name"] != "code-sweep":
                    continue
                for x in w["samples"]:
                    if (s["order_index"], x["batch"]) in seen:
                        continue
                    seen.add((s["order_index"], x["batch"]))
                    acc += x["draft"]["accepted_drafts"]
                    ver += x["draft"]["verified_drafts"]
                    rounds += x["draft"]["request_rounds"]
        cells.append(f"{acc / ver:.3f}" if ver else "—")
        cells[-1] += f" · {(acc + rounds) / rounds:.2f}/round"
    acceptance = [f"| code-sweep | code | {' | '.join(cells)} |"]
    return dict(ab_rows=rows, headline_rows=headline, ttft_rows=latency["ttft"], itl_rows=latency["itl"], content_rows=content,
                concurrency_rows=concurrency, mixed_rows=mixed, retained_rows=retained, acceptance_rows=acceptance)


def main():
    return write_or_check(json.dumps(build(), indent=1, ensure_ascii=False) + "\n", __doc__)


if __name__ == "__main__":
    sys.exit(main())
