#!/usr/bin/python3
"""Independent float64 reference forward for DeepSeek-V2/V3 MoE checkpoints.

Runs the Tandem engine (`tandem-rt eval`) on a prompt followed by N greedy
decode steps, recomputes every position's logits with one plain causal forward
(HuggingFace modeling_deepseek.py semantics, non-absorbed MLA, no KV cache) and
checks the engine against it:

  * logits:  per position i, max_j |cpp[i,j] - ref[i,j]| / max_j |ref[i,j]|
             must be <= --tolerance;
  * routing: the experts chosen at every MoE layer and position must be the
             same set (--routing-margin M: except where the reference's own
             selection margin is below M, a near-tie that rounding may flip);
  * greedy:  every fed decode token must be the reference argmax of the row
             before it, up to a near-tie (within 1e-5 of the row's max
             |logit|), and the argmax of the engine's own logits.

Only numpy and the Python standard library are used; nothing of the C++ project
is read. Exit status: 0 pass, 1 fail, 2 usage error.

    reference_forward.py --model DIR --tandem-rt BIN \
        --prompt-tokens 5,17,42 --decode 32 [--tolerance 1e-4]
"""

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

ENGINE_TIMEOUT_S = 300
NEAR_TIE_REL = 1e-5      # near-tie: logits closer than this times the row's max |logit|
SHOW_MAX = 5             # how many individual failures of each kind to list


class UsageError(Exception):
    """Bad arguments, or a model directory this script cannot read (exit 2)."""


class EngineError(Exception):
    """The engine crashed, timed out or wrote malformed output (exit 1)."""


# ---------------------------------------------------------------------------
# 1. Safetensors checkpoints: header parsing, dtype decoding, FP8 dequantization
# ---------------------------------------------------------------------------

def _fp8_e4m3fn_table():
    """float64 value of every e4m3fn byte: 1 sign, 4 exponent bits (bias 7),
    3 mantissa bits, subnormals, no infinities, 0x7f/0xff = NaN."""
    table = np.empty(256, dtype=np.float64)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        exponent = (byte >> 3) & 0xF
        mantissa = byte & 0x7
        if exponent == 0xF and mantissa == 0x7:
            table[byte] = np.nan
        elif exponent == 0:
            table[byte] = sign * (mantissa / 8.0) * 2.0 ** (1 - 7)
        else:
            table[byte] = sign * (1.0 + mantissa / 8.0) * 2.0 ** (exponent - 7)
    return table


FP8_E4M3FN = _fp8_e4m3fn_table()

ITEM_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "I8": 1, "U8": 1}


def decode_tensor(raw, dtype, shape):
    """Bytes of one tensor -> float64 array (FP8 without its scale)."""
    if dtype == "F64":
        values = np.frombuffer(raw, dtype="<f8")
    elif dtype == "F32":
        values = np.frombuffer(raw, dtype="<f4")
    elif dtype == "F16":
        values = np.frombuffer(raw, dtype="<f2")
    elif dtype == "BF16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        values = bits.view(np.float32)
    elif dtype == "F8_E4M3":
        values = FP8_E4M3FN[np.frombuffer(raw, dtype=np.uint8)]
    elif dtype == "I8":
        values = np.frombuffer(raw, dtype=np.int8)
    elif dtype == "U8":
        values = np.frombuffer(raw, dtype=np.uint8)
    else:
        raise UsageError(f"unsupported safetensors dtype {dtype}")
    return values.astype(np.float64).reshape(shape)


