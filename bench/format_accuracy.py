#!/usr/bin/python3
"""Accuracy of the quantized formats against bf16, on a synthetic preset or a checkpoint.

Writes the preset (tandem-rt init-model) unless --model is given, quantizes it with
`tandem-rt quantize --layers experts|all` for each format and group, runs `tandem-rt eval`
on the same prompt with 64 greedy decode steps, and compares with the unquantized
checkpoint:
  - logit error: relative L2 error of the logits over the prompt's positions (same
    inputs for both), and the largest per-position relative error;
  - max |Δlogit| / std(logits) per prompt position, median over positions;
  - mean KL(bf16 ‖ quantized) of the next-token distributions over the prompt, and how
    many of its positions keep bf16's top token;
  - greedy agreement: how many of the 64 decoded tokens match bf16's before the first
    difference (after it the inputs differ), and whether all do.
Usage: bench/format_accuracy.py [--tandem-rt build/bin/tandem-rt] [--preset small | --model DIR]
                                [--layers experts|all]
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


def log_softmax(z):
    z = z.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tandem-rt", default="build/bin/tandem-rt")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--model", help="a bf16/fp8 checkpoint to measure instead of a synthetic preset")
    parser.add_argument("--layers", default="experts", choices=["experts", "all"],
                        help="what is quantized (tandem-rt quantize --layers): the routed experts, or every linear layer")
    args = parser.parse_args()
    rt = args.tandem_rt
    with tempfile.TemporaryDirectory(prefix="tandem-accuracy-") as tmp:
        base = args.model
        if base is None:
            base = os.path.join(tmp, "bf16")
            run(rt, "init-model", "--preset", args.preset, "--seed", "1", "--out", base)
        reference = logits(rt, base, os.path.join(tmp, "bf16.logits"))
        ref_tokens = reference[len(PROMPT) - 1 :].argmax(axis=1)
        what = "routed experts" if args.layers == "experts" else "every linear layer but the router"
        print(f"{args.model or args.preset + ' preset'}, prompt {len(PROMPT)} tokens, {DECODE} greedy steps; {what} quantized, against bf16")
        print("| format | logit error (rel. L2, prompt) | worst position | max \\|Δlogit\\| / std, median | mean KL(bf16 ‖ q) "
              "| top-1 as bf16 | greedy tokens equal before the first difference |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        p = len(PROMPT)
        ref_log_p = log_softmax(reference[:p])
        for fmt, group in [("int8", 32), ("int8", 64), ("int8", 128), ("int4", 32), ("int4", 64), ("int4", 128)]:
            model = os.path.join(tmp, f"{fmt}-g{group}")
            run(rt, "quantize", "--in", base, "--out", model, "--format", fmt, "--group", str(group), "--layers", args.layers)
            got = logits(rt, model, os.path.join(tmp, f"{fmt}-{group}.logits"))
            diff = got[:p] - reference[:p]
            rel = np.linalg.norm(diff) / np.linalg.norm(reference[:p])
            worst = max(np.linalg.norm(diff[i]) / np.linalg.norm(reference[i]) for i in range(p))
            spread = np.median(np.abs(diff).max(axis=1) / reference[:p].std(axis=1))
            kl = np.mean(np.sum(np.exp(ref_log_p) * (ref_log_p - log_softmax(got[:p])), axis=1))
            top1 = int(np.sum(got[:p].argmax(axis=1) == reference[:p].argmax(axis=1)))
            tokens = got[p - 1 :].argmax(axis=1)
            same = np.flatnonzero(tokens != ref_tokens)
            agree = DECODE if same.size == 0 else int(same[0])
            print(f"| {fmt}, group {group} | {rel:.4f} | {worst:.4f} | {spread:.3f} | {kl:.5f} | {top1} of {p} | {agree} of {DECODE} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
