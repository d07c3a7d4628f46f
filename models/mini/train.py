#!/usr/bin/python3
"""Trains the mini DeepseekV3ForCausalLM on make_data.py's output and writes an HF
checkpoint tandem-rt loads.

    /usr/bin/python3 models/mini/train.py --config models/mini/mini.json \
        --data build/mini/data --out build/mini/model

The model is mini_model.py (MLA, YaRN RoPE, dense first layer, group-limited sigmoid
routing with the aux-loss-free correction bias, shared expert, an MTP layer trained on
the next-next token). Examples are packed into rows (attention and positions restart
in every example); rows come in a few lengths so that short examples do not pay for
long rows. Seeded, with a fixed thread count: a rerun with the same data, config and
thread count on the same machine gives bit-identical weights.

Writes to --out: model.safetensors (bf16, the correction biases F32), config.json,
tokenizer.json, tokenizer_config.json, data_manifest.json (copied from --data),
training_log.jsonl (one JSON object per logged step and per evaluation), loss.svg
(gnuplot) and recipe.json (config, versions, timing).
"""

import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mini_model import DeepseekV3, load_checkpoint, write_safetensors  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------
# Data: examples packed into rows
# ---------------------------------------------------------------------------

class Data:
    def __init__(self, data_dir):
        d = Path(data_dir)
        index = json.load(open(d / "index.json"))
        self.families = index["families"]
        self.tokens = np.fromfile(d / "tokens.bin", dtype="<u2").astype(np.int64)
        self.mask = np.fromfile(d / "mask.bin", dtype=np.uint8)
        ex = np.asarray(index["examples"], dtype=np.int64).reshape(-1, 4)
        self.offset, self.length, self.family, split = ex[:, 0], ex[:, 1], ex[:, 2], ex[:, 3]
        self.train = np.nonzero(split == 0)[0]
        self.valid = np.nonzero(split == 1)[0]


def pack(data, ids, row_lengths, rng, open_rows=8):
    """Examples -> rows: each example goes to the shortest row length that holds it, into
    the first open row of that length with room; the fullest open row is closed when more
    than `open_rows` are open. Returns {row_length: [[example ids]]}."""
    rows = {r: [] for r in row_lengths}
    opened = {r: [] for r in row_lengths}             # [used, [ids]]
    for e in ids:
        n = int(data.length[e])
        r = next(r for r in row_lengths if n <= r)
        for row in opened[r]:
            if row[0] + n <= r:
                row[0] += n
                row[1].append(int(e))
                break
        else:
            opened[r].append([n, [int(e)]])
            if len(opened[r]) > open_rows:
                fullest = max(range(len(opened[r])), key=lambda i: opened[r][i][0])
                rows[r].append(opened[r].pop(fullest)[1])
    for r in row_lengths:
        rows[r].extend(row[1] for row in opened[r])
    return rows


def batch_tensors(data, rows, length):
    """rows of example ids -> tokens, positions, doc, target mask [B, T] (doc: example
    number within the row, -1 for padding)."""
    B = len(rows)
    tokens = np.zeros((B, length), dtype=np.int64)
    positions = np.zeros((B, length), dtype=np.int64)
    doc = np.full((B, length), -1, dtype=np.int64)
    target = np.zeros((B, length), dtype=np.int64)
    family = np.full((B, length), -1, dtype=np.int64)
    for b, row in enumerate(rows):
        at = 0
        for k, e in enumerate(row):
            n, o = int(data.length[e]), int(data.offset[e])
            tokens[b, at:at + n] = data.tokens[o:o + n]
            positions[b, at:at + n] = np.arange(n)
            doc[b, at:at + n] = k
            target[b, at:at + n] = data.mask[o:o + n]
            family[b, at:at + n] = data.family[e]
            at += n
    return tuple(torch.from_numpy(a) for a in (tokens, positions, doc, target, family))


