#!/usr/bin/python3
"""Accuracy of the quantized expert formats against bf16 on a synthetic preset.

Writes the preset (tandem-rt init-model), quantizes its routed experts with
`tandem-rt quantize` for each format, runs `tandem-rt eval` on the same prompt with
64 greedy decode steps, and compares with the bf16 checkpoint:
  - logit error: relative L2 error of the logits over the prompt's positions (same
    inputs for both), and the largest per-position relative error;
  - greedy agreement: how many of the 64 decoded tokens match bf16's before the first
    difference (after it the inputs differ), and whether all do.
Usage: bench/format_accuracy.py [--tandem-rt build/bin/tandem-rt] [--preset small | --model DIR]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

PROMPT = [5, 17, 42, 99, 3, 250, 7, 1, 500, 600, 700, 800, 900, 1000, 1100, 1200]
DECODE = 64


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


def logits(rt, model, out):
    run(rt, "eval", "--model", model, "--tokens", ",".join(map(str, PROMPT)), "--decode", str(DECODE), "--logits-out", out)
    values = np.fromfile(out, dtype="<f4")
    return values.reshape(len(PROMPT) + DECODE, -1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tandem-rt", default="build/bin/tandem-rt")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--model", help="a bf16/fp8 checkpoint to measure instead of a synthetic preset")
    args = parser.parse_args()
    rt = args.tandem_rt
    with tempfile.TemporaryDirectory(prefix="tandem-accuracy-") as tmp:
        base = args.model
        if base is None:
            base = os.path.join(tmp, "bf16")
            run(rt, "init-model", "--preset", args.preset, "--seed", "1", "--out", base)
        reference = logits(rt, base, os.path.join(tmp, "bf16.logits"))
        ref_tokens = reference[len(PROMPT) - 1 :].argmax(axis=1)
        print(f"{args.model or args.preset + ' preset'}, prompt {len(PROMPT)} tokens, {DECODE} greedy steps; against bf16 experts")
        print("| experts | logit error (rel. L2, prompt) | worst position | greedy tokens equal before the first difference |")
        print("|---|---|---|---|")
        for fmt, group in [("int8", 32), ("int8", 128), ("int4", 32), ("int4", 64), ("int4", 128)]:
            model = os.path.join(tmp, f"{fmt}-g{group}")
            run(rt, "quantize", "--in", base, "--out", model, "--format", fmt, "--group", str(group))
            got = logits(rt, model, os.path.join(tmp, f"{fmt}-{group}.logits"))
            p = len(PROMPT)
            diff = got[:p] - reference[:p]
            rel = np.linalg.norm(diff) / np.linalg.norm(reference[:p])
            worst = max(np.linalg.norm(diff[i]) / np.linalg.norm(reference[i]) for i in range(p))
            tokens = got[p - 1 :].argmax(axis=1)
            same = np.flatnonzero(tokens != ref_tokens)
            agree = DECODE if same.size == 0 else int(same[0])
            print(f"| {fmt}, group {group} | {rel:.4f} | {worst:.4f} | {agree} of {DECODE} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
