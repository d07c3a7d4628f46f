#!/usr/bin/python3
"""An independent numpy forward of DeepSeek V4.1, checked against `tandem-rt eval`.

It follows the math of DeepSeek's reference (inference/model.py, engram.py and the
kernels' CPU ports) in the reference's own *prefill* formulation — the whole sequence at
once, with its masks, window index lists padded with -1, the sparse attention's blocks of
64 — while Tandem computes token by token from its caches, so the two formulations check
each other. Every quantize/dequantize round trip of the reference is here: act_quant
(E4M3, power-of-two scale per 32) before every FP8/FP4 product and on the window KV, the
compressed KV's FP4 with E4M3 scales per 16, the indexer's FP4 with power-of-two scales,
and bf16 roundings where the reference's tensors are bf16.

    /usr/bin/python3 tests/reference/v41_reference_forward.py --model DIR --tandem-rt BIN \\
        --prompt-tokens 1,2,3 --decode 32

Tandem's logits (the prompt in one forward, then greedy steps through its caches) are
compared with this forward over the final sequence; it prints the worst error relative to
each row's largest logit and the argmax agreement, and fails past the tolerances.

Exactness: every sum over an fp32 or bf16 tensor of the reference (a product's dot
products, the attention's block sums, the norms' means, the indexer's head sum) is taken
here in float64 and rounded once where the reference holds the value; the engine does the
same (and its FP8/FP4 block sums are exact), and transcendental functions are the rounded
float64 ones on both sides. So the summation order, which differs between any two
implementations (and between DeepSeek's own CPU and GPU kernels), cannot make them differ,
and the check is bit for bit: a difference would need a float64 sum within 2^-29 of an
fp32 rounding tie. Against DeepSeek's own code, whose fp32 sums round in their own order,
agreement is to an ulp of bf16 at a time instead (tests/reference/v41_official_golden.py).
The indexer's top-k and the router's top-k break ties toward the lower index here and in
the engine (the reference's topk leaves them unspecified).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

F32 = np.float32


# ---------------------------------------------------------------- number formats

def exp32(v):
    """fp32 e^v from the float64 one (the engine's rounding too: see the docstring)."""
    return np.exp(np.asarray(v, dtype=F32).astype(np.float64)).astype(F32)


def sigmoid32(v):
    return (F32(1) / (F32(1) + exp32(-np.asarray(v, dtype=F32)))).astype(F32)


def bf16(x):
    """float32 values rounded to bfloat16 (nearest, ties to even)."""
    b = np.asarray(x, dtype=F32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(F32)


def e4m3_values():
    out = np.zeros(256, dtype=F32)
    for code in range(256):
        s, e, m = code >> 7, (code >> 3) & 15, code & 7
        if e == 15 and m == 7:
            v = np.nan
        elif e == 0:
            v = m / 8.0 * 2.0 ** -6
        else:
            v = (1 + m / 8.0) * 2.0 ** (e - 7)
        out[code] = -v if s else v
    return out


E4M3 = e4m3_values()
E4M3_POS = E4M3[:127].astype(np.float64)  # codes 0..126, increasing
E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6], dtype=F32)
E2M1_POS = np.array([0, .5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)


def e8m0(bits):
    return np.ldexp(np.float64(1), bits.astype(np.int64) - 127).astype(F32)


def nearest_even(values, table):
    """Index of the nearest entry of an increasing table; ties to the even index."""
    a = np.abs(values.astype(np.float64))
    hi = np.clip(np.searchsorted(table, a, side="right"), 1, len(table) - 1)
    lo = hi - 1
    dlo, dhi = a - table[lo], table[hi] - a
    pick = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    return np.where(a >= table[-1], len(table) - 1, pick)


def round_e4m3(v):
    """E4M3 value nearest to v (saturating at 448)."""
    return (np.sign(v) * E4M3_POS[nearest_even(v, E4M3_POS)]).astype(F32)


def round_e2m1(v):
    return (np.sign(v) * E2M1_POS[nearest_even(v, E2M1_POS)]).astype(F32)


def pow2_scale(amax, inv_max):
    """2^ceil(log2(amax * inv_max)) from the bits of the fp32 product."""
    y = (amax.astype(F32) * F32(inv_max)).astype(F32)
    bits = y.view(np.uint32)
    exponent = (bits >> 23) & 0xFF
    up = (bits & 0x7FFFFF) != 0
    return ((exponent + up).astype(np.uint32) << 23).view(F32)


def act_quant(x):
    """E4M3 codes' values and power-of-two scales per 32 (the reference's act_quant)."""
    shape = x.shape
    v = x.reshape(-1, 32).astype(F32)
    s = pow2_scale(np.maximum(np.abs(v).max(axis=1), F32(1e-4)), 1.0 / 448.0)
    q = round_e4m3(np.clip(v / s[:, None], -448, 448))
    return q.reshape(shape), s.reshape(shape[:-1] + (shape[-1] // 32,))


def fp8_qdq(x):
    q, s = act_quant(x)
    return bf16(q * np.repeat(s, 32, axis=-1))


def fp4_qdq_pow2(x):
    v = x.reshape(-1, 32).astype(F32)
    s = pow2_scale(np.maximum(np.abs(v).max(axis=1), F32(6 * 2.0 ** -126)), 1.0 / 6.0)
    return bf16(round_e2m1(np.clip(v / s[:, None], -6, 6)) * s[:, None]).reshape(x.shape)


def fp4_qdq_e4m3(x):
    v = x.reshape(-1, 16).astype(F32)
    amax = np.maximum(np.abs(v).max(axis=1), F32(6 * 2.0 ** -9))
    s = round_e4m3((amax / F32(6.0)).astype(F32))
    return bf16(round_e2m1(np.clip(v / s[:, None], -6, 6)) * s[:, None]).reshape(x.shape)


# ---------------------------------------------------------------- checkpoint

class Checkpoint:
    def __init__(self, directory):
        with open(os.path.join(directory, "inference", "config.json")) as f:
            self.args = json.load(f)
        with open(os.path.join(directory, "engram.json")) as f:
            self.engram = json.load(f)
        path = os.path.join(directory, "model.safetensors")
        with open(path, "rb") as f:
            data = f.read()
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
        base = 8 + n
        self.t = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            a, b = info["data_offsets"]
            raw = np.frombuffer(data, dtype=np.uint8, count=b - a, offset=base + a)
            dt, shape = info["dtype"], info["shape"]
            if dt == "F32":
                v = raw.view(F32)
            elif dt == "BF16":
                v = (raw.view(np.uint16).astype(np.uint32) << 16).view(F32)
            else:  # F8_E4M3, F8_E8M0, I8: bytes
                v = raw
            self.t[name] = v.reshape(shape)

    def fp8(self, prefix):
        """(E4M3 values, scale per element) of an FP8 matrix, as float32."""
        w = E4M3[self.t[prefix + ".weight"]]
        s = e8m0(self.t[prefix + ".scale"])
        s = np.repeat(np.repeat(s, 32, axis=0)[: w.shape[0]], 32, axis=1)[:, : w.shape[1]]
        return w, s

    def fp4(self, prefix):
        b = self.t[prefix + ".weight"]
        w = np.empty((b.shape[0], b.shape[1] * 2), dtype=F32)
        w[:, 0::2] = E2M1[b & 15]
        w[:, 1::2] = E2M1[b >> 4]
        s = np.repeat(e8m0(self.t[prefix + ".scale"]), 32, axis=1)
        return w, s


def block_terms(x, weight):
    """act_quant(x) against an FP8/FP4 weight: each 32-wide block's exact partial rounded once
    to fp32 [n, out, blocks], the input's scales [n, blocks], the weight's [out, blocks]."""
    w, ws = weight
    q, qs = act_quant(x)
    n, k = q.shape
    blocks = k // 32
    qb = q.reshape(n, blocks, 32).astype(np.float64)
    wb = w.reshape(w.shape[0], blocks, 32).astype(np.float64)
    return np.einsum("nbk,obk->nob", qb, wb).astype(F32), qs, ws[:, ::32]


def gemm(x, weight):
    """The reference's fp8_gemm/fp4_gemm: the block terms times the input's then the weight's
    scale, summed block by block in fp32, bf16 out."""
    partial, qs, wscale = block_terms(x, weight)
    acc = np.zeros(partial.shape[:2], dtype=F32)
    for b in range(partial.shape[2]):
        acc = (acc + (partial[:, :, b] * qs[:, b][:, None]).astype(F32) * wscale[None, :, b]).astype(F32)
    return bf16(acc)


def gemm_exact(x, weight):
    """A routed expert's down projection as Tandem takes it: the same block terms times both
    scales summed in float64 — exact, so the column slices a layout spreads over ranks add up
    to it in any order — then rounded to fp32 and bf16. The reference adds the terms in fp32
    one by one; at most an fp32 ulp apart."""
    partial, qs, wscale = block_terms(x, weight)
    terms = partial.astype(np.float64) * qs.astype(np.float64)[:, None, :] * wscale.astype(np.float64)[None, :, :]
    return bf16(terms.sum(axis=2).astype(F32))


def linear_bf16(x, w):
    return bf16((x.astype(np.float64) @ w.astype(np.float64).T).astype(F32))


def linear_f32(x, w):
    return (x.astype(np.float64) @ w.astype(np.float64).T).astype(F32)


def rms_norm(x, w, eps):
    x = x.astype(F32)
    ms = np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True).astype(F32)
    r = F32(1) / np.sqrt(ms + F32(eps))
    return bf16(w * (x * r))


# ---------------------------------------------------------------- rotary embedding

def rope_table(a, layer, positions):
    rd = a["rope_head_dim"]
    ratio = a["compress_ratios"][layer]
    base = a["compress_rope_theta"] if ratio > 0 else a["rope_theta"]
    exponent = (np.arange(0, rd, 2, dtype=F32) / F32(rd)).astype(F32)
    power = (np.float64(F32(base)) ** exponent.astype(np.float64)).astype(F32)  # rounded from float64, as the engine
    freqs = (F32(1) / power).astype(F32)
    if ratio > 0 and a["original_seq_len"] > 0:
        orig, factor = a["original_seq_len"], a["rope_factor"]

        def corr(r):
            return rd * np.log(orig / (r * 2 * np.pi)) / (2 * np.log(base))
        low = max(int(np.floor(corr(a["beta_fast"]))), 0)
        high = min(int(np.ceil(corr(a["beta_slow"]))), rd - 1)
        ramp = np.clip((np.arange(rd // 2, dtype=F32) - F32(low)) / F32(max(high - low, 1e-3)), 0, 1).astype(F32)
        smooth = (F32(1) - ramp).astype(F32)
        freqs = (freqs / F32(factor) * (F32(1) - smooth) + freqs * smooth).astype(F32)
    angles = np.outer(np.asarray(positions, dtype=F32), freqs).astype(F32)
    return np.cos(angles.astype(np.float64)).astype(F32), np.sin(angles.astype(np.float64)).astype(F32)


def rope(x, table, inverse=False):
    """Rotates the last rope dims of x [..., S, (H,) D] with the table's rows [S, rd/2]."""
    cos, sin = table
    if inverse:
        sin = -sin
    rd = cos.shape[-1] * 2
    out = x.copy()
    tail = x[..., -rd:].astype(F32)
    x0, x1 = tail[..., 0::2], tail[..., 1::2]
    extra = x.ndim - 2  # head axes between the position and the dims
    c = cos.reshape(cos.shape[:1] + (1,) * extra + cos.shape[1:])
    s = sin.reshape(sin.shape[:1] + (1,) * extra + sin.shape[1:])
    out[..., -rd::2] = x0 * c - x1 * s
    out[..., -rd + 1::2] = x0 * s + x1 * c
    return bf16(out)


# ---------------------------------------------------------------- pieces

def hc_mixes(x, fn, scale, base, a):
    hc = a["hc_mult"]
    xf = x.reshape(x.shape[0], -1).astype(F32)
    rs = (F32(1) / np.sqrt(np.mean(xf.astype(np.float64) ** 2, axis=1).astype(F32) + F32(a["norm_eps"]))).astype(F32)
    m = (linear_f32(xf, fn) * rs[:, None]).astype(F32)
    eps = F32(a["hc_eps"])
    pre = sigmoid32(m[:, :hc] * scale[0] + base[:hc]) + eps
    post = F32(2) * sigmoid32(m[:, hc:2 * hc] * scale[1] + base[hc:2 * hc])
    c = (m[:, 2 * hc:] * scale[2] + base[2 * hc:]).reshape(-1, hc, hc).astype(F32)
    c = exp32(c - c.max(axis=2, keepdims=True))
    c = c / c.sum(axis=2, keepdims=True) + eps
    c = c / (c.sum(axis=1, keepdims=True) + eps)
    for _ in range(a["hc_sinkhorn_iters"] - 1):
        c = c / (c.sum(axis=2, keepdims=True) + eps)
        c = c / (c.sum(axis=1, keepdims=True) + eps)
    return pre.astype(F32), post.astype(F32), c.astype(F32)


def hc_pre(x, pre):
    """bf16(sum_j pre[j] * x[j]): fp32 products summed over the copies in order, as the
    reference's fp32 tensors do."""
    y = np.zeros((x.shape[0], x.shape[2]), dtype=F32)
    for j in range(x.shape[1]):
        y = (y + (pre[:, j:j + 1] * x[:, j, :]).astype(F32)).astype(F32)
    return bf16(y)


def hc_post(f, resid, post, comb):
    """Copy i: bf16(post[i] * f + sum_j comb[j][i] * resid[j]), in fp32 in that order."""
    hc = resid.shape[1]
    out = np.empty_like(resid)
    for i in range(hc):
        mixed = np.zeros_like(f)
        for j in range(hc):
            mixed = (mixed + (comb[:, j, i:i + 1] * resid[:, j, :]).astype(F32)).astype(F32)
        out[:, i, :] = bf16((post[:, i:i + 1] * f).astype(F32) + mixed)
    return out


def sparse_attn(q, kv, idx, scale, sink):
    """The reference's sparse_attn: blocks of 64 indices, online softmax with p rounded to
    bf16 against the running max, the sink in the denominator only. q [H, D], kv [T, D]."""
    heads, d = q.shape
    m = np.full(heads, F32(-1e30), dtype=F32)
    total = np.zeros(heads, dtype=F32)
    acc = np.zeros((heads, d), dtype=F32)
    for b in range(0, len(idx), 64):
        block = idx[b:b + 64]
        valid = block >= 0
        rows = np.where(valid[:, None], kv[np.maximum(block, 0)], 0).astype(F32)
        s = ((q.astype(np.float64) @ rows.T.astype(np.float64)).astype(F32) * F32(scale)).astype(F32)
        s = np.where(valid[None, :], s, -np.inf).astype(F32)
        m_new = np.maximum(m, s.max(axis=1))
        alpha = exp32(m - m_new)
        p = exp32(s - m_new[:, None])
        total = (total * alpha + p.astype(np.float64).sum(axis=1).astype(F32)).astype(F32)
        acc = (acc * alpha[:, None] + (bf16(p).astype(np.float64) @ rows.astype(np.float64)).astype(F32)).astype(F32)
        m = m_new
    total = (total + exp32(sink - m)).astype(F32)
    return bf16(acc / total[:, None])


def block_type(a, layer):
    ratio = a["compress_ratios"][layer]
    if ratio == 0:
        return "window"
    if layer == a["candidate_source_layer"]:
        return "candidate_source"
    if layer in a["kv_source_layers"]:
        return "kv_source"
    if layer in a["index_source_layers"]:
        return "candidate_index_source"
    return "consumer"


class Forward:
    def __init__(self, ckpt):
        self.c = ckpt
        self.a = ckpt.args
        self.shared = {}  # the latest source's compressed KV, index keys, top-k, candidates

    def engram_ids(self, tokens, j):
        layer = self.c.engram["layers"][j]
        a = self.a
        tmap = self.c.engram["token_map"]
        pad = self.c.engram["pad_id"]
        comp = [tmap[t] for t in tokens]
        heads, max_n = a["engram_n_heads"], a["engram_max_ngram_size"]
        out = []
        for p in range(len(tokens)):
            prods = []
            for k in range(max_n):
                t = comp[p - k] if p - k >= 0 else pad
                prods.append(t * layer["multipliers"][k])
            row, h = [], prods[0]
            for n in range(2, max_n + 1):
                h ^= prods[n - 1]
                for head in range(heads):
                    i = (n - 2) * heads + head
                    row.append(h % layer["primes"][i] + layer["offsets"][i])
            out.append(row)
        return np.array(out, dtype=np.int64)

    def engram(self, p, h, ids):
        a, t = self.a, self.c.t
        table = E4M3[t[p + "engram.embed.weight"]]
        scale = np.repeat(e8m0(t[p + "engram.embed.scale"]), 32, axis=1)
        e = bf16(table[ids] * scale[ids]).reshape(ids.shape[0], -1)
        kv = gemm(e, self.c.fp8(p + "engram.wkv"))
        hc, dim = a["hc_mult"], a["dim"]
        key = kv[:, :hc * dim].reshape(-1, hc, dim)
        value = kv[:, hc * dim:]
        wgt = (t[p + "engram.q_weight"] * t[p + "engram.k_weight"]).astype(F32)
        eps = F32(a["norm_eps"])
        ms = lambda v: np.mean(v.astype(np.float64) ** 2, axis=-1).astype(F32)
        rstd = (F32(1) / np.sqrt(ms(h) + eps)) * (F32(1) / np.sqrt(ms(key) + eps))
        dot = (np.sum((h * wgt[None] * key).astype(np.float64), axis=-1).astype(F32) * rstd * F32(dim ** -0.5)).astype(F32)
        gate = sigmoid32(np.sign(dot) * np.sqrt(np.maximum(np.abs(dot), F32(1e-6))))
        return bf16(h + gate[:, :, None] * value[:, None, :])

    def compressor(self, p, x, ratio):
        a, t = self.a, self.c.t
        S = x.shape[0]
        if ratio == 1:
            latent = linear_bf16(x, t[p + "attn.compressor.wkv.weight"])
        else:
            kv = linear_f32(x, t[p + "attn.compressor.wkv.weight"])
            score = linear_f32(x, t[p + "attn.compressor.wgate.weight"])
            g = S // ratio
            kv = kv[:g * ratio].reshape(g, ratio, -1)
            score = score[:g * ratio].reshape(g, ratio, -1)
            e = exp32(score - score.max(axis=1, keepdims=True))
            w = (e / e.sum(axis=1, keepdims=True)).astype(F32)
            latent = bf16((kv * w).sum(axis=1).astype(F32))
        return rms_norm(latent, t[p + "attn.compressor.norm.weight"], a["norm_eps"])

    def indexer(self, p, layer, x, qr, latent, ratio, table_at):
        a, t = self.a, self.c.t
        S = x.shape[0]
        ih, idim = a["index_n_heads"], a["index_head_dim"]
        if layer in a["kv_source_layers"] and latent is not None:
            k = linear_bf16(latent, t[p + "attn.indexer.wk.weight"])
            k = rms_norm(k, t[p + "attn.indexer.k_norm.weight"], a["norm_eps"])
            k = rope(k, table_at(np.arange(latent.shape[0]) * ratio))
            self.shared["index_k"] = fp4_qdq_pow2(k)
        q = gemm(qr, self.c.fp8(p + "attn.indexer.wq_b")).reshape(S, ih, idim)
        q = fp4_qdq_pow2(rope(q, table_at(np.arange(S))))
        w = bf16(linear_bf16(x, t[p + "attn.indexer.weights_proj.weight"]) * F32(idim ** -0.5 * ih ** -0.5))
        keys = self.shared["index_k"]
        T = S // ratio
        dots = bf16(np.einsum("shd,td->sht", q.astype(np.float64), keys[:T].astype(np.float64)).astype(F32))
        score = bf16(np.sum(bf16(np.maximum(dots, 0) * w[:, :, None]).astype(np.float64), axis=1).astype(F32))
        visible = (np.arange(S) + 1) // ratio
        score = np.where(np.arange(T)[None, :] < visible[:, None], score, -np.inf).astype(F32)
        # Rows whose picks a tie decided (equal scores across the cut): the reference's topk
        # leaves the order of ties unspecified, so there it may pick otherwise.
        tied = np.zeros(S, dtype=bool)
        if layer == a["candidate_source_layer"]:
            cand = np.zeros((S, T), dtype=bool)
            cand_tied = np.zeros(S, dtype=bool)
            bs, nb = a["candidate_block_size"], a["candidate_topk_blocks"]
            for s in range(S):
                v = visible[s]
                blocks = (v + bs - 1) // bs
                best = np.array([score[s, b * bs:min(v, (b + 1) * bs)].max() for b in range(blocks)], dtype=F32)
                if v > 0:
                    best[(v - 1) // bs] = np.inf
                ranked = sorted(range(blocks), key=lambda b: (-best[b], b))
                order = ranked[:min(nb, blocks)]
                cand_tied[s] = blocks > nb and best[ranked[nb - 1]] == best[ranked[nb]] and best[ranked[nb]] > -np.inf
                for b in order:
                    if best[b] > -np.inf:
                        cand[s, b * bs:min(v, (b + 1) * bs)] = True
            self.shared["candidates"] = cand
            self.shared["candidates_tied"] = cand_tied
        elif 0 <= a["candidate_source_layer"] < layer:
            score = np.where(self.shared["candidates"][:, :T], score, -np.inf).astype(F32)
            tied |= self.shared["candidates_tied"]
        k = a["index_topk"]
        topk = np.full((S, k), -1, dtype=np.int64)
        for s in range(S):
            v = visible[s]
            ranked = sorted(range(v), key=lambda i: (-score[s, i], i))
            order = ranked[:min(k, v)]
            tied[s] |= v > k and score[s, ranked[k - 1]] == score[s, ranked[k]]
            picks = sorted(order)
            topk[s, :len(picks)] = picks
        self.shared["topk"] = topk
        self.shared["tied"] = tied

    def attention(self, p, layer, x):
        a, t = self.a, self.c.t
        S = x.shape[0]
        heads, hd, W = a["n_heads"], a["head_dim"], a["window_size"]
        ratio = a["compress_ratios"][layer]
        table_at = lambda positions: rope_table(a, layer, positions)
        self.tied_rows = np.zeros(S, dtype=bool)
        qr = rms_norm(gemm(x, self.c.fp8(p + "attn.wq_a")), t[p + "attn.q_norm.weight"], a["norm_eps"])
        q = gemm(qr, self.c.fp8(p + "attn.wq_b")).reshape(S, heads, hd)
        q = rope(q, table_at(np.arange(S)))
        kv = rms_norm(gemm(x, self.c.fp8(p + "attn.wkv")), t[p + "attn.kv_norm.weight"], a["norm_eps"])
        kv = fp8_qdq(rope(kv, table_at(np.arange(S))))
        width = min(S, W)
        idx = np.stack([np.maximum(0, s - W + 1) + np.arange(width) for s in range(S)])
        idx = np.where(idx > np.arange(S)[:, None], -1, idx)
        all_kv = kv
        if ratio > 0:
            kind = block_type(a, layer)
            if kind in ("kv_source", "candidate_source"):
                latent = self.compressor(p, x, ratio) if S >= ratio else None
                if layer in a["index_source_layers"]:
                    self.indexer(p, layer, x, qr, latent, ratio, table_at)
                if latent is not None:
                    ck = rope(latent, table_at(np.arange(latent.shape[0]) * ratio))
                    self.shared["compress_kv"] = fp4_qdq_e4m3(ck)
                else:
                    self.shared["compress_kv"] = np.zeros((0, hd), dtype=F32)
            elif kind == "candidate_index_source":
                self.indexer(p, layer, x, qr, None, ratio, table_at)
            topk = self.shared["topk"]
            self.tied_rows = self.shared["tied"]
            ckv = self.shared["compress_kv"]
            all_kv = np.concatenate([kv, ckv], axis=0)
            idx = np.concatenate([idx, np.where(topk >= 0, topk + S, -1)], axis=1)
        sink = t[p + "attn.attn_sink"]
        o = np.stack([sparse_attn(q[s], all_kv, idx[s], F32(hd ** -0.5), sink) for s in range(S)])
        o = rope(o, table_at(np.arange(S)), inverse=True)
        groups, lora = a["o_groups"], a["o_lora_rank"]
        wa, was = self.c.fp8(p + "attn.wo_a")
        wo_a = bf16(wa * was).reshape(groups, lora, -1)
        og = o.reshape(S, groups, -1)
        mid = bf16(np.einsum("sgd,grd->sgr", og.astype(np.float64), wo_a.astype(np.float64)).astype(F32)).reshape(S, -1)
        return gemm(mid, self.c.fp8(p + "attn.wo_b"))

    def moe(self, p, x):
        a, t = self.a, self.c.t
        logits = (linear_f32(x, t[p + "ffn.gate.weight"]) / F32(a.get("gate_temp", 1.0))).astype(F32).astype(np.float64)
        # Routing in float64, the weights rounded once (the reference's fp32 is within an ulp).
        scores = np.sqrt(np.where(logits > 30, logits, np.log1p(np.exp(np.minimum(logits, 30)))))
        choice = scores + t[p + "ffn.gate.bias"].astype(np.float64)
        k = a["n_activated_experts"]
        # The experts' bf16 outputs summed in float64 (exact: the engine's order-free sum, which a
        # hybrid layout's ranks add up to; the reference's fp32 running sum of a few bf16 values
        # is exact too, short of magnitudes 2^16 apart), rounded once. A routed expert's down
        # projection sums its blocks exactly (gemm_exact), which lets tp split its columns.
        y = np.zeros((x.shape[0], a["dim"]), dtype=np.float64)
        routes = []
        for s in range(x.shape[0]):
            idx = sorted(range(len(choice[s])), key=lambda e: (-choice[s, e], e))[:k]
            w = scores[s, idx]
            if k > 1:
                w = w / (w.sum() + 1e-20)
            w = (w * a["route_scale"]).astype(F32)
            routes.append(dict(zip(idx, w)))
        limit = F32(a["swiglu_limit"])

        def expert(prefix, xs, weights, fp4, down=gemm):
            load = self.c.fp4 if fp4 else self.c.fp8
            g = gemm(xs, load(prefix + "w1"))
            u = gemm(xs, load(prefix + "w3"))
            if limit > 0:
                u = np.clip(u, -limit, limit)
                g = np.minimum(g, limit)
            h = ((g / (F32(1) + exp32(-g))).astype(F32) * u).astype(F32)
            if weights is not None:
                h = (weights[:, None] * h).astype(F32)
            return down(bf16(h), load(prefix + "w2"))

        for e in range(t[p + "ffn.gate.weight"].shape[0]):
            members = [s for s in range(x.shape[0]) if e in routes[s]]
            if not members:
                continue
            out = expert(f"{p}ffn.experts.{e}.", x[members], np.array([routes[s][e] for s in members], dtype=F32), True,
                         gemm_exact)
            y[members] = y[members] + out
        y = y + expert(p + "ffn.shared_experts.", x, None, False)
        return bf16(y.astype(F32))

    def run(self, tokens):
        a, t = self.a, self.c.t
        S, hc, dim = len(tokens), a["hc_mult"], a["dim"]
        h = np.repeat(t["embed.weight"][tokens][:, None, :], hc, axis=1).astype(F32)
        pre_in = np.zeros((S, hc), dtype=F32)
        pre_in[:, 0] = 1
        engram_ids = [self.engram_ids(tokens, j) for j in range(len(a.get("engram_layer_ids", [])))]
        for layer in range(a["n_layers"]):
            p = f"layers.{layer}."
            if layer in a.get("engram_layer_ids", []):
                h = self.engram(p, h, engram_ids[a["engram_layer_ids"].index(layer)])
            pre_a, post_a, comb_a = hc_mixes(h, t[p + "hc_attn_fn"], t[p + "hc_attn_scale"], t[p + "hc_attn_base"], a)
            x = rms_norm(hc_pre(h, pre_in), t[p + "attn_norm.weight"], a["norm_eps"])
            h = hc_post(self.attention(p, layer, x), h, post_a, comb_a)
            pre_f, post_f, comb_f = hc_mixes(h, t[p + "hc_ffn_fn"], t[p + "hc_ffn_scale"], t[p + "hc_ffn_base"], a)
            x = rms_norm(hc_pre(h, pre_a), t[p + "ffn_norm.weight"], a["norm_eps"])
            h = hc_post(self.moe(p, x), h, post_f, comb_f)
            pre_in = pre_f
        x = rms_norm(hc_pre(h, pre_in), t["norm.weight"], a["norm_eps"])
        return linear_f32(x, t["head.weight"])


def main():
    parser = argparse.ArgumentParser(description="Check tandem-rt eval against an independent numpy DeepSeek V4.1 forward.")
    parser.add_argument("--model", required=True)
    parser.add_argument("--tandem-rt", required=True)
    parser.add_argument("--prompt-tokens", required=True)
    parser.add_argument("--decode", type=int, default=0)
    parser.add_argument("--tolerance", type=float, default=0.0,
                        help="worst |difference| / the row's largest |logit| allowed")
    parser.add_argument("--min-argmax", type=float, default=1.0, help="least share of positions whose argmax agrees")
    args = parser.parse_args()
    prompt = [int(v) for v in args.prompt_tokens.split(",")]
    ckpt = Checkpoint(args.model)
    vocab = ckpt.args["vocab_size"]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.bin")
        run = subprocess.run([args.tandem_rt, "eval", "--model", args.model, "--tokens", args.prompt_tokens,
                              "--decode", str(args.decode), "--logits-out", out], capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"tandem-rt eval failed ({run.returncode}): {run.stderr}")
        result = json.loads(run.stdout.strip().splitlines()[-1])
        tandem = np.fromfile(out, dtype=F32).reshape(-1, vocab)
    tokens = result["tokens"]
    if tokens[:len(prompt)] != prompt:
        sys.exit("tandem-rt eval did not echo the prompt")
    reference = Forward(ckpt).run(tokens)
    # Tandem writes the logits of positions 0 … S−2 (the last decoded token is not fed back).
    n = tandem.shape[0]
    reference = reference[:n]
    scale = np.abs(reference).max(axis=1)
    rel = (np.abs(tandem - reference).max(axis=1) / scale)
    agree = float(np.mean(tandem.argmax(axis=1) == reference.argmax(axis=1)))
    report = {"positions": n, "prompt": len(prompt), "decode": args.decode, "worst_relative_error": float(rel.max()),
              "median_relative_error": float(np.median(rel)), "worst_prefill": float(rel[:len(prompt)].max()),
              "worst_decode": float(rel[len(prompt):].max()) if n > len(prompt) else 0.0, "argmax_agreement": agree,
              "exact_positions": int(np.sum(np.all(tandem == reference, axis=1)))}
    print(json.dumps(report))
    if rel.max() > args.tolerance or agree < args.min_argmax:
        sys.exit(f"V4.1 forward differs from the numpy reference beyond the tolerance ({args.tolerance}, argmax {args.min_argmax})")


if __name__ == "__main__":
    main()
