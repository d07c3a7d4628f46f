#!/usr/bin/python3
"""Tandem against llama.cpp-family runtimes on the same weights, interleaved in one sitting.

    bench/peers.py --tandem-rt build/bin/tandem-rt --model DIR \\
        --peer llama.cpp=/path/to/llama-bench --peer "ik=/path/to/ik/llama-bench -rtr 1 -thp 1 -ger 1" \\
        [--types bf16,q8_0,q4_0] [--threads 1,2] [--rounds 3] [--work DIR] [--tandem-layers all|experts] \\
        [--tandem-group 32|64|128|q8_0=128,q4_0=64] [--tandem-isa avx512,avx512-bf16] [--tandem build/bin/tandem]

For each type the checkpoint is exported once with `tandem-rt export --format gguf`
(the peers' weights) and, for q8_0 / q4_0, quantized with `tandem-rt quantize --format
int8|int4 --layers all` (Tandem's own 8-/4-bit weights: every linear layer but the
router; `--tandem-layers experts` quantizes the experts alone; `--tandem-group` sets
the values per scale, for both types or per type as `q8_0=128,q4_0=64`: with fp32 scales
64 gives the bytes per value of Q8_0 / Q4_0 (8.5 / 4.5 bits), 128 fewer (8.25 / 4.25), 32
the default).
Every round then runs, for each type and thread count, each runtime once, in an order
that alternates between rounds (ABC, CBA, ...): Tandem's prompt rate from a prompt of
508–512 tokens (`generate --max-tokens 1 --warmup`: after one untimed run of the same
prompt, as llama-bench measures after its warm-up run), the same for a fresh process's
first prompt (no `--warmup`: it also faults in the buffers a prompt needs), and its
decode rate over 128 tokens after a one-token prompt (`--ignore-eos`); each peer's
`llama-bench -p 512 -n 128 -r 1`. The
table gives medians over rounds and Tandem's ratio of medians to each peer, and per round
(the two runs of a round are at most minutes apart, so the host's drift cancels): the
geometric mean of the rounds' ratios with its paired 95% t interval (`tandem stats compare
--method paired`), beside each file's size and
the weights a decode step reads from (every tensor but the token embeddings and Tandem's
MTP layer). `--tandem-isa` runs
Tandem once per listed kernel path (TANDEM_ISA) as arms of their own, and each peer's
ratios then list one value per path, in that order. Peer executables are the user's:
this script builds nothing.
"""

import argparse
import json
import os
import re
import shlex
import statistics
import struct
import subprocess
import sys

RATE = re.compile(r"\[prompt: (\d+) tokens in [\d.]+ s, ([\d.]+) tok/s \| decode: (\d+) tokens in [\d.]+ s, ([\d.]+) tok/s\]")


class Failed(Exception):
    pass


def run(cmd, timeout=600, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        # The last two lines: a CLI usage error ends with a hint after the line that names it.
        raise Failed(f"{shlex.join(cmd)} exited {r.returncode}: {' / '.join(r.stderr.strip().splitlines()[-2:])[:300]}")
    return r.stdout + r.stderr


def prompt_of(rt, model, n):
    """The longest run of filler words that tokenizes to at most n tokens (BOS
    included): 508–512 for n = 512. A binary search over the word count."""
    words = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches".split()
    text_of = lambda k: " ".join(words[i % len(words)] for i in range(k))
    tokens = lambda k: len(json.loads(run([rt, "tokenize", "--model", model, "--text", text_of(k)])))
    lo, hi = 0, 4 * n  # tokens(lo) <= n < tokens(hi): every word is at least one token
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if tokens(mid) <= n else (lo, mid)
    return text_of(lo)


# Bytes of the weights a decode step reads from: every tensor but the token embeddings
# (a step reads one row) and, in Tandem's files, the MTP layer (not run here; the GGUF
# export leaves it out). Equal or fewer of these is what "the same bytes" means below.
def safetensors_weights(d):
    layers = json.load(open(os.path.join(d, "config.json")))["num_hidden_layers"]
    total = 0
    for f in os.listdir(d):
        if not f.endswith(".safetensors"):
            continue
        with open(os.path.join(d, f), "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            header = json.loads(fh.read(n))
        for name, t in header.items():
            if name == "__metadata__" or "embed_tokens" in name or name.startswith(f"model.layers.{layers}."):
                continue
            total += t["data_offsets"][1] - t["data_offsets"][0]
    return total


GGML_BLOCK = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34), 2: (32, 18)}  # type: (values, bytes) per block


