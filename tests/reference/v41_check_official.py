#!/usr/bin/python3
"""Checks `tandem-rt eval` on a DeepSeek V4.1 preset against golden logits made by DeepSeek's
own reference code (tests/reference/v41_official_golden.py wrote them; this check needs only
numpy, so CI runs it without PyTorch).

    /usr/bin/python3 tests/reference/v41_check_official.py --golden tests/reference/golden/v41_official_tiny \\
        --tandem-rt build/bin/tandem-rt --engram-script models/v41/engram_constants.py --work DIR

It writes the preset's checkpoint again (`init-model`, bit-identical for the seed the golden
names), runs Tandem over the golden's tokens and compares every position's logits: with the
reference's step-by-step decode (one row per position) and with its prefill of each golden
prompt length (the last position's row). It prints, per path, the worst and median error
relative to the row's largest |logit| and the share of rows whose argmax agrees, and fails
past the tolerances below.

Why not bit for bit, as against the numpy forward: the reference sums its fp32 and bf16
products (plain bf16/fp32 GEMMs, attention's dot products and block sums, the FP8/FP4 block
partials in torch's matmul) in PyTorch's order, and its transcendental functions are
PyTorch's fp32 ones; Tandem takes each of those sums in double and rounds once (the
correctly rounded value but at near-ties) — the two differ by an fp32 ulp now and then,
which moves a bf16 rounding once in a while, and the activations' FP8 quantization
(one block maximum rescales 32 values) carries such a difference on. The tolerances are set
from the measured spread with room (docs/v41-attention.md gives the figures).
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import v41_reference_forward as numpy_forward  # noqa: E402


def from_bits(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def ulps(ours, theirs):
    """|ours − theirs| in units of the bf16 spacing at the reference's value."""
    mag = np.maximum(np.abs(theirs), np.float32(2.0 ** -126))
    spacing = np.exp2(np.floor(np.log2(mag)) - 7)
    return np.abs(ours.astype(np.float64) - theirs.astype(np.float64)) / spacing


def relative(ours, theirs):
    """|ours − theirs| over the largest |value| of its row (a value near zero, after
    cancellation, can be many of its own ulps off while the row is not)."""
    scale = np.maximum(np.abs(theirs).max(axis=-1, keepdims=True), np.float32(2.0 ** -126))
    return np.abs(ours.astype(np.float64) - theirs.astype(np.float64)) / scale


def layer_by_layer(model_dir, meta, layers):
    """The numpy forward (bit-identical to Tandem, checked just before) fed, layer by layer,
    the reference's own input: how often it makes the reference's bits of each piece. Rows
    whose compressed picks a tie decided (equal indexer scores or block maxima across the cut:
    the reference's topk orders ties as its implementation happens to) are counted, not
    compared."""
    ckpt = numpy_forward.Checkpoint(model_dir)
    forward = numpy_forward.Forward(ckpt)
    a, t = forward.a, ckpt.t
    tokens = meta["tokens"][:meta["layer_positions"]]
    engram_ids = [forward.engram_ids(tokens, j) for j in range(len(a.get("engram_layer_ids", [])))]
    pieces = {}

    tied_rows = 0

    def note(name, ours, theirs):
        u = ulps(ours, theirs)
        entry = pieces.setdefault(name, {"values": 0, "exact": 0, "over_1_ulp": 0, "worst_relative": 0.0})
        entry["values"] += int(u.size)
        entry["exact"] += int(np.sum(ours == theirs))
        entry["over_1_ulp"] += int(np.sum(u > 1))
        entry["worst_relative"] = max(entry["worst_relative"], float(relative(ours, theirs).max()))

    engram_at = 0
    for layer in range(a["n_layers"]):
        p = f"layers.{layer}."
        h = from_bits(layers["block_in"][layer])
        if layer in a.get("engram_layer_ids", []):
            j = a["engram_layer_ids"].index(layer)
            note("engram", forward.engram(p, from_bits(layers["engram_in"][engram_at]), engram_ids[j]), h)
            engram_at += 1
        pre_in = layers["pre_in"][layer]
        pre_a, post_a, comb_a = numpy_forward.hc_mixes(h, t[p + "hc_attn_fn"], t[p + "hc_attn_scale"], t[p + "hc_attn_base"], a)
        x = numpy_forward.rms_norm(numpy_forward.hc_pre(h, pre_in), t[p + "attn_norm.weight"], a["norm_eps"])
        attn = from_bits(layers["attn_out"][layer])
        ours = forward.attention(p, layer, x)
        keep = ~forward.tied_rows
        tied_rows += int(np.sum(~keep))
        note("attention", ours[keep], attn[keep])
        mid = numpy_forward.hc_post(attn, h, post_a, comb_a)
        pre_f, post_f, comb_f = numpy_forward.hc_mixes(mid, t[p + "hc_ffn_fn"], t[p + "hc_ffn_scale"], t[p + "hc_ffn_base"], a)
        x = numpy_forward.rms_norm(numpy_forward.hc_pre(mid, pre_a), t[p + "ffn_norm.weight"], a["norm_eps"])
        ffn = from_bits(layers["ffn_out"][layer])
        note("moe", forward.moe(p, x), ffn)
        note("hyper-connections", numpy_forward.hc_post(ffn, mid, post_f, comb_f), from_bits(layers["block_out"][layer]))
    for entry in pieces.values():
        entry["exact_share"] = entry["exact"] / entry["values"]
    pieces["attention"]["rows_decided_by_a_tie"] = tied_rows
    return pieces