def batches(data, cfg, rng):
    """Endless batches; each epoch repacks the shuffled training examples. A batch holds
    rows of one length, tokens_per_batch tokens in all."""
    t = cfg["train"]
    lengths = sorted(t["row_lengths"])
    epoch = 0
    while True:
        rows = pack(data, rng.permutation(data.train), lengths, rng)
        plan = []
        for r in lengths:
            per = max(1, t["tokens_per_batch"] // r)
            order = rng.permutation(len(rows[r]))
            plan += [(r, [rows[r][i] for i in order[s:s + per]]) for s in range(0, len(order), per)]
        for i in rng.permutation(len(plan)):
            r, rs = plan[i]
            yield epoch, batch_tensors(data, rs, r)
        epoch += 1


# ---------------------------------------------------------------------------
# Losses
# ---------------------------------------------------------------------------

def token_losses(model, tokens, positions, doc, target):
    """Per-position cross entropies (zero where not a target) and their masks, for the main
    head (position i predicts token i+1) and the MTP head (row i predicts token i+2)."""
    logits, mtp = model(tokens, positions, doc)
    B, T, V = logits.shape
    pad = torch.zeros(B, 1, dtype=torch.bool)
    same1 = torch.cat([(doc[:, 1:] == doc[:, :-1]) & (doc[:, :-1] >= 0) & (target[:, 1:] > 0), pad], dim=1)
    next1 = torch.cat([tokens[:, 1:], tokens[:, :1]], dim=1)
    ce1 = F.cross_entropy(logits.view(B * T, V), next1.reshape(-1), reduction="none").view(B, T)
    if mtp is None:
        return ce1 * same1, same1, None, None
    same2 = torch.cat([(doc[:, 2:] == doc[:, :-2]) & (doc[:, :-2] >= 0) & (target[:, 2:] > 0), pad], dim=1)
    next2 = torch.cat([tokens[:, 2:], tokens[:, :1]], dim=1)
    ce2 = F.cross_entropy(mtp.reshape(B * (T - 1), V), next2.reshape(-1), reduction="none").view(B, T - 1)
    return ce1 * same1, same1, ce2 * same2, same2


def lr_at(step, t):
    if step < t["warmup_steps"]:
        return t["lr"] * (step + 1) / t["warmup_steps"]
    progress = (step - t["warmup_steps"]) / max(1, t["steps"] - t["warmup_steps"])
    floor = t["min_lr_fraction"]
    return t["lr"] * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def evaluate(model, data, cfg, valid_rows):
    """Mean next-token loss on the validation rows, overall and per family."""
    sums = np.zeros(len(data.families))
    counts = np.zeros(len(data.families))
    mtp_sum = mtp_count = 0.0
    with torch.no_grad():
        for length, rows in valid_rows:
            tokens, positions, doc, target, family = batch_tensors(data, rows, length)
            l1, m1, l2, m2 = token_losses(model, tokens, positions, doc, target)
            fam = torch.cat([family[:, 1:], family[:, :1]], dim=1)
            for f in range(len(data.families)):
                sel = m1 & (fam == f)
                sums[f] += float(l1[sel].sum())
                counts[f] += int(sel.sum())
            if l2 is not None:
                mtp_sum += float(l2.sum())
                mtp_count += int(m2.sum())
    per = {data.families[f]: round(sums[f] / counts[f], 4) for f in range(len(sums)) if counts[f]}
    out = {"valid_loss": round(sums.sum() / max(1, counts.sum()), 4), "valid_by_family": per}
    if mtp_count:
        out["valid_mtp_loss"] = round(mtp_sum / mtp_count, 4)
    return out


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def git_revision():
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "models/mini"], capture_output=True, text=True,
                               check=True).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def plot(log_path, out_path, title):
    """loss.svg from the training log with gnuplot (skipped, with a note, without it)."""
    rows = [json.loads(l) for l in open(log_path)]
    train = [(r["step"], r["loss"], r["mtp_loss"]) for r in rows if "loss" in r]
    valid = [(r["step"], r["valid_loss"]) for r in rows if "valid_loss" in r]
    tmp = Path(out_path).with_suffix(".dat")
    with open(tmp, "w") as f:
        f.write("".join(f"{s} {a} {b}\n" for s, a, b in train) + "\n\n" + "".join(f"{s} {v}\n" for s, v in valid))
    script = (f"set terminal svg size 800,480 font 'sans,12'\nset output '{out_path}'\nset title '{title}'\n"
              "set xlabel 'step'\nset ylabel 'cross entropy (nats/token)'\nset logscale y\nset grid\n"
              f"plot '{tmp}' index 0 using 1:2 with lines lw 2 title 'train (next token)', "
              f"'' index 0 using 1:3 with lines title 'train (MTP, token after next)', "
              f"'' index 1 using 1:2 with linespoints pt 7 title 'validation (next token)'\n")
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"train: no loss plot ({e})")
    finally:
        tmp.unlink()


