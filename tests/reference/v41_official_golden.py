#!/usr/bin/env python3
"""Golden logits of DeepSeek V4.1 from DeepSeek's own reference code, for a synthetic preset.

Runs DeepSeek's inference/model.py (with PyTorch >= 2.8: `scripts/setup --reference` puts it
in .venv) on the weights `tandem-rt init-model --preset PRESET --seed SEED` writes, loaded
into the reference's Transformer as they are stored (FP8 E4M3 + E8M0, FP4 E2M1 + E8M0; wo_a
dequantized to bf16, the head and the ratio-2 compressor in fp32, as the reference holds
them), and writes the logits CI then compares Tandem with, without PyTorch
(tests/reference/v41_check_official.py):

  * decode: position 0 as a one-token prefill, then every later position as one decode step
    (Transformer.forward(ids[:, i:i+1], i)), through the reference's window ring, compressor
    state and caches: a logits row for every position;
  * prefill: a fresh prefill of every prompt length 1 … POSITIONS (the reference returns the
    last position's logits only).

    .venv/bin/python3 tests/reference/v41_official_golden.py --reference DIR \\
        --tandem-rt build/bin/tandem-rt --preset v41-tiny --seed 5 --out tests/reference/golden/v41_official_tiny

writes OUT.json (tokens, provenance: PyTorch's version and the sha256 of each reference
file), OUT.f32 (little-endian fp32: the decode rows, then the prefill rows) and
OUT.dspark.f32 (DSpark's draft logits, step by step; the json has its tokens and
confidence) and (v41-tiny) OUT.layers.npz: from a prefill of the first LAYER_POSITIONS tokens, each layer's input stream
(after Engram), the mix collapsing it, its attention and FFN outputs and its output stream
(bf16 bits; the mixes fp32), and each Engram layer's input — so a check can feed every layer
the reference's own input and compare what it makes of it.

DIR holds the reference as a package `deepseek_v41` (model.py, engram.py, kernel_cpu.py,
…): DeepSeek's inference/ files with CPU ports of its kernels, as vendored (MIT, with a
list of every deviation) in the public repository tenstorrent/tt-metal under
models/demos/deepseek_v3_d_p/reference/deepseek_v41/ — DeepSeek's own kernel.py needs a GPU.
Nothing of it is copied into this repository; this script only imports it.

The Engram token map comes from a stub tokenizer — token 2k decodes to "w{k}", 2k+1 to
" W{k}", so the reference's own normalisation maps token t to t // 2, which is what
`models/v41/engram_constants.py --stub` writes for Tandem.
"""
import argparse
import dataclasses
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

# The prompt: fixed tokens (not the model's own choices), so Tandem can be fed the same.
POSITIONS = 72
PREFILL_LENGTHS = list(range(1, POSITIONS + 1))
# DSpark's record: a prompt of this many tokens, then this many decode steps, each followed
# by forward_spec's drafts (before the reference's decode reads a stale index-key slot:
# docs/v41-attention.md).
DSPARK_PROMPT = 1
DSPARK_STEPS = 16
# The layer-by-layer record: a prefill of this many tokens (more than two windows of v41-tiny);
# kept for v41-tiny only, which has every block type, as its size grows with the model.
LAYER_POSITIONS = {"v41-tiny": 40, "v41-small": 0}


def bf16_bits(t):
    """bf16 values as their uint16 bits (every recorded stream is bf16)."""
    return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).copy()


