#!/usr/bin/env python3
"""Recorded samples and the session scores DESIGN.md defines for them, computed with numpy.

The C++ side (tests/store/session_scores_test.cpp) loads the samples into a real store
and checks tandem::harness::ComputeSessionScores against `expected`. The samples are
seeded pseudo-random timings; they include what must not count: a warmup workload, a
failed session, invalid samples, a one-token answer, answers with no text at all (an
end-of-sequence-only request: t_first_output 0) and the weight-0 counting case.

    make_session_scores_golden.py OUT.json        write
    make_session_scores_golden.py --check FILE    exit 1 if FILE differs from a fresh run
"""
import json
import sys

import numpy as np

rng = np.random.default_rng(20261130)

CASES = [("code", 1.0), ("hello", 1.0), ("json_schema", 0.5), ("counting", 0.0)]


def sample(case_id, weight, **kw):
    t0 = float(rng.uniform(0.0, 5.0))
    ct = int(rng.integers(8, 200))
    rate = float(rng.uniform(20.0, 60.0))
    s = dict(case_id=case_id, weight=weight, repeat=0, level=1, batch=0, slot=0, context=0, role="",
             completion_tokens=ct, t_first_output=round(t0, 6), t_finish=round(t0 + (ct - 1) / rate, 6), valid=True)
    s.update(kw)
    return s


def session(order_index, arm, status, flaws):
    workloads = []
    workloads.append(dict(name="warmup", kind="battery", warmup=True,
                          samples=[sample(c, w) for c, w in CASES[:2]]))
    battery = []
    for repeat in range(3):
        for c, w in CASES:
            battery.append(sample(c, w, repeat=repeat))
    if "battery_invalid" in flaws:
        battery[1]["valid"] = False            # repeat 0 hello: the whole repeat drops from weighted
    if "one_token" in flaws:
        battery[7]["completion_tokens"] = 1    # repeat 1 counting: no decode rate
        battery[7]["t_finish"] = battery[7]["t_first_output"]
    if "no_text" in flaws:
        # repeat 2 hello: its only token was end-of-sequence, so no text and no t_first_output
        # (0); t_finish is seconds since boot. It must enter no rate (weighted or aggregate).
        battery[2 * len(CASES) + 1].update(completion_tokens=1, t_first_output=0.0, t_finish=86400.0)
    workloads.append(dict(name="battery", kind="battery", warmup=False, samples=battery))
    sweep = []
    batch = 0
    for level in (1, 2, 4):
        for repeat in range(2):
            for slot in range(level):
                sweep.append(sample("code", 1.0, repeat=repeat, level=level, batch=batch, slot=slot))
            batch += 1
    if "batch_invalid" in flaws:
        sweep[6]["valid"] = False              # the first C4 batch drops
    if "no_text" in flaws:
        sweep[11].update(completion_tokens=1, t_first_output=0.0, t_finish=86400.0)  # a C4 slot with no text
    workloads.append(dict(name="sweep", kind="concurrency", warmup=False, samples=sweep))
    mixed = []
    for b, level in enumerate((3, 3)):
        for slot in range(level):
            mixed.append(sample(["code", "fable", "topic"][slot], 1.0, repeat=b, level=level, batch=b, slot=slot))
    workloads.append(dict(name="mixed", kind="mixed", warmup=False, samples=mixed))
    retained = []
    for context in (64, 256):
        retained.append(sample("topic", 1.0, context=context, role="parent"))
        for child in range(3):
            retained.append(sample("topic", 1.0, context=context, role="child", slot=child))
    if "child_invalid" in flaws:
        retained[2]["valid"] = False
    workloads.append(dict(name="retained", kind="retained_context", warmup=False, samples=retained))
    return dict(order_index=order_index, layout="tp4", arm=arm, status=status, workloads=workloads)


def has_interval(s):
    """A decode interval: >= 2 tokens and text (t_first_output > 0) before the finish."""
    return s["completion_tokens"] >= 2 and s["t_first_output"] > 0 and s["t_finish"] > s["t_first_output"]


def rate(s):
    if not s["valid"] or not has_interval(s):
        return None
    return (s["completion_tokens"] - 1) / (s["t_finish"] - s["t_first_output"])