def export(model, mcfg, cfg, data_dir, out):
    """The HF checkpoint tandem-rt loads: model.safetensors, config.json, the tokenizer
    files and the data manifest. Returns the bytes of weights written."""
    out.mkdir(parents=True, exist_ok=True)
    weight_bytes = write_safetensors(out / "model.safetensors", model.hf_tensors(),
                                     {"format": "pt", "tandem_recipe": "models/mini", "tandem_seed": str(cfg["seed"])})
    with open(out / "config.json", "w") as f:
        f.write(json.dumps(dict(mcfg), indent=2) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json", "data_manifest.json"):
        shutil.copyfile(Path(data_dir) / name, out / name)
    return weight_bytes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, help="override train.threads (the weights depend on it)")
    ap.add_argument("--steps", type=int, help="override train.steps (for timing runs)")
    ap.add_argument("--init", help="start from this exported checkpoint's weights (a second stage) instead of the seeded init")
    args = ap.parse_args()
    cfg = json.load(open(args.config))
    t = cfg["train"]
    if args.threads:
        t["threads"] = args.threads
    if args.steps:
        t["steps"] = args.steps
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    torch.set_num_threads(t["threads"])
    torch.set_num_interop_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(cfg["seed"])
    rng = np.random.default_rng(cfg["seed"])

    data = Data(args.data)
    manifest = json.load(open(Path(args.data) / "data_manifest.json"))
    mcfg = dict(cfg["model"], vocab_size=manifest["tokenizer"]["vocab_size"])
    model = DeepseekV3(mcfg)
    model.init_weights(torch.Generator().manual_seed(cfg["seed"]), std=t["init_std"])
    if args.init:
        # A later stage: the previous stage's exported weights (bf16, as committed) and
        # its correction biases; the optimizer starts afresh.
        previous = load_checkpoint(args.init)
        with torch.no_grad():
            for (name, target), (_, source) in zip(model.hf_tensors(), previous.hf_tensors()):
                target.copy_(source)
        print(f"init: the weights of {args.init}")
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and n != "embed_tokens"]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() == 2 and n != "embed_tokens")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": t["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=t["lr"], betas=tuple(t["betas"]), eps=1e-8)
    moes = model.moe_layers()
    valid_rows = [(r, rows[i:i + max(1, t["tokens_per_batch"] // r)])
                  for r, rows in pack(data, data.valid, sorted(t["row_lengths"]), np.random.default_rng(0)).items()
                  for i in range(0, len(rows), max(1, t["tokens_per_batch"] // r))]
    valid_rows = [(r, rows) for r, rows in valid_rows if rows][:t["eval_batches"]]
    print(f"model: {n_params / 1e6:.2f} M parameters ({len(moes)} MoE layers with the MTP layer), vocab {mcfg['vocab_size']}; "
          f"{len(data.train)} training examples, {int(data.length[data.train].sum())} tokens; {t['threads']} threads")

    log = open(out / "training_log.jsonl", "w")

    def emit(record):
        log.write(json.dumps(record) + "\n")
        log.flush()
        print(json.dumps(record))

    stream = batches(data, cfg, rng)
    acc = {"loss": 0.0, "mtp": 0.0, "bal": 0.0, "n": 0, "tokens": 0, "targets": 0}
    start = last = time.monotonic()
    total_tokens = 0
    for step in range(t["steps"]):
        epoch, (tokens, positions, doc, target, _) = next(stream)
        lr = lr_at(step, t)
        for g in opt.param_groups:
            g["lr"] = lr
        l1, m1, l2, m2 = token_losses(model, tokens, positions, doc, target)
        loss = l1.sum() / m1.sum().clamp(min=1)
        mtp = l2.sum() / m2.sum().clamp(min=1) if l2 is not None else torch.zeros(())
        balance = sum(m.last_balance for m in moes) / max(1, len(moes))
        total = loss + t["mtp_loss_weight"] * mtp + t["balance_loss_alpha"] * balance
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t["grad_clip"])
        opt.step()
        # Aux-loss-free balancing (DeepSeek-V3): raise the bias of underloaded experts,
        # lower it for overloaded ones, by a fixed step; selection only, never gradients.
        loads = []
        with torch.no_grad():
            for m in moes:
                c = m.last_counts
                m.e_score_correction_bias += t["bias_update_speed"] * torch.sign(c.mean() - c)
                loads.append(float(c.max() / c.mean().clamp(min=1)))
        valid_tokens = int((doc >= 0).sum())
        total_tokens += valid_tokens
        acc["loss"] += float(loss)
        acc["mtp"] += float(mtp)
        acc["bal"] += float(balance)
        acc["n"] += 1
        acc["tokens"] += valid_tokens
        if (step + 1) % t["log_every"] == 0 or step + 1 == t["steps"]:
            now = time.monotonic()
            emit({"step": step + 1, "epoch": epoch, "lr": round(lr, 6), "loss": round(acc["loss"] / acc["n"], 4),
                  "mtp_loss": round(acc["mtp"] / acc["n"], 4), "balance": round(acc["bal"] / acc["n"], 4),
                  "max_load": round(max(loads), 2), "bias_absmax": round(max(float(m.e_score_correction_bias.abs().max())
                                                                             for m in moes), 4),
                  "tokens": total_tokens, "tok_per_s": round(acc["tokens"] / (now - last), 1),
                  "elapsed_s": round(now - start, 1)})
            acc = {"loss": 0.0, "mtp": 0.0, "bal": 0.0, "n": 0, "tokens": 0, "targets": 0}
            last = time.monotonic()
        if (step + 1) % t["eval_every"] == 0 or step + 1 == t["steps"]:
            e0 = time.monotonic()
            emit(dict({"step": step + 1}, **evaluate(model, data, cfg, valid_rows)))
            if step + 1 < t["steps"]:
                # A loadable snapshot of the weights so far (out/snapshot): a run cut short
                # still leaves a model to look at.
                export(model, mcfg, cfg, args.data, out / "snapshot")
            start += time.monotonic() - e0        # evaluation time is not training time
            last = time.monotonic()
    train_s = time.monotonic() - start
    log.close()

    weight_bytes = export(model, mcfg, cfg, args.data, out)
    shutil.rmtree(out / "snapshot", ignore_errors=True)
    if args.init:
        # The earlier stage's record travels with the weights: its log, plot and data.
        for name in ("training_log.jsonl", "loss.svg", "data_manifest.json"):
            if (Path(args.init) / name).exists():
                shutil.copyfile(Path(args.init) / name, out / ("previous_stage_" + name))
    plot(out / "training_log.jsonl", out / "loss.svg", f"mini model training ({Path(args.config).name})")
    previous_recipe = Path(args.init) / "recipe.json" if args.init else None
    recipe = {"previous_stage": json.load(open(previous_recipe)) if previous_recipe and previous_recipe.exists() else None,
              "config_file": str(Path(args.config).resolve().relative_to(REPO)) if str(Path(args.config).resolve()).startswith(str(REPO))
              else args.config, "config": cfg, "git": git_revision(), "torch": torch.__version__, "numpy": np.__version__,
              "threads": t["threads"], "parameters": n_params, "weight_bytes": weight_bytes,
              "train_seconds": round(train_s, 1), "train_tokens": total_tokens,
              "tok_per_s": round(total_tokens / train_s, 1),
              "data_files_sha256": manifest["files"],
              "model_safetensors_sha256": hashlib.sha256(open(out / "model.safetensors", "rb").read()).hexdigest()}
    json.dump(recipe, open(out / "recipe.json", "w"), indent=1)
    print(f"wrote {out}: {weight_bytes / 1e6:.1f} MB of weights, {total_tokens} tokens in {train_s:.0f} s "
          f"({total_tokens / train_s:.0f} tok/s); model.safetensors sha256 {recipe['model_safetensors_sha256']}")


if __name__ == "__main__":
    main()