class Checkpoint:
    """Lazy reader of DIR/model.safetensors or the shards listed in
    DIR/model.safetensors.index.json; tensors are read when asked for."""

    def __init__(self, model_dir):
        index_path = os.path.join(model_dir, "model.safetensors.index.json")
        single_path = os.path.join(model_dir, "model.safetensors")
        if os.path.isfile(index_path):
            try:
                with open(index_path) as f:
                    weight_map = json.load(f)["weight_map"]
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise UsageError(f"{index_path}: {e}")
            files = sorted(set(weight_map.values()))
        elif os.path.isfile(single_path):
            files = ["model.safetensors"]
        else:
            raise UsageError(f"{model_dir}: no model.safetensors or model.safetensors.index.json")
        self.entries = {}   # name -> (path, absolute byte offset, byte size, dtype, shape)
        for file_name in files:
            self._read_header(os.path.join(model_dir, file_name))

    def _read_header(self, path):
        try:
            with open(path, "rb") as f:
                header_len = int.from_bytes(f.read(8), "little")
                if header_len > os.path.getsize(path) - 8:
                    raise ValueError("header length exceeds the file")
                header = json.loads(f.read(header_len))
            tensors = {name: (info["dtype"], tuple(info["shape"]), info["data_offsets"])
                       for name, info in header.items() if name != "__metadata__"}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise UsageError(f"{path}: not a readable safetensors file ({e})")
        data_start = 8 + header_len
        for name, (dtype, shape, (begin, end)) in tensors.items():
            if dtype not in ITEM_SIZE:
                raise UsageError(f"{path}: tensor {name} has unsupported dtype {dtype}")
            if end - begin != ITEM_SIZE[dtype] * math.prod(shape):
                raise UsageError(f"{path}: tensor {name}: byte size does not match shape")
            self.entries[name] = (path, data_start + begin, end - begin, dtype, shape)

    def has(self, name):
        return name in self.entries

    def has_matrix(self, name):
        """`name` ("….weight") is present as floats or as `tandem-rt quantize` output."""
        return self.has(name) or self._quantized_base(name) is not None

    def _quantized_base(self, name):
        """X for a weight `X.weight` that `tandem-rt quantize` stored as `X.qweight` (and
        `X.qscales`) instead; None otherwise."""
        if name in self.entries or not name.endswith(".weight"):
            return None
        base = name[:-len(".weight")]
        return base if self.has(base + ".qweight") else None

    def _raw(self, name):
        if name not in self.entries:
            raise UsageError(f"checkpoint has no tensor {name}")
        path, offset, size, dtype, shape = self.entries[name]
        with open(path, "rb") as f:
            f.seek(offset)
            raw = f.read(size)
        if len(raw) != size:
            raise UsageError(f"{path}: tensor {name} is truncated")
        return decode_tensor(raw, dtype, shape), dtype

    def get(self, name):
        """The tensor as float64; FP8 weights are multiplied by their
        128x128-block `<name>_scale_inv`; a `tandem-rt quantize` weight (`<base>.qweight`
        and `<base>.qscales` in place of `<base>.weight`) is its levels times their group
        scales."""
        base = self._quantized_base(name)
        if base is not None:
            return self._dequantized(base)
        values, dtype = self._raw(name)
        if dtype != "F8_E4M3":
            return values
        scale, _ = self._raw(name + "_scale_inv")
        rows, cols = values.shape
        expected = (-(-rows // 128), -(-cols // 128))
        if scale.shape != expected:
            raise UsageError(f"{name}_scale_inv has shape {scale.shape}, expected {expected}")
        full_scale = np.repeat(np.repeat(scale, 128, axis=0), 128, axis=1)[:rows, :cols]
        return values * full_scale

    def _dequantized(self, base):
        """int8: one signed byte per value; int4: two's-complement nibbles, the even
        column in the low one (tandem-rt quantize's row-major file order); scales
        [rows, cols / group] in F32."""
        levels, dtype = self._raw(base + ".qweight")
        scales, scales_dtype = self._raw(base + ".qscales")
        if dtype not in ("I8", "U8") or scales_dtype != "F32" or levels.ndim != 2 or scales.ndim != 2:
            raise UsageError(f"{base}: qweight {dtype} {levels.shape} with qscales {scales_dtype} "
                             f"{scales.shape} is not tandem-rt quantize output")
        if dtype == "U8":
            u = levels.astype(np.int64)
            low, high = u & 0xF, u >> 4
            levels = np.stack([np.where(low > 7, low - 16, low), np.where(high > 7, high - 16, high)],
                              axis=-1).reshape(u.shape[0], 2 * u.shape[1]).astype(np.float64)
        rows, cols = levels.shape
        if scales.shape[0] != rows or scales.shape[1] == 0 or cols % scales.shape[1] != 0:
            raise UsageError(f"{base}.qscales has shape {scales.shape}; [{rows}, {cols} / group] expected")
        return levels * np.repeat(scales, cols // scales.shape[1], axis=1)


# ---------------------------------------------------------------------------
# 2. Model configuration (HF config.json names, HF config-class defaults)
# ---------------------------------------------------------------------------

# Defaults of the HF DeepseekV3Config / DeepseekV2Config classes for the
# optional routing keys.
ARCH_DEFAULTS = {
    "DeepseekV3ForCausalLM": {"topk_method": "noaux_tc", "scoring_func": "sigmoid",
                              "routed_scaling_factor": 2.5, "norm_topk_prob": True},
    "DeepseekV2ForCausalLM": {"topk_method": "greedy", "scoring_func": "softmax",
                              "routed_scaling_factor": 1.0, "norm_topk_prob": False},
}


class Config:
    def __init__(self, raw):
        archs = raw.get("architectures") or []
        self.arch = archs[0] if archs else None
        if self.arch not in ARCH_DEFAULTS:
            raise UsageError(f"unsupported architecture {self.arch!r} "
                             f"(expected one of {sorted(ARCH_DEFAULTS)})")
        defaults = ARCH_DEFAULTS[self.arch]

        def need(key):
            if raw.get(key) is None:
                raise UsageError(f"config.json lacks {key}")
            return raw[key]

        def opt(key, default):
            value = raw.get(key)
            return default if value is None else value

        self.hidden = int(need("hidden_size"))
        self.layers = int(need("num_hidden_layers"))      # MTP layers beyond this are ignored
        self.vocab = int(need("vocab_size"))
        self.intermediate = int(need("intermediate_size"))
        self.heads = int(need("num_attention_heads"))
        self.q_lora = int(opt("q_lora_rank", 0))           # 0/null: plain q_proj
        self.kv_lora = int(need("kv_lora_rank"))
        self.nope = int(need("qk_nope_head_dim"))
        self.rope = int(need("qk_rope_head_dim"))
        self.v_dim = int(need("v_head_dim"))
        self.rope_theta = float(opt("rope_theta", 10000.0))
        self.rope_scaling = raw.get("rope_scaling") or None
        self.eps = float(opt("rms_norm_eps", 1e-6))
        self.tie_embeddings = bool(opt("tie_word_embeddings", False))

        self.n_routed = int(opt("n_routed_experts", 0))
        self.n_shared = int(opt("n_shared_experts", 0))
        self.first_dense = int(opt("first_k_dense_replace", 0))
        self.moe_freq = int(opt("moe_layer_freq", 1))
        if self.n_routed > 0:
            self.moe_intermediate = int(need("moe_intermediate_size"))
            self.top_k = int(need("num_experts_per_tok"))
        self.n_group = int(opt("n_group", 1))
        self.topk_group = int(opt("topk_group", 1))
        self.topk_method = opt("topk_method", defaults["topk_method"])
        self.scoring = opt("scoring_func", defaults["scoring_func"])
        self.scaling_factor = float(opt("routed_scaling_factor", defaults["routed_scaling_factor"]))
        self.norm_topk = bool(opt("norm_topk_prob", defaults["norm_topk_prob"]))

        if self.topk_method not in ("greedy", "group_limited_greedy", "noaux_tc"):
            raise UsageError(f"unsupported topk_method {self.topk_method!r}")
        if self.scoring not in ("softmax", "sigmoid", "sqrtsoftplus"):
            raise UsageError(f"unsupported scoring_func {self.scoring!r}")
        if self.rope % 2:
            raise UsageError("qk_rope_head_dim must be even")
        if self.n_routed > 0 and self.n_group > 1 and self.n_routed % self.n_group:
            raise UsageError("n_routed_experts is not a multiple of n_group")

    def is_moe_layer(self, layer):
        return (self.n_routed > 0 and layer >= self.first_dense
                and layer % self.moe_freq == 0)

    def moe_layers(self):
        return [l for l in range(self.layers) if self.is_moe_layer(l)]


def load_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(path):
        raise UsageError(f"{model_dir}: no config.json")
    try:
        with open(path) as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: {e}")
    return Config(raw)


# ---------------------------------------------------------------------------
# 3. Elementwise building blocks
# ---------------------------------------------------------------------------

def rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def silu(z):
    return z / (1.0 + np.exp(-z))


def softmax(z, axis=-1):
    e = np.exp(z - np.max(z, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def mlp(x, gate, up, down):
    """SwiGLU MLP on rows of x; weights are [out, in]."""
    return (silu(x @ gate.T) * (x @ up.T)) @ down.T


# ---------------------------------------------------------------------------
# 4. Rotary embedding: plain RoPE and DeepSeek YaRN
# ---------------------------------------------------------------------------

def yarn_get_mscale(scale, mscale):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_frequencies(cfg):
    """(inv_freq [d/2], mscale applied to cos/sin, attention softmax scale)."""
    d = cfg.rope
    theta = cfg.rope_theta
    freq_extra = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    softmax_scale = (cfg.nope + cfg.rope) ** -0.5
    rs = cfg.rope_scaling
    if rs is None:
        return freq_extra, 1.0, softmax_scale

    kind = rs.get("type", rs.get("rope_type"))
    if kind != "yarn":
        raise UsageError(f"unsupported rope_scaling type {kind!r} (only yarn)")
    factor = float(rs["factor"])
    orig_max = float(rs.get("original_max_position_embeddings", 4096))
    beta_fast = float(rs.get("beta_fast", 32))
    beta_slow = float(rs.get("beta_slow", 1))
    mscale = float(rs.get("mscale", 1))
    mscale_all_dim = float(rs.get("mscale_all_dim", 0))

    def find_dim(num_rotations):
        return d * math.log(orig_max / (num_rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(find_dim(beta_fast)), 0)
    high = min(math.ceil(find_dim(beta_slow)), d - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    mask = 1.0 - ramp                     # 1: keep the original frequency
    freq_inter = freq_extra / factor
    inv_freq = freq_inter * (1.0 - mask) + freq_extra * mask

    mscale_rope = yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim)
    if mscale_all_dim:
        softmax_scale *= yarn_get_mscale(factor, mscale_all_dim) ** 2
    return inv_freq, mscale_rope, softmax_scale


def apply_rope(x, positions, inv_freq, mscale):
    """Rotate x [T, ..., d] at positions [T] in HF's layout: pair (x[2i], x[2i+1])
    turns by positions*inv_freq[i]; results land at i and i + d/2."""
    angles = np.outer(positions, inv_freq)                       # [T, d/2]
    angles = angles.reshape(angles.shape[:1] + (1,) * (x.ndim - 2) + angles.shape[1:])
    cos, sin = np.cos(angles) * mscale, np.sin(angles) * mscale
    even, odd = x[..., 0::2], x[..., 1::2]
    return np.concatenate([even * cos - odd * sin, odd * cos + even * sin], axis=-1)


# ---------------------------------------------------------------------------
# 5. Multi-head latent attention (plain, non-absorbed, full causal)
# ---------------------------------------------------------------------------

def attention(ckpt, cfg, layer, x, rope):
    """x: normed hidden states [T, H] -> attention output [T, H]."""
    p = f"model.layers.{layer}.self_attn."
    T = x.shape[0]
    inv_freq, mscale_rope, softmax_scale = rope
    positions = np.arange(T, dtype=np.float64)

    if cfg.q_lora:
        q_latent = rms_norm(x @ ckpt.get(p + "q_a_proj.weight").T,
                            ckpt.get(p + "q_a_layernorm.weight"), cfg.eps)
        q = q_latent @ ckpt.get(p + "q_b_proj.weight").T
    else:
        q = x @ ckpt.get(p + "q_proj.weight").T
    q = q.reshape(T, cfg.heads, cfg.nope + cfg.rope)
    q_nope, q_pe = q[..., :cfg.nope], q[..., cfg.nope:]

    kv = x @ ckpt.get(p + "kv_a_proj_with_mqa.weight").T           # [T, kv_lora + rope]
    c = rms_norm(kv[:, :cfg.kv_lora], ckpt.get(p + "kv_a_layernorm.weight"), cfg.eps)
    k_pe = kv[:, cfg.kv_lora:]                                      # shared by all heads
    kvb = (c @ ckpt.get(p + "kv_b_proj.weight").T).reshape(T, cfg.heads, cfg.nope + cfg.v_dim)
    k_nope, v = kvb[..., :cfg.nope], kvb[..., cfg.nope:]

    q_pe = apply_rope(q_pe, positions, inv_freq, mscale_rope)
    k_pe = apply_rope(k_pe, positions, inv_freq, mscale_rope)

    scores = (np.einsum("thd,shd->hts", q_nope, k_nope)
              + np.einsum("thd,sd->hts", q_pe, k_pe)) * softmax_scale
    causal = np.tril(np.ones((T, T), dtype=bool))
    scores = np.where(causal[None], scores, -np.inf)
    probs = softmax(scores, axis=-1)
    out = np.einsum("hts,shd->thd", probs, v).reshape(T, cfg.heads * cfg.v_dim)
    return out @ ckpt.get(p + "o_proj.weight").T


# ---------------------------------------------------------------------------
# 6. Feed-forward: dense MLP, MoE router, MoE layer
# ---------------------------------------------------------------------------

def dense_mlp(ckpt, layer, x):
    p = f"model.layers.{layer}.mlp."
    return mlp(x, ckpt.get(p + "gate_proj.weight"), ckpt.get(p + "up_proj.weight"),
               ckpt.get(p + "down_proj.weight"))


def router_scores(logits, scoring):
    if scoring == "softmax":
        return softmax(logits, axis=-1)
    if scoring == "sigmoid":
        return 1.0 / (1.0 + np.exp(-logits))
    return np.sqrt(np.logaddexp(0.0, logits))       # sqrtsoftplus


def _top(values, k):
    """Indices of the k largest values, largest first, lower index on ties."""
    return np.argsort(-values, kind="stable")[:k]


def select_experts(scores, bias, cfg):
    """One token's expert choice from its (unbiased) scores [n_routed].

    Returns (chosen ids, largest first; margin), where margin is the smallest
    gap between a kept and a dropped candidate (group or expert) - how close
    the choice was to turning out differently."""
    k = cfg.top_k
    choice = scores + bias if cfg.topk_method == "noaux_tc" else scores.copy()
    margin = np.inf

    if cfg.topk_method != "greedy" and cfg.n_group > 1:
        groups = choice.reshape(cfg.n_group, -1)
        if cfg.topk_method == "group_limited_greedy":
            group_score = groups.max(axis=1)
        else:                                   # noaux_tc: sum of the top two
            group_score = -np.sort(-groups, axis=1)[:, :2].sum(axis=1)
        order = _top(group_score, cfg.n_group)
        kept = order[:cfg.topk_group]
        if cfg.topk_group < cfg.n_group:
            margin = group_score[order[cfg.topk_group - 1]] - group_score[order[cfg.topk_group]]
        in_kept = np.zeros(cfg.n_group, dtype=bool)
        in_kept[kept] = True
        choice = np.where(np.repeat(in_kept, groups.shape[1]), choice, -np.inf)

    order = _top(choice, cfg.n_routed)
    if k < cfg.n_routed and np.isfinite(choice[order[k]]):
        margin = min(margin, choice[order[k - 1]] - choice[order[k]])
    return order[:k], margin


def routing_weights(scores, chosen, cfg):
    w = scores[chosen]
    if cfg.arch == "DeepseekV3ForCausalLM":
        if cfg.top_k > 1 and cfg.norm_topk:
            w = w / (w.sum() + 1e-20)
        w = w * cfg.scaling_factor
    else:                                        # DeepseekV2ForCausalLM
        if cfg.top_k > 1 and cfg.norm_topk:
            w = w / (w.sum() + 1e-20)
        else:
            w = w * cfg.scaling_factor
    return w


def moe(ckpt, cfg, layer, x):
    """x: normed hidden states [T, H] -> (output [T, H], chosen [T] sorted
    id tuples, margins [T])."""
    p = f"model.layers.{layer}.mlp."
    T = x.shape[0]
    scores = router_scores(x @ ckpt.get(p + "gate.weight").T, cfg.scoring)   # [T, n_routed]
    if cfg.topk_method == "noaux_tc":
        bias = ckpt.get(p + "gate.e_score_correction_bias")
    else:
        bias = np.zeros(cfg.n_routed)

    weight_of = [dict() for _ in range(T)]            # token -> {expert: weight}
    chosen, margins = [], []
    for t in range(T):
        ids, margin = select_experts(scores[t], bias, cfg)
        for e, w in zip(ids, routing_weights(scores[t], ids, cfg)):
            weight_of[t][int(e)] = w
        chosen.append(tuple(sorted(int(e) for e in ids)))
        margins.append(margin)

    out = np.zeros_like(x)
    for e in sorted({e for d in weight_of for e in d}):
        tokens = [t for t in range(T) if e in weight_of[t]]
        pre = f"{p}experts.{e}."
        y = mlp(x[tokens], ckpt.get(pre + "gate_proj.weight"), ckpt.get(pre + "up_proj.weight"),
                ckpt.get(pre + "down_proj.weight"))
        out[tokens] += np.array([weight_of[t][e] for t in tokens])[:, None] * y
    if cfg.n_shared > 0:
        pre = p + "shared_experts."
        out += mlp(x, ckpt.get(pre + "gate_proj.weight"), ckpt.get(pre + "up_proj.weight"),
                   ckpt.get(pre + "down_proj.weight"))
    return out, chosen, margins


# ---------------------------------------------------------------------------
# 7. The full forward
# ---------------------------------------------------------------------------

def reference_forward(ckpt, cfg, tokens, hidden_out=None):
    """One causal forward over all tokens.

    Returns (logits [T, V], routes {layer: [T] sorted id tuples},
    margins {layer: [T]}); appends the final normed hidden states [T, H] to
    `hidden_out` when given."""
    rope = rope_frequencies(cfg)
    x = ckpt.get("model.embed_tokens.weight")[np.asarray(tokens)]
    routes, margins = {}, {}
    for layer in range(cfg.layers):
        p = f"model.layers.{layer}."
        h = rms_norm(x, ckpt.get(p + "input_layernorm.weight"), cfg.eps)
        x = x + attention(ckpt, cfg, layer, h, rope)
        h = rms_norm(x, ckpt.get(p + "post_attention_layernorm.weight"), cfg.eps)
        if cfg.is_moe_layer(layer):
            out, routes[layer], margins[layer] = moe(ckpt, cfg, layer, h)
        else:
            out = dense_mlp(ckpt, layer, h)
        x = x + out
    x = rms_norm(x, ckpt.get("model.norm.weight"), cfg.eps)
    if hidden_out is not None:
        hidden_out.append(x)
    if cfg.tie_embeddings or not ckpt.has_matrix("lm_head.weight"):
        if not cfg.tie_embeddings:
            raise UsageError("checkpoint has no lm_head.weight and tie_word_embeddings is false")
        head = ckpt.get("model.embed_tokens.weight")
    else:
        head = ckpt.get("lm_head.weight")
    return x @ head.T, routes, margins


def mtp_forward(ckpt, cfg, tokens, hidden):
    """DeepSeek-V3's MTP layer (model.layers.<num_hidden_layers>) over the sequence:
    row i (i = 0 … T−2) reads token i+1 and the main model's final normed hidden
    state at i, and predicts token i+2. Returns logits [T−1, V]."""
    layer = cfg.layers
    p = f"model.layers.{layer}."
    embed = ckpt.get(p + "embed_tokens.weight") if ckpt.has_matrix(p + "embed_tokens.weight") \
        else ckpt.get("model.embed_tokens.weight")
    e = rms_norm(embed[np.asarray(tokens[1:])], ckpt.get(p + "enorm.weight"), cfg.eps)
    h = rms_norm(hidden[:-1], ckpt.get(p + "hnorm.weight"), cfg.eps)
    x = np.concatenate([e, h], axis=1) @ ckpt.get(p + "eh_proj.weight").T
    rope = rope_frequencies(cfg)
    n = rms_norm(x, ckpt.get(p + "input_layernorm.weight"), cfg.eps)
    x = x + attention(ckpt, cfg, layer, n, rope)
    n = rms_norm(x, ckpt.get(p + "post_attention_layernorm.weight"), cfg.eps)
    out, _, _ = moe(ckpt, cfg, layer, n)
    x = x + out
    x = rms_norm(x, ckpt.get(p + "shared_head.norm.weight"), cfg.eps)
    return x @ ckpt.get(p + "shared_head.head.weight").T


# ---------------------------------------------------------------------------
# 8. Running the engine and reading what it wrote
# ---------------------------------------------------------------------------

def run_engine(binary, model_dir, prompt, decode, cfg, workdir, mtp=False, engine_args=()):
    """Returns (tokens [P+N], logits [P+N, V] float64, routes {layer: [P+N] tuples},
    MTP logits [P+N−1, V] float64 or None)."""
    logits_path = os.path.join(workdir, "logits.bin")
    routes_path = os.path.join(workdir, "routes.json")
    mtp_path = os.path.join(workdir, "mtp_logits.bin")
    cmd = [binary, "eval", "--model", model_dir,
           "--tokens", ",".join(str(t) for t in prompt), "--decode", str(decode),
           "--logits-out", logits_path, "--routes-out", routes_path]
    if mtp:
        cmd += ["--mtp-logits-out", mtp_path]
    cmd += list(engine_args)
    # The engine runs in its own process group, so that a timeout also ends any
    # worker processes it started.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=ENGINE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise EngineError(f"engine timed out after {ENGINE_TIMEOUT_S} s\nstderr:\n{stderr}")
    finally:
        if proc.poll() is None:            # interrupted: do not leave the engine behind
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0:
        raise EngineError(f"engine exited with status {proc.returncode}\n"
                          f"command: {' '.join(cmd)}\nstderr:\n{stderr}")

    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        meta = json.loads(lines[-1])
        positions, vocab = int(meta["positions"]), int(meta["vocab"])
        prompt_len, tokens = int(meta["prompt_tokens"]), [int(t) for t in meta["tokens"]]
    except (IndexError, ValueError, KeyError, TypeError) as e:
        raise EngineError(f"engine stdout is not the expected JSON line ({e}):\n{stdout}")
    expected_positions = len(prompt) + decode
    problems = []
    if positions != expected_positions:
        problems.append(f"positions {positions}, expected {expected_positions}")
    if prompt_len != len(prompt):
        problems.append(f"prompt_tokens {prompt_len}, expected {len(prompt)}")
    if vocab != cfg.vocab:
        problems.append(f"vocab {vocab}, expected {cfg.vocab}")
    if len(tokens) != expected_positions:
        problems.append(f"{len(tokens)} tokens, expected {expected_positions}")
    elif tokens[:len(prompt)] != list(prompt):
        problems.append("tokens do not start with the prompt")
    elif not all(0 <= t < cfg.vocab for t in tokens):
        problems.append("a token id is out of the vocabulary")
    if problems:
        raise EngineError("engine stdout: " + "; ".join(problems))

    if not os.path.isfile(logits_path):
        raise EngineError("engine wrote no logits file")
    logits = np.fromfile(logits_path, dtype="<f4")
    if logits.size != positions * vocab:
        raise EngineError(f"logits.bin holds {logits.size} floats, expected {positions}x{vocab}")
    logits = logits.reshape(positions, vocab).astype(np.float64)

    try:
        with open(routes_path) as f:
            routes = {int(entry["layer"]): [tuple(sorted(int(e) for e in row))
                                            for row in entry["experts"]]
                      for entry in json.load(f)["layers"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise EngineError(f"cannot read routes.json: {e}")
    mtp_logits = None
    if mtp:
        if not os.path.isfile(mtp_path):
            raise EngineError("engine wrote no MTP logits file")
        mtp_logits = np.fromfile(mtp_path, dtype="<f4")
        if mtp_logits.size != (positions - 1) * vocab:
            raise EngineError(f"mtp_logits.bin holds {mtp_logits.size} floats, expected {positions - 1}x{vocab}")
        mtp_logits = mtp_logits.reshape(positions - 1, vocab).astype(np.float64)
    return tokens, logits, routes, mtp_logits


# ---------------------------------------------------------------------------
# 9. Comparison and report
# ---------------------------------------------------------------------------

def relative_errors(cpp, ref):
    """Per row: max_j |cpp - ref| / max_j |ref|  (inf where cpp is not finite)."""
    scale = np.maximum(np.abs(ref).max(axis=1), np.finfo(np.float64).tiny)
    err = np.abs(cpp - ref).max(axis=1) / scale
    err[~np.isfinite(cpp).all(axis=1)] = np.inf
    return err


def compare(cfg, prompt_len, tokens, cpp, ref, cpp_routes, ref_routes, margins, tolerance,
            routing_margin=0.0):
    """Prints the report; returns the list of failure messages."""
    failures = []
    T = len(tokens)

    # Logits.
    err = relative_errors(cpp, ref)
    print(f"{'rows':>12} {'count':>6} {'max rel err':>12} {'median':>10} {'worst pos':>10}")
    for label, rows in (("prompt", range(0, prompt_len)), ("decode", range(prompt_len, T)),
                        ("all", range(0, T))):
        if len(rows) == 0:
            continue
        e = err[list(rows)]
        worst = rows[int(np.argmax(e))]
        print(f"{label:>12} {len(rows):>6} {e.max():>12.3e} {np.median(e):>10.3e} {worst:>10}")
    bad = [i for i in range(T) if not err[i] <= tolerance]
    if bad:
        listed = ", ".join(f"pos {i}: {err[i]:.3e}" for i in bad[:SHOW_MAX])
        failures.append(f"logits: {len(bad)} of {T} positions exceed tolerance "
                        f"{tolerance:g} ({listed}{', ...' if len(bad) > SHOW_MAX else ''})")

    # Routing.
    moe_layers = cfg.moe_layers()
    mismatches = []
    if sorted(cpp_routes) != moe_layers:
        failures.append(f"routing: engine reported layers {sorted(cpp_routes)}, "
                        f"MoE layers are {moe_layers}")
    for layer in moe_layers:
        rows = cpp_routes.get(layer)
        if rows is None:
            continue
        if len(rows) != T:
            failures.append(f"routing: layer {layer} has {len(rows)} positions, expected {T}")
            continue
        for t in range(T):
            if rows[t] != ref_routes[layer][t]:
                mismatches.append((layer, t, rows[t], ref_routes[layer][t], margins[layer][t]))
    min_margin = min((m for layer in moe_layers for m in margins[layer]), default=np.inf)
    print(f"routing: {len(moe_layers)} MoE layers x {T} positions, {len(mismatches)} mismatches "
          f"(smallest reference selection margin {min_margin:.3e})")
    for layer, t, got, want, margin in mismatches[:SHOW_MAX]:
        print(f"  layer {layer} pos {t}: engine {list(got)} reference {list(want)} "
              f"(reference margin {margin:.3e})")
    decided = [m for m in mismatches if not m[4] < routing_margin]
    if mismatches and len(decided) < len(mismatches):
        print(f"routing: {len(mismatches) - len(decided)} mismatches at reference margins below "
              f"--routing-margin {routing_margin:g} tolerated")
    if decided:
        failures.append(f"routing: {len(decided)} mismatches, first at layer "
                        f"{decided[0][0]} position {decided[0][1]}")

    # Greedy tokens: tokens[P+j] was chosen from row P+j-1.
    wrong, self_wrong, near_ties = [], [], []
    for row in range(prompt_len - 1, T - 1):
        fed = tokens[row + 1]
        r = ref[row]
        top1, top2 = np.argsort(-r, kind="stable")[:2]
        near_tie = r[top1] - r[top2] <= NEAR_TIE_REL * np.abs(r).max()
        if near_tie:
            near_ties.append((row, int(top1), int(top2), fed))
        if fed != int(np.argmax(cpp[row])):
            self_wrong.append((row, fed, int(np.argmax(cpp[row]))))
        if r[top1] - r[fed] > NEAR_TIE_REL * np.abs(r).max():
            wrong.append((row, fed, int(top1)))
    decode = T - prompt_len
    print(f"greedy: {decode} fed tokens, {len(wrong)} differ from the reference argmax, "
          f"{len(near_ties)} near-ties")
    for row, top1, top2, fed in near_ties[:SHOW_MAX]:
        print(f"  near-tie at row {row}: reference top two {top1}, {top2}; engine fed {fed}")
    for row, fed, want in wrong[:SHOW_MAX]:
        print(f"  row {row}: engine fed {fed}, reference argmax {want} "
              f"(reference logits {ref[row][fed]:.6g} vs {ref[row][want]:.6g})")
    for row, fed, own in self_wrong[:SHOW_MAX]:
        print(f"  row {row}: engine fed {fed} but its own logits' argmax is {own}")
    if wrong:
        failures.append(f"greedy: {len(wrong)} fed tokens are not the reference argmax "
                        f"(first after row {wrong[0][0]})")
    if self_wrong:
        failures.append(f"greedy: {len(self_wrong)} fed tokens are not the argmax of the "
                        f"engine's own logits (first after row {self_wrong[0][0]})")
    return failures


# ---------------------------------------------------------------------------
# 10. Command line
# ---------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Check tandem-rt eval against a float64 numpy DeepSeek-V2/V3 forward.")
    parser.add_argument("--model", required=True, help="HF checkpoint directory")
    parser.add_argument("--tandem-rt", required=True, help="path to the tandem-rt binary")
    parser.add_argument("--prompt-tokens", required=True, help="comma-separated token ids")
    parser.add_argument("--decode", type=int, default=32, help="greedy decode steps (default 32)")
    parser.add_argument("--tolerance", type=float, default=1e-4,
                        help="max per-position relative logit error (default 1e-4)")
    parser.add_argument("--routing-margin", type=float, default=0.0,
                        help="tolerate routing mismatches where the reference's selection margin "
                             "is below this (default 0: none); for engine paths that round "
                             "activations (bf16 inputs)")
    parser.add_argument("--engine-args", default="",
                        help="extra tandem-rt eval arguments, space-separated (e.g. a hybrid layout: "
                             "'--spawn-workers 2')")
    parser.add_argument("--mtp", action="store_true",
                        help="also check the checkpoint's MTP layer (tandem-rt eval --mtp-logits-out)")
    args = parser.parse_args(argv)       # exits 2 on malformed arguments
    try:
        args.prompt = [int(t) for t in args.prompt_tokens.split(",") if t.strip()]
    except ValueError:
        raise UsageError(f"--prompt-tokens is not a comma-separated list of integers: "
                         f"{args.prompt_tokens!r}")
    if not args.prompt:
        raise UsageError("--prompt-tokens is empty")
    if args.decode < 0:
        raise UsageError("--decode must be >= 0")
    if not args.tolerance > 0:
        raise UsageError("--tolerance must be > 0")
    if not args.routing_margin >= 0:
        raise UsageError("--routing-margin must be >= 0")
    if not (os.path.isfile(args.tandem_rt) and os.access(args.tandem_rt, os.X_OK)):
        raise UsageError(f"--tandem-rt {args.tandem_rt} is not an executable file")
    return args


def main(argv=None):
    try:
        args = parse_args(argv)
        cfg = load_config(args.model)
        ckpt = Checkpoint(args.model)
        if not all(0 <= t < cfg.vocab for t in args.prompt):
            raise UsageError(f"a prompt token is outside the vocabulary [0, {cfg.vocab})")
    except UsageError as e:
        print(f"usage error: {e}", file=sys.stderr)
        return 2

    print(f"model {args.model}: {cfg.arch}, {cfg.layers} layers ({len(cfg.moe_layers())} MoE), "
          f"vocab {cfg.vocab}; prompt {len(args.prompt)} + decode {args.decode} tokens")
    try:
        with tempfile.TemporaryDirectory(prefix="tandem-ref-") as workdir:
            start = time.monotonic()
            tokens, cpp, cpp_routes, cpp_mtp = run_engine(os.path.abspath(args.tandem_rt), args.model,
                                                          args.prompt, args.decode, cfg, workdir,
                                                          mtp=args.mtp, engine_args=args.engine_args.split())
            engine_s = time.monotonic() - start
    except EngineError as e:
        print(f"FAIL: {e}")
        return 1

    try:
        start = time.monotonic()
        hidden = []
        ref, ref_routes, margins = reference_forward(ckpt, cfg, tokens, hidden)
        ref_mtp = mtp_forward(ckpt, cfg, tokens, hidden[0]) if args.mtp else None
        ref_s = time.monotonic() - start
    except UsageError as e:
        print(f"usage error: {e}", file=sys.stderr)
        return 2
    print(f"engine {engine_s:.2f} s, reference {ref_s:.2f} s")

    failures = compare(cfg, len(args.prompt), tokens, cpp, ref, cpp_routes, ref_routes,
                       margins, args.tolerance, args.routing_margin)
    if args.mtp:
        err = relative_errors(cpp_mtp, ref_mtp)
        print(f"{'mtp':>12} {len(err):>6} {err.max():>12.3e} {np.median(err):>10.3e} {int(np.argmax(err)):>10}")
        bad = [i for i in range(len(err)) if not err[i] <= args.tolerance]
        if bad:
            failures.append(f"MTP logits: {len(bad)} of {len(err)} rows exceed {args.tolerance:g} "
                            f"(worst {err.max():.3e} at row {int(np.argmax(err))})")
    if failures:
        for message in failures:
            print(f"FAIL: {message}")
        return 1
    print(f"PASS (tolerance {args.tolerance:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
