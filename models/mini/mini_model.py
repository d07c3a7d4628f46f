"""A DeepseekV3ForCausalLM in plain PyTorch, exactly the architecture tandem-rt runs.

Every piece follows tests/reference/reference_forward.py (HF modeling_deepseek.py
semantics), which the engine is checked against:

  * MLA: q_a_proj -> RMSNorm -> q_b_proj (or q_proj when q_lora_rank is 0);
    kv_a_proj_with_mqa -> [RMSNorm(latent) | k_pe]; kv_b_proj -> [k_nope | v] per head;
    decoupled RoPE on q_pe / k_pe with DeepSeek's YaRN frequencies and mscale;
    softmax scale (nope + rope)^-1/2 times mscale(factor, mscale_all_dim)^2.
  * first_k_dense_replace dense SwiGLU layers, then MoE layers: sigmoid scores,
    selection on score + e_score_correction_bias, group-limited (noaux_tc: a group's
    score is the sum of its top two), top-k, weights from the unbiased scores,
    normalised (norm_topk_prob) and times routed_scaling_factor, plus shared experts.
    The bias is not a parameter: the trainer moves it by the aux-loss-free rule.
  * One MTP layer (num_nextn_predict_layers = 1): row i reads embed(token i+1) and the
    main model's final normed hidden state at i, eh_proj([enorm(e); hnorm(h)]), one
    transformer block (MoE), shared_head.norm and the head (shared with lm_head),
    predicting token i+2.

Training runs on packed rows of several examples: attention is masked to each
example (block-diagonal causal) and positions restart at 0 in every example, so each
example is seen exactly as the engine sees a request. Matrix products run in bf16
(weights rounded as the exported checkpoint stores them, fp32 accumulation);
norms, softmax, routing and losses in fp32.
"""

import json
import math
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

BF16 = torch.bfloat16
# The dtype of matrix products: bf16 in training; check.py sets float64 (with
# torch.set_default_dtype(torch.float64) and model.double()) to compare the very function
# trained here with the engine's logits.
COMPUTE = {"dtype": BF16}


def set_compute_dtype(dtype):
    COMPUTE["dtype"] = dtype


def bf(w):
    """w rounded to bf16 as the checkpoint stores it, with the gradient of w (straight through)."""
    return w + (w.to(BF16).to(w.dtype) - w).detach()


def lin(x, weight):
    """x @ weight.T in bf16 (fp32 accumulation inside), returned in the default dtype."""
    dt = COMPUTE["dtype"]
    return F.linear(x.to(dt), weight.to(dt)).to(torch.get_default_dtype())


def lin16(x, weight):
    """x @ weight.T in bf16, returned as bf16 (inside an MLP, where the next op is bf16 anyway)."""
    dt = COMPUTE["dtype"]
    return F.linear(x.to(dt), weight.to(dt))


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * bf(self.weight)


class Mlp(nn.Module):
    """SwiGLU: down(silu(gate x) * up x)."""

    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Parameter(torch.empty(inter, hidden))
        self.up_proj = nn.Parameter(torch.empty(inter, hidden))
        self.down_proj = nn.Parameter(torch.empty(hidden, inter))

    def forward(self, x):
        """x [N, H] -> [N, H] in the compute dtype (bf16 in training)."""
        x = x.to(COMPUTE["dtype"])
        return lin16(F.silu(lin16(x, self.gate_proj)) * lin16(x, self.up_proj), self.down_proj)


# ---------------------------------------------------------------------------
# RoPE (DeepSeek YaRN), as reference_forward.rope_frequencies / apply_rope
# ---------------------------------------------------------------------------