def gguf_weights(path):
    with open(path, "rb") as fh:
        data = fh.read()
    at = 4

    def take(fmt):
        nonlocal at
        v = struct.unpack_from("<" + fmt, data, at)
        at += struct.calcsize("<" + fmt)
        return v[0]

    def text():
        nonlocal at
        n = take("Q")
        at += n
        return data[at - n:at].decode()

    def skip(t):
        if t == 8:
            text()
        elif t == 9:
            inner, n = take("I"), take("Q")
            for _ in range(n):
                skip(inner)
        else:
            take({0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}[t])

    take("I")
    tensors, kvs = take("Q"), take("Q")
    for _ in range(kvs):
        text()
        skip(take("I"))
    total = 0
    for _ in range(tensors):
        name = text()
        count = 1
        for _ in range(take("I")):
            count *= take("Q")
        kind = take("I")
        take("Q")
        if kind not in GGML_BLOCK:
            raise Failed(f"{path}: tensor {name} has ggml type {kind}, not one this script sizes")
        values, size = GGML_BLOCK[kind]
        if name != "token_embd.weight":
            total += count // values * size
    return total


def tandem(rt, model, threads, prompt, isa=None):
    """Prompt rate (warm: after a warm-up run of the same prompt, as a serving process
    has sized its buffers), decode rate, and the prompt rate of a process's first prompt."""
    env = dict(os.environ, TANDEM_ISA=isa) if isa else None
    pp = RATE.search(run([rt, "generate", "--model", model, "--threads", str(threads), "--max-tokens", "1", "--warmup", "--prompt", prompt],
                         env=env))
    first = RATE.search(run([rt, "generate", "--model", model, "--threads", str(threads), "--max-tokens", "1", "--prompt", prompt], env=env))
    tg = RATE.search(run([rt, "generate", "--model", model, "--threads", str(threads), "--max-tokens", "128", "--ignore-eos", "--prompt", "the"],
                         env=env))
    if not pp or not first or not tg:
        raise Failed("tandem-rt generate printed no rate line")
    return float(pp.group(2)), float(tg.group(4)), float(first.group(2))


def peer(cmd, gguf, threads):
    out = run(shlex.split(cmd) + ["-m", gguf, "-t", str(threads), "-p", "512", "-n", "128", "-r", "1", "-o", "json"])
    rows = json.loads(out[out.index("["):out.rindex("]") + 1])
    pp = next(r["avg_ts"] for r in rows if r["n_prompt"] == 512 and r["n_gen"] == 0)
    tg = next(r["avg_ts"] for r in rows if r["n_gen"] == 128 and r["n_prompt"] == 0)
    return float(pp), float(tg), None


def paired_ratio(tandem_cli, mine, theirs):
    """Geometric mean of the per-round ratios mine[r] / theirs[r] over the rounds both ran, with
    its paired 95% t interval from `tandem stats compare --method paired` (the harness's own
    statistics): each round's two runs are minutes apart at most, so the host's drift between
    rounds cancels in the ratio."""
    rounds = sorted(r for r in mine if r in theirs)
    if len(rounds) < 2:
        return "" if not rounds else f"{mine[rounds[0]] / theirs[rounds[0]]:.2f}"
    try:
        out = run([tandem_cli, "stats", "compare", "--method", "paired", "--json",
                   "--baseline", ",".join(repr(theirs[r]) for r in rounds),
                   "--candidate", ",".join(repr(mine[r]) for r in rounds)])
    except Failed as e:  # e.g. every round gave the same ratio: no spread, no interval
        return f"no interval ({str(e).split(': ', 1)[-1]})"
    c = json.loads(out)
    return f"{c['ratio']:.2f} ({c['lo']:.2f}–{c['hi']:.2f})"