def scores(sess):
    out = {}
    for w in sess["workloads"]:
        if w["warmup"]:
            continue
        xs = w["samples"]
        name = w["name"]
        if w["kind"] == "battery":
            per_repeat = []
            for repeat in sorted({s["repeat"] for s in xs}):
                weighted = [s for s in xs if s["repeat"] == repeat and s["weight"] > 0]
                if not all(s["valid"] for s in weighted):
                    continue
                timed = [s for s in weighted if has_interval(s)]
                num = sum(s["weight"] * (s["completion_tokens"] - 1) for s in timed)
                den = sum(s["weight"] * (s["t_finish"] - s["t_first_output"]) for s in timed)
                per_repeat.append(num / den)
            if per_repeat:
                out[f"{name}: weighted decode"] = float(np.median(per_repeat))
            medians = []
            for case_id in dict.fromkeys(s["case_id"] for s in xs):
                rates = [r for s in xs if s["case_id"] == case_id and (r := rate(s)) is not None]
                if rates:
                    out[f"{name}: {case_id}"] = float(np.median(rates))
                    if any(s["weight"] > 0 for s in xs if s["case_id"] == case_id):
                        medians.append(np.median(rates))
            if len(medians) >= 2:  # W: per content case: the geometric mean of the weighted cases' medians
                out[f"{name}: W per content case"] = float(np.exp(np.mean(np.log(medians))))
        elif w["kind"] in ("concurrency", "mixed"):
            families = {}
            for batch in sorted({s["batch"] for s in xs}):
                members = [s for s in xs if s["batch"] == batch]
                if not all(s["valid"] for s in members):
                    continue
                label = "mixed" if w["kind"] == "mixed" else members[0]["case_id"]
                timed = [s for s in members if has_interval(s)]
                tokens = sum(s["completion_tokens"] - 1 for s in timed)
                span = max(s["t_finish"] for s in timed) - min(s["t_first_output"] for s in timed)
                families.setdefault(f"{name}: {label} C{members[0]['level']}", []).append(tokens / span)
            for family, values in families.items():
                out[family] = float(np.median(values))
            # W: CASE Ca–Cb: the geometric mean of the per-level medians above C1 (at least two levels).
            by_case = {}
            for family, values in families.items():
                label, level = family.split(": ", 1)[1].rsplit(" C", 1)
                if int(level) > 1:
                    by_case.setdefault(label, []).append((int(level), np.median(values)))
            for label, levels in by_case.items():
                if len(levels) >= 2:
                    lo, hi = min(l for l, _ in levels), max(l for l, _ in levels)
                    out[f"{name}: W {label} C{lo}–C{hi}"] = float(np.exp(np.mean(np.log([m for _, m in levels]))))
        elif w["kind"] == "retained_context":
            for context in sorted({s["context"] for s in xs}):
                rates = [r for s in xs if s["context"] == context and s["role"] == "child" and (r := rate(s)) is not None]
                if rates:
                    out[f"{name}: retained {context}"] = float(np.median(rates))
    return out


def build():
    sessions = [
        session(0, "A", "complete", {"battery_invalid"}),
        session(1, "B", "complete", {"one_token", "batch_invalid"}),
        session(2, "B", "complete", {"no_text"}),
        session(3, "A", "complete", {"child_invalid"}),
        session(4, "A", "failed", set()),  # a failed session's samples never count
    ]
    expected = {}
    for sess in sessions:
        if sess["status"] != "complete":
            continue
        for family, value in scores(sess).items():
            expected.setdefault(family, {}).setdefault(sess["arm"], []).append(value)
    return dict(generator="tests/store/golden/make_session_scores_golden.py", sessions=sessions,
                expected=[dict(layout="tp4", family=f, by_arm=v) for f, v in expected.items()])


def write_or_check(text, doc):
    """`SCRIPT OUT.json` writes `text`; `SCRIPT --check OUT.json` fails when the file differs."""
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        with open(sys.argv[2]) as f:
            if f.read() != text:
                print(f"{sys.argv[2]} differs from what {sys.argv[0]} computes", file=sys.stderr)
                return 1
        return 0
    if len(sys.argv) != 2:
        print(doc, file=sys.stderr)
        return 2
    with open(sys.argv[1], "w") as f:
        f.write(text)
    return 0


def main():
    return write_or_check(json.dumps(build(), indent=1) + "\n", __doc__)


if __name__ == "__main__":
    sys.exit(main())
