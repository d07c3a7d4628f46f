#!/usr/bin/python3
"""Checks an exported mini checkpoint against tandem-rt: that the runtime runs the very
function that was trained, in every layout.

    /usr/bin/python3 models/mini/check.py --model build/mini/model --tandem-rt build/bin/tandem-rt

1. `tandem-rt inspect` reads it.
2. The PyTorch model of train.py (mini_model.py), loaded from the exported files and run
   in float64, against `tandem-rt eval` on a chat prompt plus greedy decode: logits and
   MTP logits within --tolerance (relative to the row's largest logit), the same experts at
   every MoE layer and position. (The trainer computes its products in bf16; here the same
   code runs in float64, so only the engine's float32 differs.)
3. tests/reference/reference_forward.py (the independent numpy forward), with --mtp.
4. Hybrid layouts equal the single process: `tandem-rt eval` and `generate --chat` with
   --spawn-workers 2 (tp and ep) against one process with --expert-input-dtype bf16 (the
   wire's rounding, docs/wire-protocol.md): bit-identical logits, the same tokens and text.
   How far plain fp32 expert inputs take greedy decoding from the bf16 wire is printed too.
Exit status 0 when every check passes, 1 otherwise.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mini_model  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PROMPTS = ["Hello! What can you do?", "Count from 1 to 30, one number per line.",
           "Give me a JSON object for Lyon with the keys \"name\" and \"country\"."]


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)


def rel_err(a, b):
    scale = np.maximum(np.abs(b).max(axis=1), 1e-30)
    return np.abs(a - b).max(axis=1) / scale


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tandem-rt", required=True)
    ap.add_argument("--decode", type=int, default=48)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()
    rt, model_dir = str(Path(args.tandem_rt).resolve()), str(Path(args.model).resolve())
    failures = []

    def check(ok, what):
        print(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            failures.append(what)

    r = run([rt, "inspect", model_dir])
    check(r.returncode == 0, "tandem-rt inspect")
    print("      " + "\n      ".join(r.stdout.strip().splitlines()))

    prompt = json.loads(run([rt, "tokenize", "--model", model_dir, "--chat", "--text", PROMPTS[0]]).stdout)
    with tempfile.TemporaryDirectory(prefix="mini-check-") as tmp:
        t = Path(tmp)

        def engine(extra, tag):
            r = run([rt, "eval", "--model", model_dir, "--tokens", ",".join(map(str, prompt)), "--decode", args.decode,
                     "--threads", 1, "--logits-out", t / f"{tag}.bin", "--mtp-logits-out", t / f"{tag}-mtp.bin",
                     "--routes-out", t / f"{tag}.json"] + extra)
            if r.returncode != 0:
                raise SystemExit(f"tandem-rt eval failed:\n{r.stderr}")
            return json.loads(r.stdout.strip().splitlines()[-1])

        meta = engine([], "single")
        tokens, vocab = meta["tokens"], meta["vocab"]
        logits = np.fromfile(t / "single.bin", dtype="<f4").reshape(len(tokens), vocab).astype(np.float64)
        mtp_logits = np.fromfile(t / "single-mtp.bin", dtype="<f4").reshape(len(tokens) - 1, vocab).astype(np.float64)
        routes = {e["layer"]: [sorted(x) for x in e["experts"]] for e in json.load(open(t / "single.json"))["layers"]}

        # The trained function, in float64.
        torch.set_default_dtype(torch.float64)
        mini_model.set_compute_dtype(torch.float64)
        model = mini_model.load_checkpoint(model_dir).double()
        T = len(tokens)
        with torch.no_grad():
            ours, ours_mtp = model(torch.tensor([tokens]), torch.arange(T)[None], torch.zeros(1, T, dtype=torch.long))
        err = rel_err(logits, ours[0].numpy())
        check(err.max() <= args.tolerance, f"PyTorch model vs tandem-rt eval: logits of {T} positions, max rel err {err.max():.2e}")
        err = rel_err(mtp_logits, ours_mtp[0].numpy())
        check(err.max() <= args.tolerance, f"PyTorch model vs tandem-rt eval: MTP logits of {T - 1} rows, max rel err {err.max():.2e}")
        moe = [l for l, b in enumerate(model.layers) if b.is_moe]
        same = all(routes[l] == [sorted(x) for x in model.layers[l].mlp.last_ids.tolist()] for l in moe)
        check(same and sorted(routes) == moe, f"PyTorch model vs tandem-rt eval: experts chosen at {len(moe)} MoE layers x {T} positions")

        engine(["--expert-input-dtype", "bf16"], "bf16")
        base = np.fromfile(t / "bf16.bin", dtype="<f4")
        base_tokens = json.loads(run([rt, "eval", "--model", model_dir, "--tokens", ",".join(map(str, prompt)), "--decode",
                                      args.decode, "--threads", 1, "--expert-input-dtype", "bf16", "--logits-out",
                                      t / "x.bin"]).stdout.strip().splitlines()[-1])["tokens"]
        for layout in ("tp", "ep"):
            hybrid = engine(["--spawn-workers", 2, "--expert-parallel", layout], layout)
            h = np.fromfile(t / f"{layout}.bin", dtype="<f4")
            check(hybrid["tokens"] == base_tokens and np.array_equal(h, base),
                  f"tandem-rt eval --spawn-workers 2 --expert-parallel {layout}: the tokens and bit-identical logits of one "
                  f"process with --expert-input-dtype bf16")
        agree = next((i for i, (a, b) in enumerate(zip(tokens, base_tokens)) if a != b), len(tokens))
        print(f"      fp32 expert inputs (one process) vs the bf16 wire: the same greedy tokens for {agree - len(prompt)} "
              f"of {args.decode} decode steps")

    r = run([sys.executable, REPO / "tests" / "reference" / "reference_forward.py", "--model", model_dir, "--tandem-rt", rt,
             "--prompt-tokens", ",".join(map(str, prompt)), "--decode", 32, "--mtp"])
    check(r.returncode == 0, "reference_forward.py --mtp")
    print("      " + "\n      ".join(r.stdout.strip().splitlines()[1:]))

    for p in PROMPTS:
        texts = []
        for extra in (["--expert-input-dtype", "bf16"], ["--spawn-workers", "2"], ["--spawn-workers", "2", "--expert-parallel", "ep"]):
            r = run([rt, "generate", "--model", model_dir, "--chat", "--prompt", p, "--max-tokens", 64, "--threads", 1] + extra)
            texts.append(r.stdout if r.returncode == 0 else f"exit {r.returncode}: {r.stderr}")
        check(texts[0] == texts[1] == texts[2] and not texts[0].startswith("exit"),
              f"generate --chat {p!r}: --spawn-workers 2 (tp, ep) gives the single process's text")
        print("      " + repr(texts[0][:160]))

    print("PASS" if not failures else f"FAIL: {len(failures)} checks")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