def groups_of(spec):
    """`--tandem-group`: one group size for q8_0 and q4_0, or NAME=SIZE per type (the sizes
    `tandem-rt quantize --group` accepts are its to check)."""
    try:
        if "=" not in spec:
            groups = {"q8_0": int(spec), "q4_0": int(spec)}
        else:
            groups = {"q8_0": 32, "q4_0": 32}
            for item in spec.split(","):
                name, size = item.split("=", 1)
                if name not in groups:
                    sys.exit(f"peers.py: --tandem-group: unknown type {name!r} (q8_0 or q4_0)")
                groups[name] = int(size)
    except ValueError:
        sys.exit(f"peers.py: --tandem-group {spec!r}: expected a group size or q8_0=N,q4_0=N")
    return groups


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tandem-rt", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--peer", action="append", default=[], help="NAME=COMMAND (a llama-bench and its flags)")
    ap.add_argument("--types", default="bf16,q8_0,q4_0")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default="build/peers")
    ap.add_argument("--tandem-layers", default="all", choices=["all", "experts"],
                    help="what Tandem's 8-/4-bit checkpoints quantize (tandem-rt quantize --layers)")
    ap.add_argument("--tandem-group", default="32",
                    help="values per scale of Tandem's 8-/4-bit checkpoints (tandem-rt quantize --group): "
                         "32, 64 or 128 for both, or per type, e.g. q8_0=128,q4_0=64")
    ap.add_argument("--tandem", default="",
                    help="the harness CLI, for the per-round intervals (default: `tandem` beside --tandem-rt)")
    ap.add_argument("--tandem-isa", default="", help="comma-separated TANDEM_ISA values, one Tandem arm each (default: one, as the environment says)")
    a = ap.parse_args()
    peers = [tuple(p.split("=", 1)) for p in a.peer]
    if any(len(p) != 2 for p in peers):
        sys.exit("peers.py: --peer takes NAME=COMMAND")
    os.makedirs(a.work, exist_ok=True)
    types, threads = a.types.split(","), [int(t) for t in a.threads.split(",")]
    group_of = groups_of(a.tandem_group)
    tandem_cli = a.tandem or os.path.join(os.path.dirname(os.path.abspath(a.tandem_rt)), "tandem")
    if not os.access(tandem_cli, os.X_OK):
        sys.exit(f"peers.py: {tandem_cli} is not an executable (the harness CLI: pass --tandem PATH)")
    models = {}
    for t in types:
        gguf = os.path.join(a.work, f"model.{t}.gguf")
        if not os.path.exists(gguf):
            run([a.tandem_rt, "export", "--format", "gguf", "--in", a.model, "--out", gguf, "--type", t])
        own = a.model
        if t in ("q8_0", "q4_0"):
            own = os.path.join(a.work, f"tandem.{a.tandem_layers}.{t}" + ("" if group_of[t] == 32 else f".g{group_of[t]}"))
            if not os.path.exists(own):
                scope = ["--layers", "all"] if a.tandem_layers == "all" else ["--experts", "all"]
                run([a.tandem_rt, "quantize", "--in", a.model, "--out", own, "--format", "int8" if t == "q8_0" else "int4",
                     "--group", str(group_of[t])] + scope)
        models[t] = (own, gguf)
    prompt = prompt_of(a.tandem_rt, a.model, 512)
    # Tandem's arms and the TANDEM_ISA each runs with (None: as the environment says).
    isa_of = {f"tandem[{i}]": i for i in a.tandem_isa.split(",") if i} or {"tandem": None}
    mine_arms = list(isa_of)
    arms = mine_arms + [name for name, _ in peers]
    samples, by_round, failed = {}, {}, {}
    for r in range(a.rounds):
        order = arms if r % 2 == 0 else arms[::-1]
        for t in types:
            for th in threads:
                for arm in order:
                    own, gguf = models[t]
                    try:
                        if arm in mine_arms:
                            got = tandem(a.tandem_rt, own, th, prompt, isa_of[arm])
                        else:
                            got = peer(dict(peers)[arm], gguf, th)
                    except Failed as e:
                        if arm in mine_arms:
                            raise
                        failed[(t, arm)] = str(e)  # a peer that crashes on a type is a result, not a stop
                        print(f"round {r + 1} {t} {th}t {arm}: failed: {e}", file=sys.stderr)
                        continue
                    samples.setdefault((t, th, arm), []).append(got)
                    by_round.setdefault((t, th, arm), {})[r] = got
                    first = "" if got[2] is None else f" (first prompt {got[2]:.1f})"
                    print(f"round {r + 1} {t} {th}t {arm}: pp512 {got[0]:.1f}{first} tg128 {got[1]:.1f} tok/s", file=sys.stderr)
    size = {t: ((sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".safetensors")), safetensors_weights(d)),
                (os.path.getsize(g), gguf_weights(g)))
            for t, (d, g) in models.items()}
    # Tandem's pp512 is warm (generate --warmup), as llama-bench's is after its warm-up
    # run; "first prompt" is a fresh process's first prompt, which also faults in its buffers.
    print("| type | threads | runtime | file | weights read | pp512 tok/s | first prompt tok/s | tg128 tok/s "
          "| Tandem pp / it | Tandem first prompt / it | Tandem tg / it | pp per round (95%) | tg per round (95%) |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in types:
        for th in threads:
            mine = [[statistics.median(x) for x in zip(*samples[(t, th, m)])] for m in mine_arms]
            for arm in arms:
                if (t, th, arm) not in samples:
                    print(f"| {t} | {th} | {arm} | | | failed | | failed | | | | | |")
                    continue
                got = samples[(t, th, arm)]
                pp, tg = statistics.median(g[0] for g in got), statistics.median(g[1] for g in got)
                first = f"{statistics.median(g[2] for g in got):.1f}" if arm in mine_arms else ""
                b = size[t][0] if arm in mine_arms else size[t][1]
                ratio = "| | | |" if arm in mine_arms else " | ".join(
                    [", ".join(f"{m[k] / base:.2f}" for m in mine) for k, base in ((0, pp), (2, pp), (1, tg))] +
                    ["; ".join(paired_ratio(tandem_cli, {r: g[k] for r, g in by_round[(t, th, m)].items()},
                                            {r: g[k] for r, g in by_round[(t, th, arm)].items()}) for m in mine_arms)
                     for k in (0, 1)])
                print(f"| {t} | {th} | {arm} | {b[0] / 1e6:.0f} MB | {b[1] / 1e6:.1f} MB | {pp:.1f} | {first} | {tg:.1f} | {ratio} |")
    for (t, arm), why in sorted(failed.items()):
        print(f"\n{arm} failed on {t}: {why}")


if __name__ == "__main__":
    try:
        main()
    except Failed as e:
        sys.exit(f"peers.py: {e}")
