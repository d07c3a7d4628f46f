#!/usr/bin/python3
"""Writes a small random DeepSeek-family HF checkpoint in one of several variants,
so the reference check (reference_forward.py) covers what the synthetic presets do
not: V2 semantics (softmax, greedy and group-limited routing, plain q_proj, MoE every
other layer, F16 norms), F8_E4M3 weights with 128x128 block scales, sharded files
with an index, sqrtsoftplus scoring, tied embeddings. numpy only.

    make_variant_checkpoint.py OUT_DIR --variant v3|v3fp8|v2|v2glg|v3plain|v3tied [--seed N]
"""
import argparse, json, math, os
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--variant", default="v3", choices=["v3", "v3fp8", "v2", "v2glg", "v3plain", "v3tied"])
p.add_argument("--seed", type=int, default=0)
a = p.parse_args()
rng = np.random.default_rng(a.seed)
os.makedirs(a.out, exist_ok=True)

H, L, V = 128, 4, 300
heads, nope, rope, vdim = 4, 16, 8, 16
q_lora, kv_lora = 64, 32
E, K, moe_inter, inter = 16, 4, 32, 200
cfg = dict(architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
           hidden_size=H, num_hidden_layers=L, first_k_dense_replace=1, moe_layer_freq=1,
           intermediate_size=inter, moe_intermediate_size=moe_inter, n_routed_experts=E,
           n_shared_experts=1, num_experts_per_tok=K, n_group=4, topk_group=2,
           topk_method="noaux_tc", scoring_func="sigmoid", routed_scaling_factor=2.5,
           norm_topk_prob=True, q_lora_rank=q_lora, kv_lora_rank=kv_lora,
           qk_nope_head_dim=nope, qk_rope_head_dim=rope, v_head_dim=vdim,
           num_attention_heads=heads, num_key_value_heads=heads, rope_theta=10000.0,
           rope_scaling=dict(type="yarn", factor=4.0, original_max_position_embeddings=512,
                             beta_fast=32, beta_slow=1, mscale=1.0, mscale_all_dim=1.0),
           rms_norm_eps=1e-6, vocab_size=V, tie_word_embeddings=False,
           num_nextn_predict_layers=1, max_position_embeddings=2048)
if a.variant in ("v2", "v2glg"):
    cfg.update(architectures=["DeepseekV2ForCausalLM"], model_type="deepseek_v2",
               q_lora_rank=None, topk_method="greedy", scoring_func="softmax",
               norm_topk_prob=False, routed_scaling_factor=1.5, n_group=1, topk_group=1,
               rope_scaling=None, num_nextn_predict_layers=0, n_shared_experts=2,
               first_k_dense_replace=1, moe_layer_freq=2)
if a.variant == "v2glg":
    cfg.update(topk_method="group_limited_greedy", n_group=4, topk_group=2, norm_topk_prob=True,
               rope_scaling=dict(type="yarn", factor=8.0, original_max_position_embeddings=256,
                                 beta_fast=32, beta_slow=1, mscale=0.707, mscale_all_dim=0.707))
if a.variant == "v3plain":
    cfg.update(rope_scaling=None, scoring_func="sqrtsoftplus", first_k_dense_replace=0)
if a.variant == "v3tied":
    cfg.update(tie_word_embeddings=True, q_lora_rank=0)

T = {}
def lin(name, out, inn):
    T[name] = rng.standard_normal((out, inn)) / math.sqrt(inn)
def norm(name, n):
    T[name] = 1.0 + 0.1 * rng.standard_normal(n)

T["model.embed_tokens.weight"] = rng.standard_normal((V, H))
nl = L + cfg["num_nextn_predict_layers"]
for l in range(nl):
    p = f"model.layers.{l}."
    norm(p + "input_layernorm.weight", H); norm(p + "post_attention_layernorm.weight", H)
    s = p + "self_attn."
    if cfg["q_lora_rank"]:
        lin(s + "q_a_proj.weight", q_lora, H); norm(s + "q_a_layernorm.weight", q_lora)
        lin(s + "q_b_proj.weight", heads * (nope + rope), q_lora)
    else:
        lin(s + "q_proj.weight", heads * (nope + rope), H)
    lin(s + "kv_a_proj_with_mqa.weight", kv_lora + rope, H)
    norm(s + "kv_a_layernorm.weight", kv_lora)
    lin(s + "kv_b_proj.weight", heads * (nope + vdim), kv_lora)
    lin(s + "o_proj.weight", H, heads * vdim)
    m = p + "mlp."
    moe = l >= cfg["first_k_dense_replace"] and l % cfg["moe_layer_freq"] == 0
    if moe:
        T[m + "gate.weight"] = rng.standard_normal((E, H)) / math.sqrt(H) * 3
        if cfg["topk_method"] == "noaux_tc":
            T[m + "gate.e_score_correction_bias"] = 0.1 * rng.standard_normal(E)
        for e in range(E):
            lin(f"{m}experts.{e}.gate_proj.weight", moe_inter, H)
            lin(f"{m}experts.{e}.up_proj.weight", moe_inter, H)
            lin(f"{m}experts.{e}.down_proj.weight", H, moe_inter)
        si = moe_inter * cfg["n_shared_experts"]
        lin(m + "shared_experts.gate_proj.weight", si, H)
        lin(m + "shared_experts.up_proj.weight", si, H)
        lin(m + "shared_experts.down_proj.weight", H, si)
    else:
        lin(m + "gate_proj.weight", inter, H); lin(m + "up_proj.weight", inter, H)
        lin(m + "down_proj.weight", H, inter)
    if l >= L:  # MTP junk that must be ignored
        T[p + "eh_proj.weight"] = rng.standard_normal((H, 2 * H))
