#!/usr/bin/python3
"""Reads a GGUF file that `tandem-rt export --format gguf` wrote and checks it against
the checkpoint it came from, independently of the C++ writer: its own GGUF parser
(from the format's documentation), its own Q8_0 / Q4_0 encoders (ggml's reference
algorithm, in numpy) and reference_forward.py's safetensors reader.

    check_gguf.py --gguf FILE --model DIR --type bf16|f16|f32|q8_0|q4_0

Checks: the header and every metadata value the deepseek2 architecture needs, against
config.json; the tokenizer lists against tokenizer.json; the exact set of tensors,
with their dimensions and types; and every tensor's bytes: F32/F16/BF16 equal the
source values rounded to that type, Q8_0/Q4_0 equal this script's encoding of them.
Exit 0 and "ok ..." when all hold; exit 1 naming the first difference.
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_forward import Checkpoint  # noqa: E402

GGML = {0: "f32", 1: "f16", 2: "q4_0", 8: "q8_0", 30: "bf16"}
BLOCK = {"f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "q8_0": (32, 34), "q4_0": (32, 18)}
FILE_TYPE = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7, "bf16": 32}
MAX_COUNT = 1 << 24


class Fail(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Fail(what)


# ---------------------------------------------------------------------------
# GGUF parsing
# ---------------------------------------------------------------------------

class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        expect(0 <= n <= len(self.data) - self.pos, f"truncated at byte {self.pos} (wanted {n})")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u(self, fmt):
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        return self.take(self.u("Q")).decode("utf-8")

    def value(self, t):
        scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 10: "Q", 11: "q", 12: "d"}
        if t in scalar:
            return self.u(scalar[t])
        if t == 7:
            b = self.u("B")
            expect(b in (0, 1), f"bool byte {b} at {self.pos - 1}")
            return bool(b)
        if t == 8:
            return self.string()
        if t == 9:
            item, n = self.u("I"), self.u("Q")
            expect(item != 9 and n <= MAX_COUNT, f"array of type {item} x {n}")
            return [self.value(item) for _ in range(n)]
        raise Fail(f"unknown value type {t} at {self.pos}")


def parse(path):
    data = open(path, "rb").read()
    r = Reader(data)
    expect(r.take(4) == b"GGUF", "no GGUF magic")
    expect(r.u("I") == 3, "not GGUF version 3")
    n_tensors, n_kv = r.u("Q"), r.u("Q")
    expect(n_tensors <= MAX_COUNT and n_kv <= MAX_COUNT, "counts out of range")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        expect(key not in meta, f"metadata key {key} twice")
        t = r.u("I")
        meta[key] = (t, r.value(t))
    tensors = {}
    for _ in range(n_tensors):
        name = r.string()
        expect(len(name) <= 63 and name not in tensors, f"tensor name {name!r}")
        n_dims = r.u("I")
        expect(1 <= n_dims <= 4, f"{name}: {n_dims} dimensions")
        ne = [r.u("Q") for _ in range(n_dims)]
        t, offset = r.u("I"), r.u("Q")
        expect(t in GGML, f"{name}: ggml type {t}")
        tensors[name] = (GGML[t], ne, offset)
    align = meta.get("general.alignment", (4, 32))[1]
    start = -(-r.pos // align) * align
    expect(all(b == 0 for b in data[r.pos:start]), "padding before the data is not zeros")
    out = {}
    end_of_last = 0
    for name, (t, ne, offset) in tensors.items():
        vals, size = BLOCK[t]
        expect(ne[0] % vals == 0, f"{name}: row of {ne[0]} is not whole {t} blocks")
        nbytes = ne[0] // vals * size * math.prod(ne[1:])
        expect(offset % align == 0 and offset >= end_of_last, f"{name}: offset {offset} misaligned or overlapping")
        expect(start + offset + nbytes <= len(data), f"{name}: data beyond the end of the file")
        out[name] = (t, ne, data[start + offset:start + offset + nbytes])
        end_of_last = offset + nbytes
    expect(len(data) - start - end_of_last < align, "bytes after the last tensor")
    return meta, out


# ---------------------------------------------------------------------------
# Encodings (ggml's reference quantizers; fp32 arithmetic where ggml's is fp32)
# ---------------------------------------------------------------------------

def q8_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    amax = np.abs(b).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = (b * inv[:, None]).astype(np.float32).astype(np.float64)
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)   # roundf: halves away from zero
    return np.concatenate([d.astype("<f2").view(np.uint8).reshape(-1, 2), q.view(np.uint8)], axis=1).tobytes()


def q4_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    idx = np.abs(b).argmax(axis=1)                      # the first of equal magnitudes, as ggml's strict '<'
    m = b[np.arange(len(b)), idx]
    d = (m / np.float32(-8)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = ((b * inv[:, None]).astype(np.float32) + np.float32(8.5)).astype(np.float32)
    q = np.minimum(15, np.trunc(v).astype(np.int64)).astype(np.uint8)
    nib = q[:, :16] | (q[:, 16:] << 4)
    return np.concatenate([d.astype("<f2").view(np.uint8).reshape(-1, 2), nib], axis=1).tobytes()


def encode(x, t):
    x = np.ascontiguousarray(x, dtype=np.float32)
    if t == "f32":
        return x.astype("<f4").tobytes()
    if t == "f16":
        return x.astype("<f2").tobytes()
    if t == "bf16":
        bits = x.view(np.uint32).astype(np.uint64)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return rounded.astype("<u2").tobytes()
    return q8_0(x) if t == "q8_0" else q4_0(x)


# ---------------------------------------------------------------------------
# The checkpoint's values (a `tandem-rt quantize` checkpoint dequantized)
# ---------------------------------------------------------------------------

def source(ck, name):
    expect(ck.has_matrix(name), f"checkpoint has no {name}")
    return ck.get(name).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--type", required=True, choices=list(FILE_TYPE))
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    meta, tensors = parse(a.gguf)
    ck = Checkpoint(a.model)

    def m(key):
        expect(key in meta, f"metadata {key} missing")
        return meta[key][1]

    A = "deepseek2."
    heads, hidden = cfg["num_attention_heads"], cfg["hidden_size"]
    q_lora = cfg.get("q_lora_rank") or 0
    nope, rope, vdim = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    want = {
        "general.architecture": "deepseek2", "general.file_type": FILE_TYPE[a.type],
        A + "block_count": cfg["num_hidden_layers"], A + "context_length": cfg["max_position_embeddings"],
        A + "embedding_length": hidden, A + "feed_forward_length": cfg["intermediate_size"],
        A + "attention.head_count": heads, A + "attention.head_count_kv": heads,
        A + "expert_used_count": cfg["num_experts_per_tok"], A + "leading_dense_block_count": cfg["first_k_dense_replace"],
        A + "vocab_size": cfg["vocab_size"], A + "attention.kv_lora_rank": cfg["kv_lora_rank"],
        A + "attention.key_length": nope + rope, A + "attention.value_length": vdim,
        A + "expert_feed_forward_length": cfg["moe_intermediate_size"], A + "expert_count": cfg["n_routed_experts"],
        A + "expert_shared_count": cfg["n_shared_experts"], A + "expert_weights_norm": bool(cfg.get("norm_topk_prob", False)),
        A + "expert_gating_func": {"softmax": 1, "sigmoid": 2, "sqrtsoftplus": 4}[cfg.get("scoring_func", "softmax")],
        A + "rope.dimension_count": rope,
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.bos_token_id": cfg.get("bos_token_id", 0),
        "tokenizer.ggml.eos_token_id": cfg.get("eos_token_id", 1),
    }
    if q_lora:
        want[A + "attention.q_lora_rank"] = q_lora
    if cfg.get("n_group", 1) > 1:
        want[A + "expert_group_count"] = cfg["n_group"]
        want[A + "expert_group_used_count"] = cfg["topk_group"]
    for key, value in want.items():
        expect(m(key) == value, f"metadata {key} = {m(key)!r}, expected {value!r}")
    for key, value in {A + "rope.freq_base": cfg.get("rope_theta", 10000.0), A + "attention.layer_norm_rms_epsilon": cfg["rms_norm_eps"],
                       A + "expert_weights_scale": cfg.get("routed_scaling_factor", 1.0)}.items():
        expect(m(key) == np.float32(value), f"metadata {key} = {m(key)}, expected {value}")
    rs = cfg.get("rope_scaling")
    if rs:
        expect(m(A + "rope.scaling.type") == "yarn", "rope.scaling.type")
        expect(m(A + "rope.scaling.factor") == np.float32(rs["factor"]), "rope.scaling.factor")
        expect(m(A + "rope.scaling.original_context_length") == int(rs["original_max_position_embeddings"]), "original_context_length")
        expect(m(A + "rope.scaling.yarn_log_multiplier") == np.float32(0.1 * rs["mscale_all_dim"]), "yarn_log_multiplier")

    # The tokenizer.
    tok = json.load(open(os.path.join(a.model, "tokenizer.json")))
    tokens, types = m("tokenizer.ggml.tokens"), m("tokenizer.ggml.token_type")
    expect(len(tokens) == cfg["vocab_size"] == len(types), "token list length differs from vocab_size")
    named = {i: (t, 1) for t, i in tok["model"]["vocab"].items()}
    named.update({a_["id"]: (a_["content"], 3 if a_.get("special") else 4) for a_ in tok.get("added_tokens", [])})
    for i in range(cfg["vocab_size"]):
        expected = named.get(i, (f"[PAD{i}]", 5))
        expect((tokens[i], types[i]) == expected, f"token {i}: {(tokens[i], types[i])!r}, expected {expected!r}")
    merges = [x if isinstance(x, str) else " ".join(x) for x in tok["model"]["merges"]]
    expect(m("tokenizer.ggml.merges") == merges, "merges differ from tokenizer.json")

    # The tensors: the expected list, then each one's bytes.
    V, L, E = cfg["vocab_size"], cfg["num_hidden_layers"], cfg["n_routed_experts"]
    first_dense, freq = cfg.get("first_k_dense_replace", 0), cfg.get("moe_layer_freq", 1)
    expected = {}  # gguf name -> (hf names, rows (0: vector), cols, keep f32)
    expected["token_embd.weight"] = (["model.embed_tokens.weight"], V, hidden, False)
    for l in range(L):
        hf, blk = f"model.layers.{l}.", f"blk.{l}."
        expected[blk + "attn_norm.weight"] = ([hf + "input_layernorm.weight"], 0, hidden, True)
        if q_lora:
            expected[blk + "attn_q_a.weight"] = ([hf + "self_attn.q_a_proj.weight"], q_lora, hidden, False)
            expected[blk + "attn_q_a_norm.weight"] = ([hf + "self_attn.q_a_layernorm.weight"], 0, q_lora, True)
            expected[blk + "attn_q_b.weight"] = ([hf + "self_attn.q_b_proj.weight"], heads * (nope + rope), q_lora, False)
        else:
            expected[blk + "attn_q.weight"] = ([hf + "self_attn.q_proj.weight"], heads * (nope + rope), hidden, False)
        kv = cfg["kv_lora_rank"]
        expected[blk + "attn_kv_a_mqa.weight"] = ([hf + "self_attn.kv_a_proj_with_mqa.weight"], kv + rope, hidden, False)
        expected[blk + "attn_kv_a_norm.weight"] = ([hf + "self_attn.kv_a_layernorm.weight"], 0, kv, True)
        expected[blk + "attn_kv_b.weight"] = ([hf + "self_attn.kv_b_proj.weight"], heads * (nope + vdim), kv, False)
        expected[blk + "attn_output.weight"] = ([hf + "self_attn.o_proj.weight"], hidden, heads * vdim, False)
        expected[blk + "ffn_norm.weight"] = ([hf + "post_attention_layernorm.weight"], 0, hidden, True)
        if E == 0 or l < first_dense or l % freq != 0:
            inter = cfg["intermediate_size"]
            expected[blk + "ffn_gate.weight"] = ([hf + "mlp.gate_proj.weight"], inter, hidden, False)
            expected[blk + "ffn_up.weight"] = ([hf + "mlp.up_proj.weight"], inter, hidden, False)
            expected[blk + "ffn_down.weight"] = ([hf + "mlp.down_proj.weight"], hidden, inter, False)
            continue
        mi = cfg["moe_intermediate_size"]
        expected[blk + "ffn_gate_inp.weight"] = ([hf + "mlp.gate.weight"], E, hidden, True)
        if ck.has(hf + "mlp.gate.e_score_correction_bias"):
            expected[blk + "exp_probs_b.bias"] = ([hf + "mlp.gate.e_score_correction_bias"], 0, E, True)
        for g, p in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
            names = [f"{hf}mlp.experts.{e}.{p}.weight" for e in range(E)]
            expected[blk + f"ffn_{g}_exps.weight"] = (names, hidden if g == "down" else mi, mi if g == "down" else hidden, False)
        if cfg.get("n_shared_experts", 0):
            s = mi * cfg["n_shared_experts"]
            expected[blk + "ffn_gate_shexp.weight"] = ([hf + "mlp.shared_experts.gate_proj.weight"], s, hidden, False)
            expected[blk + "ffn_up_shexp.weight"] = ([hf + "mlp.shared_experts.up_proj.weight"], s, hidden, False)
            expected[blk + "ffn_down_shexp.weight"] = ([hf + "mlp.shared_experts.down_proj.weight"], hidden, s, False)
    expected["output_norm.weight"] = (["model.norm.weight"], 0, hidden, True)
    expected["output.weight"] = (["model.embed_tokens.weight" if cfg.get("tie_word_embeddings") else "lm_head.weight"], V, hidden, False)

    expect(set(tensors) == set(expected), f"tensor names differ: extra {sorted(set(tensors) - set(expected))[:5]}, "
                                           f"missing {sorted(set(expected) - set(tensors))[:5]}")
    by_type = {}
    for name, (hf_names, rows, cols, keep) in expected.items():
        t, ne, raw = tensors[name]
        want_ne = [cols] if rows == 0 else [cols, rows] + ([len(hf_names)] if len(hf_names) > 1 else [])
        expect(ne == want_ne, f"{name}: dimensions {ne}, expected {want_ne}")
        want_t = "f32" if keep else a.type
        if BLOCK[want_t][0] > 1 and cols % 32:
            want_t = "f32"
        expect(t == want_t, f"{name}: type {t}, expected {want_t}")
        values = np.concatenate([source(ck, n).reshape(-1) for n in hf_names])
        expect(values.size == (rows or 1) * cols * len(hf_names), f"{name}: source has {values.size} values")
        expect(raw == encode(values, t), f"{name}: bytes differ from the {t} encoding of {', '.join(hf_names[:2])}")
        by_type[t] = by_type.get(t, 0) + 1
    print(f"ok    {a.gguf}: {len(tensors)} tensors ({', '.join(f'{n} {t}' for t, n in sorted(by_type.items()))}), "
          f"{len(meta)} metadata keys, {len(tokens)} tokens, {len(merges)} merges")


if __name__ == "__main__":
    try:
        main()
    except Fail as e:
        print(f"FAIL  {e}")
        sys.exit(1)