def record_layers(v41, model, ids):
    """Each backbone layer's input stream (after Engram, if the layer has it), the collapse mix
    it came with, its attention and FFN outputs and its output stream, from one prefill."""
    rec = {"block_in": [], "pre_in": [], "attn_out": [], "ffn_out": [], "block_out": [], "engram_in": []}
    hooks = []
    for layer in model.layers:
        def block_hook(module, args, output, rec=rec):
            x, _, pre_mix = args[0], args[1], args[2]
            rec["block_in"].append(bf16_bits(x[0]))
            rec["pre_in"].append(pre_mix[0].float().numpy().copy())
            rec["block_out"].append(bf16_bits(output[0][0]))
        hooks.append(layer.register_forward_hook(block_hook))
        hooks.append(layer.attn.register_forward_hook(lambda m, a, o, rec=rec: rec["attn_out"].append(bf16_bits(o[0]))))
        hooks.append(layer.ffn.register_forward_hook(lambda m, a, o, rec=rec: rec["ffn_out"].append(bf16_bits(o[0]))))
        if layer.engram is not None:
            hooks.append(layer.engram.register_forward_hook(lambda m, a, o, rec=rec: rec["engram_in"].append(bf16_bits(a[0][0]))))
    try:
        model(ids, 0)
    finally:
        for h in hooks:
            h.remove()
    return {k: np.stack(v) for k, v in rec.items() if v}


class StubTokenizer:
    """What the reference's Engram reads of a tokenizer: its size, and each token decoded."""

    class _Backend:
        def decode(self, ids, skip_special_tokens=False):
            (t,) = ids
            return f"w{t // 2}" if t % 2 == 0 else f" W{t // 2}"

        def id_to_token(self, t):
            return self.decode([t])

    def __init__(self, vocab):
        self.vocab = vocab
        self.backend_tokenizer = self._Backend()

    def __len__(self):
        return self.vocab


