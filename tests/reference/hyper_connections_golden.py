#!/usr/bin/python3
"""Golden values for runtime/engine/hyper_connections: DeepSeek V4.1's hyper-connection
mixes (the stream's RMS, the 24 mixes, pre/post sigmoids, the row softmax and Sinkhorn
normalisation of comb), the collapse of the copies before a sublayer and their update after
it — computed independently in float64 with numpy (Debian's python3-numpy), following the
formulas of DeepSeek's reference (inference/model.py hc_mixes/hc_pre/hc_post and
kernel.py hc_split_sinkhorn).

    /usr/bin/python3 tests/reference/hyper_connections_golden.py > tests/reference/golden/hyper_connections.json
    /usr/bin/python3 tests/reference/hyper_connections_golden.py --check tests/reference/golden/hyper_connections.json
"""
import json

import numpy as np

from golden_output import emit

HC, DIM, NORM_EPS, HC_EPS = 4, 64, 1e-20, 1e-6
# The reference's 20 Sinkhorn iterations, and few enough that each one shows.
ITERS = [20, 20, 20, 1, 2, 3]


def bf16(x):
    """float32 values rounded to bfloat16 (nearest, ties to even), by clearing bits."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(np.float32)


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def mixes(x, fn, scale, base, iters):
    xf = x.reshape(-1).astype(np.float64)
    rsqrt = 1.0 / np.sqrt(np.mean(xf * xf) + NORM_EPS)
    m = (fn.astype(np.float64) @ xf) * rsqrt
    pre = sigmoid(m[:HC] * scale[0] + base[:HC]) + HC_EPS
    post = 2 * sigmoid(m[HC:2 * HC] * scale[1] + base[HC:2 * HC])
    c = (m[2 * HC:] * scale[2] + base[2 * HC:]).reshape(HC, HC)
    c = np.exp(c - c.max(axis=1, keepdims=True))
    c = c / c.sum(axis=1, keepdims=True) + HC_EPS
    c = c / (c.sum(axis=0, keepdims=True) + HC_EPS)
    for _ in range(iters - 1):
        c = c / (c.sum(axis=1, keepdims=True) + HC_EPS)
        c = c / (c.sum(axis=0, keepdims=True) + HC_EPS)
    return pre, post, c


# The large inputs come from integer formulas (exact in float32) that the C++ test computes
# the same way, so only the small ones and the results are stored.
def stream(case):
    j, d = np.meshgrid(np.arange(HC), np.arange(DIM), indexing="ij")
    return (((j * 37 + d * 11 + case * 5) % 61 - 30) * 2.0 ** (case - 3) / 8).astype(np.float32)


def mix_weights(case):
    r, k = np.meshgrid(np.arange((2 + HC) * HC), np.arange(HC * DIM), indexing="ij")
    return (((r * 131 + k * 71 + case * 17) % 97 - 48) / 1024.0).astype(np.float32)


def main():
    rng = np.random.default_rng(4)
    cases = []
    for case in range(6):
        x = stream(case)
        fn = mix_weights(case)
        base = (rng.standard_normal((2 + HC) * HC) * 0.5).astype(np.float32)
        scale = (rng.uniform(0.1, 2.0, 3) * [1, 1, 4]).astype(np.float32)
        pre, post, comb = mixes(x, fn.astype(np.float64), scale.astype(np.float64), base.astype(np.float64), ITERS[case])
        f = bf16(rng.standard_normal(DIM).astype(np.float32))
        collapsed = (pre[:, None] * x.astype(np.float64)).sum(axis=0)
        # Copy i takes column i of comb: how much of each copy j goes into it.
        updated = post[:, None] * f.astype(np.float64)[None, :] + comb.T @ x.astype(np.float64)
        cases.append({
            "sinkhorn_iters": ITERS[case], "base": [float(v) for v in base], "scale": [float(v) for v in scale], "f": [float(v) for v in f],
            "pre": list(pre), "post": list(post), "comb": [float(v) for v in comb.reshape(-1)],
            "collapsed": [float(v) for v in collapsed], "updated": [float(v) for v in updated.reshape(-1)],
        })
    text = json.dumps({"source": "tests/reference/hyper_connections_golden.py", "hc": HC, "dim": DIM,
                       "cases": cases}) + "\n"
    emit(text)


if __name__ == "__main__":
    main()