def yarn_get_mscale(scale, mscale):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_frequencies(cfg):
    """(inv_freq [d/2] float64, mscale on cos/sin, attention softmax scale)."""
    d = cfg["qk_rope_head_dim"]
    theta = float(cfg.get("rope_theta", 10000.0))
    freq_extra = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    softmax_scale = (cfg["qk_nope_head_dim"] + d) ** -0.5
    rs = cfg.get("rope_scaling")
    if not rs:
        return freq_extra, 1.0, softmax_scale
    assert rs.get("type", rs.get("rope_type")) == "yarn"
    factor = float(rs["factor"])
    orig_max = float(rs.get("original_max_position_embeddings", 4096))
    beta_fast, beta_slow = float(rs.get("beta_fast", 32)), float(rs.get("beta_slow", 1))
    mscale, mscale_all_dim = float(rs.get("mscale", 1)), float(rs.get("mscale_all_dim", 0))

    def find_dim(num_rotations):
        return d * math.log(orig_max / (num_rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(find_dim(beta_fast)), 0)
    high = min(math.ceil(find_dim(beta_slow)), d - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(d // 2, dtype=torch.float64) - low) / (high - low), 0.0, 1.0)
    mask = 1.0 - ramp
    inv_freq = freq_extra / factor * (1.0 - mask) + freq_extra * mask
    mscale_rope = yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim)
    if mscale_all_dim:
        softmax_scale *= yarn_get_mscale(factor, mscale_all_dim) ** 2
    return inv_freq, mscale_rope, softmax_scale


def rope_tables(positions, inv_freq, mscale):
    """cos, sin [B, T, d/2] in the default dtype for integer positions [B, T]."""
    angles = positions.to(torch.float64)[..., None] * inv_freq
    dt = torch.get_default_dtype()
    return (torch.cos(angles) * mscale).to(dt), (torch.sin(angles) * mscale).to(dt)


def apply_rope(x, cos, sin):
    """x [B, T, ..., d]: pair (x[2i], x[2i+1]) turns by angle i; results at i and i + d/2
    (HF's layout; q and k alike, so every q.k is the engine's)."""
    extra = x.dim() - cos.dim()
    cos = cos.reshape(cos.shape[:2] + (1,) * extra + cos.shape[2:])
    sin = sin.reshape(sin.shape[:2] + (1,) * extra + sin.shape[2:])
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.cat([even * cos - odd * sin, odd * cos + even * sin], dim=-1)


# ---------------------------------------------------------------------------
# Attention and MoE
# ---------------------------------------------------------------------------

class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.heads = cfg["num_attention_heads"]
        self.nope, self.rope, self.v_dim = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        self.kv_lora = cfg["kv_lora_rank"]
        self.q_lora = cfg.get("q_lora_rank") or 0
        q_out = self.heads * (self.nope + self.rope)
        if self.q_lora:
            self.q_a_proj = nn.Parameter(torch.empty(self.q_lora, h))
            self.q_a_layernorm = RMSNorm(self.q_lora, eps)
            self.q_b_proj = nn.Parameter(torch.empty(q_out, self.q_lora))
        else:
            self.q_proj = nn.Parameter(torch.empty(q_out, h))
        self.kv_a_proj_with_mqa = nn.Parameter(torch.empty(self.kv_lora + self.rope, h))
        self.kv_a_layernorm = RMSNorm(self.kv_lora, eps)
        self.kv_b_proj = nn.Parameter(torch.empty(self.heads * (self.nope + self.v_dim), self.kv_lora))
        self.o_proj = nn.Parameter(torch.empty(h, self.heads * self.v_dim))

    def forward(self, x, cos, sin, mask, softmax_scale):
        """x [B, T, H]; mask [B, T, T] (compute dtype): 0 where a position may attend, -inf elsewhere."""
        B, T, _ = x.shape
        if self.q_lora:
            q = lin(self.q_a_layernorm(lin(x, self.q_a_proj)), self.q_b_proj)
        else:
            q = lin(x, self.q_proj)
        q = q.view(B, T, self.heads, self.nope + self.rope)
        q_nope, q_pe = torch.split(q, [self.nope, self.rope], dim=-1)
        latent, k_pe = torch.split(lin(x, self.kv_a_proj_with_mqa), [self.kv_lora, self.rope], dim=-1)
        c = self.kv_a_layernorm(latent)
        kvb = lin(c, self.kv_b_proj).view(B, T, self.heads, self.nope + self.v_dim)
        k_nope, v = torch.split(kvb, [self.nope, self.v_dim], dim=-1)
        q_pe = apply_rope(q_pe, cos, sin)
        k_pe = apply_rope(k_pe, cos, sin)
        # One product over [nope | rope] (k_pe is shared by the heads), the softmax scale
        # folded into q. Scores, softmax and probabilities stay in the compute dtype, as
        # bf16 autocast would round them (the softmax accumulates in fp32 inside).
        dt = COMPUTE["dtype"]
        qf = (torch.cat([q_nope, q_pe], dim=-1) * softmax_scale).transpose(1, 2).to(dt)       # [B, h, T, d]
        kf = torch.cat([k_nope, k_pe[:, :, None, :].expand(B, T, self.heads, self.rope)], dim=-1).transpose(1, 2).to(dt)
        probs = torch.softmax(torch.matmul(qf, kf.transpose(-1, -2)) + mask[:, None], dim=-1)
        out = torch.matmul(probs, v.transpose(1, 2).to(dt)).to(torch.get_default_dtype())   # [B, h, T, v]
        return lin(out.transpose(1, 2).reshape(B, T, self.heads * self.v_dim), self.o_proj)


class Moe(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden_size"]
        self.n_routed = cfg["n_routed_experts"]
        self.top_k = cfg["num_experts_per_tok"]
        self.n_group = cfg.get("n_group", 1)
        self.topk_group = cfg.get("topk_group", 1)
        self.scaling = float(cfg.get("routed_scaling_factor", 2.5))
        self.norm_topk = bool(cfg.get("norm_topk_prob", True))
        assert cfg.get("topk_method", "noaux_tc") == "noaux_tc" and cfg.get("scoring_func", "sigmoid") == "sigmoid"
        self.gate = nn.Parameter(torch.empty(self.n_routed, h))
        # Used only to select experts; moved by the trainer (aux-loss-free balancing).
        self.register_buffer("e_score_correction_bias", torch.zeros(self.n_routed))
        self.experts = nn.ModuleList(Mlp(h, cfg["moe_intermediate_size"]) for _ in range(self.n_routed))
        shared = cfg.get("n_shared_experts", 0)
        self.shared_experts = Mlp(h, cfg["moe_intermediate_size"] * shared) if shared else None
        self.last_counts = None     # tokens per expert (valid rows) of the latest forward
        self.last_balance = None    # DeepSeek-V3's sequence-wise balance term of the latest forward
        self.last_ids = None        # the experts chosen for each row of the latest forward

    def route(self, x):
        """x [N, H] -> (expert ids [N, k], weights [N, k] with grad, scores [N, E])."""
        scores = torch.sigmoid(lin(x, self.gate))
        choice = scores.detach() + self.e_score_correction_bias
        N = x.shape[0]
        if self.n_group > 1:
            groups = choice.view(N, self.n_group, -1)
            group_score = groups.topk(2, dim=-1).values.sum(-1)                     # [N, G]
            kept = group_score.topk(self.topk_group, dim=-1).indices
            keep = torch.zeros_like(group_score, dtype=torch.bool).scatter_(1, kept, True)
            keep = keep[:, :, None].expand_as(groups).reshape(N, -1)
            choice = choice.masked_fill(~keep, float("-inf"))
        ids = choice.topk(self.top_k, dim=-1).indices
        weights = scores.gather(1, ids)
        if self.top_k > 1 and self.norm_topk:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        return ids, weights * self.scaling, scores

    def forward(self, x, valid, row_of):
        """x [N, H] (the rows of a batch, flattened); valid [N] bool: rows that count for
        balancing; row_of [N]: the packed row each belongs to (the balance loss's sequence)."""
        N, H = x.shape
        ids, weights, scores = self.route(x)
        flat = ids.reshape(-1)
        order = torch.argsort(flat, stable=True)
        token = order // self.top_k
        counts = torch.bincount(flat, minlength=self.n_routed)
        xb = x.to(COMPUTE["dtype"])
        xs = xb[token]
        ws = weights.reshape(-1)[order]
        # torch.split, not slices: a slice's backward writes a zero tensor of the whole input.
        parts = torch.split(xs, counts.tolist())
        ys = torch.cat([self.experts[e](part) for e, part in enumerate(parts) if part.shape[0]]).to(x.dtype) * ws[:, None]
        out = torch.zeros(N, H).index_add_(0, token, ys)
        if self.shared_experts is not None:
            out = out + self.shared_experts(xb).to(x.dtype)

        self.last_ids = ids.detach()
        with torch.no_grad():
            picked = torch.zeros(N, self.n_routed).scatter_(1, ids, 1.0)
            self.last_counts = (picked * valid[:, None]).sum(0)
        # Sequence-wise balance (DeepSeek-V3 eq. 17-20): alpha * sum_i f_i P_i per sequence.
        v = valid.to(scores.dtype)
        rows = int(row_of.max()) + 1
        per_row = torch.zeros(rows).index_add_(0, row_of, v).clamp(min=1.0)
        f = torch.zeros(rows, self.n_routed).index_add_(0, row_of, picked * v[:, None])
        f = f * (self.n_routed / self.top_k) / per_row[:, None]
        s = scores / scores.sum(-1, keepdim=True)
        P = torch.zeros(rows, self.n_routed).index_add_(0, row_of, s * v[:, None]) / per_row[:, None]
        self.last_balance = (f.detach() * P).sum(-1).mean()
        return out


class Block(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        h, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.input_layernorm = RMSNorm(h, eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(h, eps)
        self.is_moe = cfg.get("n_routed_experts", 0) > 0 and layer >= cfg.get("first_k_dense_replace", 0) \
            and layer % cfg.get("moe_layer_freq", 1) == 0
        self.mlp = Moe(cfg) if self.is_moe else Mlp(h, cfg["intermediate_size"])

    def forward(self, x, cos, sin, mask, scale, valid, row_of):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, scale)
        n = self.post_attention_layernorm(x)
        B, T, H = n.shape
        out = self.mlp(n.reshape(B * T, H), valid, row_of) if self.is_moe else self.mlp(n.reshape(B * T, H)).to(x.dtype)
        return x + out.view(B, T, H)


class MtpLayer(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        h, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.enorm = RMSNorm(h, eps)
        self.hnorm = RMSNorm(h, eps)
        self.eh_proj = nn.Parameter(torch.empty(h, 2 * h))
        self.block = Block(cfg, layer)
        self.shared_head_norm = RMSNorm(h, eps)
        assert self.block.is_moe, "the MTP block is an MoE block, as the engine's LoadMtp expects"


def additive(allowed):
    """bool mask -> 0 / -inf in the compute dtype, added to attention scores."""
    return torch.zeros(allowed.shape, dtype=COMPUTE["dtype"]).masked_fill_(~allowed, float("-inf"))


class DeepseekV3(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        h, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.embed_tokens = nn.Parameter(torch.empty(cfg["vocab_size"], h))
        self.layers = nn.ModuleList(Block(cfg, l) for l in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(h, eps)
        self.lm_head = nn.Parameter(torch.empty(cfg["vocab_size"], h))
        assert cfg.get("num_nextn_predict_layers", 0) in (0, 1)
        self.mtp = MtpLayer(cfg, cfg["num_hidden_layers"]) if cfg.get("num_nextn_predict_layers", 0) else None
        self.inv_freq, self.mscale_rope, self.softmax_scale = rope_frequencies(cfg)

    def moe_layers(self):
        mods = [b.mlp for b in self.layers if b.is_moe]
        if self.mtp is not None:
            mods.append(self.mtp.block.mlp)
        return mods

    def init_weights(self, generator, std=0.02):
        """Normal(0, std) matrices, residual outputs (o_proj, down_proj) scaled by
        1/sqrt(2 * blocks); norms 1; correction biases 0."""
        blocks = len(self.layers) + (1 if self.mtp is not None else 0)
        for name, p in self.named_parameters():
            if p.dim() == 1:
                nn.init.ones_(p)
                continue
            s = std / math.sqrt(2 * blocks) if name.endswith(("o_proj", "down_proj")) else std
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=generator) * s)
        for m in self.moe_layers():
            m.e_score_correction_bias.zero_()

    def forward(self, tokens, positions, doc):
        """tokens, positions, doc [B, T] int64 (doc: the example id of each position in its
        row, -1 for padding). Returns (main logits [B, T, V], MTP logits [B, T-1, V] or None)."""
        B, T = tokens.shape
        same = (doc[:, :, None] == doc[:, None, :]) & (doc[:, :, None] >= 0)
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        mask = additive((same & causal) | torch.eye(T, dtype=torch.bool))   # padding sees itself only
        cos, sin = rope_tables(positions, self.inv_freq, self.mscale_rope)
        valid = (doc >= 0).reshape(-1)
        row_of = torch.arange(B)[:, None].expand(B, T).reshape(-1)
        embed = bf(self.embed_tokens)
        x = F.embedding(tokens, embed)
        for block in self.layers:
            x = block(x, cos, sin, mask, self.softmax_scale, valid, row_of)
        hidden = self.norm(x)
        logits = lin(hidden, self.lm_head)
        if self.mtp is None:
            return logits, None
        m = self.mtp
        e = m.enorm(F.embedding(tokens[:, 1:], embed))
        hh = m.hnorm(hidden[:, :-1])
        y = lin(torch.cat([e, hh], dim=-1), m.eh_proj)
        # Row i of the MTP sequence sits at position i (the engine's MTP drafter and the
        # reference give it the position of the token it reads minus one).
        mvalid = ((doc[:, :-1] >= 0) & (doc[:, :-1] == doc[:, 1:]))
        mdoc = torch.where(mvalid, doc[:, :-1], torch.full_like(doc[:, :-1], -1))
        msame = (mdoc[:, :, None] == mdoc[:, None, :]) & (mdoc[:, :, None] >= 0)
        mmask = additive((msame & causal[:-1, :-1]) | torch.eye(T - 1, dtype=torch.bool))
        y = m.block(y, cos[:, :-1], sin[:, :-1], mmask, self.softmax_scale, mvalid.reshape(-1),
                    torch.arange(B)[:, None].expand(B, T - 1).reshape(-1))
        return logits, lin(m.shared_head_norm(y), self.lm_head)

    # -----------------------------------------------------------------------
    # Export: HF names, as runtime/model/synthetic_checkpoint.cpp writes them
    # -----------------------------------------------------------------------

    def hf_tensors(self):
        """[(name, tensor)] in HF DeepSeek-V3 names. Weights go out as bf16, the router's
        correction bias as F32 (as DeepSeek-V3 ships it)."""
        out = [("model.embed_tokens.weight", self.embed_tokens)]

        def mlp(prefix, m):
            out.extend([(prefix + ".gate_proj.weight", m.gate_proj), (prefix + ".up_proj.weight", m.up_proj),
                        (prefix + ".down_proj.weight", m.down_proj)])

        def block(l, b):
            p = f"model.layers.{l}"
            a = b.self_attn
            out.extend([(p + ".input_layernorm.weight", b.input_layernorm.weight),
                        (p + ".post_attention_layernorm.weight", b.post_attention_layernorm.weight)])
            if a.q_lora:
                out.extend([(p + ".self_attn.q_a_proj.weight", a.q_a_proj),
                            (p + ".self_attn.q_a_layernorm.weight", a.q_a_layernorm.weight),
                            (p + ".self_attn.q_b_proj.weight", a.q_b_proj)])
            else:
                out.append((p + ".self_attn.q_proj.weight", a.q_proj))
            out.extend([(p + ".self_attn.kv_a_proj_with_mqa.weight", a.kv_a_proj_with_mqa),
                        (p + ".self_attn.kv_a_layernorm.weight", a.kv_a_layernorm.weight),
                        (p + ".self_attn.kv_b_proj.weight", a.kv_b_proj),
                        (p + ".self_attn.o_proj.weight", a.o_proj)])
            if b.is_moe:
                out.append((p + ".mlp.gate.weight", b.mlp.gate))
                out.append((p + ".mlp.gate.e_score_correction_bias", b.mlp.e_score_correction_bias))
                for e, ex in enumerate(b.mlp.experts):
                    mlp(f"{p}.mlp.experts.{e}", ex)
                if b.mlp.shared_experts is not None:
                    mlp(p + ".mlp.shared_experts", b.mlp.shared_experts)
            else:
                mlp(p + ".mlp", b.mlp)

        for l, b in enumerate(self.layers):
            block(l, b)
        out.extend([("model.norm.weight", self.norm.weight), ("lm_head.weight", self.lm_head)])
        if self.mtp is not None:
            l = len(self.layers)
            p = f"model.layers.{l}"
            # No MTP embed_tokens: engine and reference fall back to the model's (shared in
            # training, as in DeepSeek-V3). The head is shared too, but the reference reads
            # shared_head.head.weight, so it is written as a copy.
            out.extend([(p + ".enorm.weight", self.mtp.enorm.weight), (p + ".hnorm.weight", self.mtp.hnorm.weight),
                        (p + ".eh_proj.weight", self.mtp.eh_proj),
                        (p + ".shared_head.norm.weight", self.mtp.shared_head_norm.weight),
                        (p + ".shared_head.head.weight", self.lm_head)])
            block(l, self.mtp.block)
        return out


def write_safetensors(path, tensors, metadata):
    """tensors: [(name, torch tensor)]; names ending in e_score_correction_bias are F32,
    the rest BF16. Laid out as HF's writer does (by alignment, then name), so the tensors
    tile the data section with no gaps."""
    items = []
    for name, t in tensors:
        t = t.detach().contiguous()
        if name.endswith("e_score_correction_bias"):
            items.append((name, "F32", list(t.shape), t.float().numpy().astype("<f4").tobytes()))
        else:
            items.append((name, "BF16", list(t.shape), t.to(BF16).view(torch.int16).numpy().astype("<i2").tobytes()))
    items.sort(key=lambda it: (-(4 if it[1] == "F32" else 2), it[0]))
    header, offset = {"__metadata__": metadata}, 0
    for name, dtype, shape, raw in items:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, raw in items:
            f.write(raw)
    return offset


def read_safetensors(path):
    """{name: float32 tensor} of a BF16/F32 safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[begin:end])
        if info["dtype"] == "BF16":
            t = torch.frombuffer(raw, dtype=torch.int16).view(BF16).float()
        elif info["dtype"] == "F32":
            t = torch.frombuffer(raw, dtype=torch.float32).clone()
        else:
            raise ValueError(f"{path}: {name} has dtype {info['dtype']}")
        out[name] = t.reshape(info["shape"])
    return out


def load_checkpoint(model_dir):
    """A DeepseekV3 with the weights of an exported checkpoint (config.json + model.safetensors)."""
    cfg = json.load(open(f"{model_dir}/config.json"))
    model = DeepseekV3(cfg)
    tensors = read_safetensors(f"{model_dir}/model.safetensors")
    names = set()
    with torch.no_grad():
        for name, target in model.hf_tensors():
            source = tensors[name]
            if name.endswith("shared_head.head.weight"):   # a copy of lm_head (shared in training)
                if not torch.equal(source, tensors["lm_head.weight"]):
                    raise ValueError(f"{name} differs from lm_head.weight: this recipe ties them")
                continue
            target.copy_(source)
            names.add(name)
    extra = set(tensors) - names - {n for n in tensors if n.endswith("shared_head.head.weight")}
    if extra:
        raise ValueError(f"{model_dir}: tensors this model does not have: {sorted(extra)[:5]}")
    return model