def main():
    parser = argparse.ArgumentParser(description="Check tandem-rt against DeepSeek V4.1's official reference logits.")
    parser.add_argument("--golden", required=True, help="PREFIX of PREFIX.json and PREFIX.f32")
    parser.add_argument("--tandem-rt", required=True)
    parser.add_argument("--engram-script", required=True, help="models/v41/engram_constants.py")
    parser.add_argument("--work", required=True, help="a scratch directory (made again)")
    parser.add_argument("--min-exact-share", type=float, default=0.999,
                        help="layer by layer: least share of values with the reference's bits")
    parser.add_argument("--max-relative", type=float, default=0.02,
                        help="layer by layer: the largest difference over its row's largest |value|")
    # Logits, per path: worst and median |difference| / the row's largest |logit|, least argmax agreement.
    parser.add_argument("--decode-limits", type=float, nargs=3, default=[0.02, 0.001, 0.95], metavar=("WORST", "MEDIAN", "ARGMAX"))
    parser.add_argument("--prefill-limits", type=float, nargs=3, default=[0.3, 0.08, 0.85], metavar=("WORST", "MEDIAN", "ARGMAX"))
    args = parser.parse_args()
    with open(args.golden + ".json") as f:
        meta = json.load(f)
    vocab = meta["vocab"]
    rows = np.fromfile(args.golden + ".f32", dtype="<f4").reshape(-1, vocab)
    n = meta["decode_positions"]
    lengths = meta["prefill_lengths"]
    if rows.shape[0] != n + len(lengths):
        sys.exit(f"{args.golden}.f32: {rows.shape[0]} rows, the json says {n} + {len(lengths)}")
    model = os.path.join(args.work, "model")
    subprocess.run(["rm", "-rf", args.work], check=True)
    os.makedirs(args.work)
    subprocess.run([args.tandem_rt, "init-model", "--preset", meta["preset"], "--seed", str(meta["seed"]), "--out", model],
                   check=True, capture_output=True)
    subprocess.run(["/usr/bin/python3", args.engram_script, model, "--stub"], check=True, capture_output=True)
    out = os.path.join(args.work, "logits.f32")
    run = subprocess.run([args.tandem_rt, "eval", "--model", model, "--tokens", ",".join(map(str, meta["tokens"])),
                          "--logits-out", out], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"tandem-rt eval failed ({run.returncode}): {run.stderr}")
    tandem = np.fromfile(out, dtype="<f4").reshape(-1, vocab)
    # Tandem is the numpy forward, bit for bit, on these tokens too: what the numpy forward
    # makes of the reference's layer inputs below is what Tandem makes of them.
    numpy_logits = numpy_forward.Forward(numpy_forward.Checkpoint(model)).run(meta["tokens"])
    if not np.array_equal(numpy_logits, tandem):
        sys.exit("tandem-rt eval differs from the numpy forward on the golden's tokens (see v41_reference_forward.py)")

    def compare(ours, theirs):
        rel = np.abs(ours - theirs).max(axis=1) / np.abs(theirs).max(axis=1)
        agree = float(np.mean(ours.argmax(axis=1) == theirs.argmax(axis=1)))
        return {"rows": int(len(rel)), "worst_relative_error": float(rel.max()), "median_relative_error": float(np.median(rel)),
                "argmax_agreement": agree}

    # The reference's decode reads, at a ratio-2 index source on a step that does not complete
    # a group, the index keys the previous step's last KV source left in its shared slot (a
    # ratio-1 source's): from the first such step where the choice matters (more positions
    # visible than index_topk) its decode departs from its own prefill. Tandem computes what
    # the reference's prefill computes; decode rows are compared up to that step.
    a = json.load(open(os.path.join(model, "inference", "config.json")))
    stale = n
    for pos in range(n):
        for layer in a["index_source_layers"]:
            r = a["compress_ratios"][layer]
            if r > 1 and layer in a["kv_source_layers"] and (pos + 1) % r != 0 and (pos + 1) // r > a["index_topk"]:
                stale = min(stale, pos)
    pieces = layer_by_layer(model, meta, np.load(args.golden + ".layers.npz")) if meta["layer_positions"] else {}
    report = {"preset": meta["preset"], "torch": meta["torch"], "layer_by_layer": pieces,
              "prefill": compare(tandem[[length - 1 for length in lengths]], rows[n:]),
              "decode": compare(tandem[:stale], rows[:stale]), "decode_rows_before_the_stale_key_step": stale,
              "decode_after": compare(tandem[stale:n], rows[stale:n]) if stale < n else None}
    print(json.dumps(report, indent=1))
    failures = []
    for name, entry in pieces.items():
        if entry["exact_share"] < args.min_exact_share or entry["worst_relative"] > args.max_relative:
            failures.append(f"layer by layer, {name}: {entry['exact_share']:.5f} of values exact, worst {entry['worst_relative']:.4f} "
                            f"of its row (allowed: {args.min_exact_share}, {args.max_relative})")
    for path, (worst, median, argmax) in (("prefill", args.prefill_limits), ("decode", args.decode_limits)):
        r = report[path]
        if r["worst_relative_error"] > worst or r["median_relative_error"] > median or r["argmax_agreement"] < argmax:
            failures.append(f"{path} logits: worst {r['worst_relative_error']:.4f}, median {r['median_relative_error']:.4f}, argmax "
                            f"{r['argmax_agreement']:.3f} (allowed: {worst}, {median}, {argmax})")
    if failures:
        sys.exit("Tandem differs from DeepSeek's reference beyond the tolerances:\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    main()