norm("model.norm.weight", H)
if not cfg["tie_word_embeddings"]:
    lin("lm_head.weight", V, H)

# --- encoders
def bf16(x):
    f = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((f + 0x7FFF + ((f >> 16) & 1)) >> 16).astype(np.uint16)
    return r.tobytes()

def fp8_table():
    t = np.empty(256)
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0; e = (b >> 3) & 15; mm = b & 7
        t[b] = np.nan if (e == 15 and mm == 7) else (s * mm / 8 * 2.0**-6 if e == 0 else s * (1 + mm / 8) * 2.0**(e - 7))
    return t
FT = fp8_table()
pos_codes = np.array([b for b in range(128) if not np.isnan(FT[b])])
pos_vals = FT[pos_codes]
def fp8(x):
    sign = (x < 0).astype(np.uint8) * 0x80
    ax = np.minimum(np.abs(x), 448.0)
    idx = np.searchsorted(pos_vals, ax)
    idx = np.clip(idx, 1, len(pos_vals) - 1)
    lo, hi = pos_vals[idx - 1], pos_vals[idx]
    pick = np.where(ax - lo <= hi - ax, idx - 1, idx)
    return (pos_codes[pick].astype(np.uint8) | sign).astype(np.uint8)

tensors = {}  # name -> (dtype, shape, bytes)
for name, x in T.items():
    is_linear = x.ndim == 2 and name.startswith("model.layers.") and ".gate.weight" not in name
    if a.variant == "v3fp8" and is_linear:
        r, c = x.shape
        br, bc = -(-r // 128), -(-c // 128)
        s = np.zeros((br, bc))
        for i in range(br):
            for j in range(bc):
                blk = x[i*128:(i+1)*128, j*128:(j+1)*128]
                s[i, j] = np.abs(blk).max() / 448.0 * (1 + i + 2 * j)  # different scales per block
        full = np.repeat(np.repeat(s, 128, 0), 128, 1)[:r, :c]
        q = fp8(x / full)
        tensors[name] = ("F8_E4M3", x.shape, q.tobytes())
        tensors[name + "_scale_inv"] = ("F32", s.shape, s.astype("<f4").tobytes())
    elif name.endswith("e_score_correction_bias"):
        tensors[name] = ("F32", x.shape, x.astype("<f4").tobytes())
    elif a.variant == "v2" and "layernorm" in name:
        tensors[name] = ("F16", x.shape, x.astype("<f2").tobytes())
    else:
        tensors[name] = ("BF16", x.shape, bf16(x))

def write(path, names):
    header, off, blobs = {}, 0, []
    for n in names:
        dt, sh, b = tensors[n]
        header[n] = {"dtype": dt, "shape": list(sh), "data_offsets": [off, off + len(b)]}
        off += len(b); blobs.append(b)
    header["__metadata__"] = {"format": "pt"}
    hj = json.dumps(header).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(len(hj).to_bytes(8, "little")); f.write(hj)
        for b in blobs: f.write(b)

names = list(tensors)
rng.shuffle(names)
if a.variant in ("v3", "v3fp8", "v2glg"):   # sharded
    shards = [names[0::3], names[1::3], names[2::3]]
    wm = {}
    for i, sh in enumerate(shards):
        fn = f"model-{i+1:05d}-of-00003.safetensors"
        write(os.path.join(a.out, fn), sh)
        for n in sh: wm[n] = fn
    json.dump({"metadata": {}, "weight_map": wm}, open(os.path.join(a.out, "model.safetensors.index.json"), "w"), indent=1)
else:
    write(os.path.join(a.out, "model.safetensors"), names)
json.dump(cfg, open(os.path.join(a.out, "config.json"), "w"), indent=1)
print("wrote", a.out, a.variant, len(tensors), "tensors")
