#!/usr/bin/env python3
"""The roofline table of single-process decode (docs/performance.md).

Runs BM_DecodeRoofline (bench/decode_bench.cpp) and sets out, per region of a decode step
(runtime/engine/step_profile.hpp), what it reads and computes per token against the read
bandwidth of the same threads measured in the same run: how long the bytes would take at that
bandwidth, how long the region took, and the difference. The regions partition the step, so
the "lost" column says where a step's distance from the memory roofline goes.

    bench/roofline.py [--bench build/bin/tandem-bench] [--model DIR] [--json FILE]

--model: the checkpoint (TANDEM_BENCH_MODEL; default: the small preset, written fresh).
--json: read a saved `--benchmark_format=json` output instead of running the benchmark.
Only the standard library: runs with Debian's python3.
"""

import argparse
import json
import os
import subprocess
import sys

REGIONS = [
    ("attention_projections", "attention projections (q_a, kv_a, q_b, o_proj)"),
    ("attention_cache", "attention over the cache (W_UK, scores, W_UV)"),
    ("router", "router"),
    ("experts", "experts (6 routed + shared per MoE layer)"),
    ("dense_mlp", "dense MLP (first layer)"),
    ("lm_head", "final norm + LM head"),
    ("other", "other (embedding, norms, residuals)"),
]


def run_bench(bench, model):
    env = dict(os.environ)
    if model:
        env["TANDEM_BENCH_MODEL"] = model
    out = subprocess.run([bench, "--benchmark_filter=BM_DecodeRoofline", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out)


def threads_of(name):
    for part in name.split("/"):
        if part.startswith("threads:"):
            n = int(part.split(":")[1])
            return "all cores" if n == 0 else f"{n} thread" + ("s" if n > 1 else "")
    return name


def table(b):
    bw = b["read_GB/s"] * 1e9
    step_us = b["step_us"]
    lines = [
        f"**{threads_of(b['name'])}**: {b['tok/s']:.0f} tok/s, {b['MB/token']:.1f} MB/token, read bandwidth "
        f"{b['read_GB/s']:.1f} GB/s, fraction {b['bw_fraction']:.2f}; step {step_us:.0f} µs",
        "",
        "| region | MB/token | FLOP/byte | µs/token | share | GB/s | of read bw | µs at read bw | µs lost |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    total_bound = total_lost = 0.0
    for key, label in REGIONS:
        mb, mflop, us = b[f"{key}_MB"], b[f"{key}_MFLOP"], b[f"{key}_us"]
        bound = mb * 1e6 / bw * 1e6
        lost = us - bound
        total_bound += bound
        total_lost += lost
        gbs = mb * 1e6 / (us * 1e-6) / 1e9 if us > 0 else 0.0
        intensity = f"{mflop / mb:.1f}" if mflop > 0 else "–"
        lines.append(f"| {label} | {mb:.2f} | {intensity} | {us:.0f} | {us / step_us:.0%} | {gbs:.1f} | "
                     f"{gbs * 1e9 / bw:.0%} | {bound:.0f} | {lost:.0f} |")
    lines.append(f"| **step** | {b['MB/token']:.2f} | | {step_us:.0f} | 100% | "
                 f"{b['MB/token'] * 1e6 / (step_us * 1e-6) / 1e9:.1f} | {total_bound / step_us:.0%} | "
                 f"{total_bound:.0f} | {total_lost:.0f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default="build/bin/tandem-bench")
    parser.add_argument("--model", default="")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    if args.json:
        with open(args.json, encoding="utf-8") as f:
            data = json.load(f)
    else:
        data = run_bench(args.bench, args.model)
    runs = [b for b in data["benchmarks"] if b["name"].startswith("BM_DecodeRoofline") and b.get("run_type") != "aggregate"]
    if not runs:
        sys.exit("roofline.py: no BM_DecodeRoofline results in the benchmark output")
    print("\n\n".join(table(b) for b in runs))


if __name__ == "__main__":
    main()