def read_safetensors(path):
    """name → (dtype string, shape, raw bytes) without the safetensors package's dtype table."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = (info["dtype"], info["shape"], data[8 + n + a:8 + n + b])
    return out


TORCH_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F8_E4M3": torch.float8_e4m3fn,
                "F8_E8M0": torch.float8_e8m0fnu, "I8": torch.int8}


def tensor_of(entry):
    dtype, shape, raw = entry
    t = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    return t.view(TORCH_DTYPES[dtype]).reshape(shape) if raw else torch.empty(shape, dtype=TORCH_DTYPES[dtype])


def record_dspark(model, ids):
    """A prefill of DSPARK_PROMPT tokens seeding the stages, then per decode step the
    target's greedy token and forward_spec's drafts, confidence and logits."""
    output_ids, _, main_hidden = model(ids[:, :DSPARK_PROMPT], 0)
    model.forward_spec(output_ids, main_hidden, 0)
    steps, logits_rows = [], []
    for i in range(DSPARK_PROMPT, DSPARK_PROMPT + DSPARK_STEPS):
        output_ids, _, main_hidden = model(ids[:, i:i + 1], i)
        drafts, logits, confidence = model.forward_spec(output_ids, main_hidden, i)
        steps.append({"position": i, "next": int(output_ids[0]), "drafts": [int(t) for t in drafts[0, 1:]],
                      "confidence": [float(v) for v in confidence[0].float()]})
        logits_rows.extend(logits[0].float().numpy())
    return {"prompt": DSPARK_PROMPT, "steps": steps}, logits_rows


def state_dict_for(model, tensors):
    """The checkpoint's tensors in the dtypes the reference's parameters have."""
    sd = {}
    for name, param in model.state_dict().items():
        source = name
        if name.startswith("mtp.") and (name.endswith(".embed.weight") or name.endswith(".head.weight")) \
                and ".markov_head." not in name:
            source = name.split(".", 2)[2]  # tied to the backbone's
        if source not in tensors:
            raise SystemExit(f"the reference's parameter {name} has no tensor {source} in the checkpoint")
        t = tensor_of(tensors[source])
        if param.dtype == t.dtype:
            sd[name] = t
        elif param.dtype == torch.float4_e2m1fn_x2 and t.dtype == torch.int8:
            sd[name] = t.view(torch.float4_e2m1fn_x2)
        elif t.dtype == torch.float8_e4m3fn and param.dtype == torch.bfloat16:  # wo_a: its exact bf16 values
            scale = tensor_of(tensors[source[:-len(".weight")] + ".scale"]).float()
            full = scale.repeat_interleave(32, 0)[: t.shape[0]].repeat_interleave(32, 1)[:, : t.shape[1]]
            sd[name] = (t.float() * full).to(torch.bfloat16)
        elif param.dtype == torch.float32 and t.dtype == torch.bfloat16:  # the head, the ratio-2 compressor
            sd[name] = t.float()
        else:
            raise SystemExit(f"{name}: the reference holds {param.dtype}, the checkpoint {t.dtype}")
    return sd


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, help="the directory holding the deepseek_v41 package")
    parser.add_argument("--tandem-rt", required=True)
    parser.add_argument("--preset", required=True, choices=["v41-tiny", "v41-small"])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", required=True, help="OUT.json and OUT.f32 are written")
    parser.add_argument("--layer-positions", type=int, help="record the layers over this many positions (default: 40 for "
                        "v41-tiny, none for v41-small, whose record would be 2.7 MB)")
    args = parser.parse_args()
    major, minor = (int(v) for v in torch.__version__.split(".")[:2])
    if (major, minor) < (2, 8):
        raise SystemExit(f"PyTorch {torch.__version__}: DeepSeek's reference needs 2.8 or later (scripts/setup --reference)")
    package = os.path.join(args.reference, "deepseek_v41")
    if not os.path.isfile(os.path.join(package, "model.py")):
        raise SystemExit(f"{package}/model.py: not found (--reference names the directory holding the deepseek_v41 package)")
    sys.path.insert(0, os.path.abspath(args.reference))
    import deepseek_v41.model as v41

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([args.tandem_rt, "init-model", "--preset", args.preset, "--seed", str(args.seed), "--out", tmp],
                       check=True, capture_output=True)
        with open(os.path.join(tmp, "inference", "config.json")) as f:
            config = json.load(f)
        tensors = read_safetensors(os.path.join(tmp, "model.safetensors"))
    fields = {f.name for f in dataclasses.fields(v41.ModelArgs)}
    model_args = v41.ModelArgs(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in config.items() if k in fields})
    model_args.max_batch_size = 1
    model_args.max_seq_len = 128
    model_args.temperature = 0.0
    vocab = model_args.vocab_size
    tokens = np.random.default_rng(args.seed).integers(0, vocab, size=POSITIONS).tolist()
    ids = torch.tensor([tokens], dtype=torch.long)

    torch.manual_seed(0)
    with v41.set_dtype(torch.bfloat16):
        model = v41.Transformer(model_args, StubTokenizer(vocab))
        model.load_state_dict(state_dict_for(model, tensors), strict=True)
        model.eval()
        decode = []
        with torch.inference_mode():
            for i in range(POSITIONS):
                _, logits, _ = model(ids[:, i:i + 1], i)
                decode.append(logits[0].float().numpy())
            prefill = []
            for length in PREFILL_LENGTHS:
                _, logits, _ = model(ids[:, :length], 0)
                prefill.append(logits[0].float().numpy())
            layer_positions = LAYER_POSITIONS[args.preset] if args.layer_positions is None else args.layer_positions
            layers = record_layers(v41, model, ids[:, :layer_positions]) if layer_positions else None
            dspark, dspark_logits = record_dspark(model, ids)
    rows = np.stack(decode + prefill).astype("<f4")
    rows.tofile(args.out + ".f32")
    if layers is not None:
        np.savez_compressed(args.out + ".layers.npz", **layers)
    np.stack(dspark_logits).astype("<f4").tofile(args.out + ".dspark.f32")
    files = sorted(f for f in os.listdir(package) if f.endswith(".py"))
    meta = {"source": "tests/reference/v41_official_golden.py", "preset": args.preset, "seed": args.seed, "vocab": vocab,
            "tokens": tokens, "decode_positions": POSITIONS, "prefill_lengths": PREFILL_LENGTHS, "layer_positions": layer_positions, "dspark": dspark,
            "torch": torch.__version__, "reference_sha256": {f: sha256(os.path.join(package, f)) for f in files}}
    with open(args.out + ".json", "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}.json and {args.out}.f32: {len(decode)} decode and {len(prefill)} prefill rows of {vocab} logits")


if __name__ == "__main__":
    main()
