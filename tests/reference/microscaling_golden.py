#!/usr/bin/python3
"""Golden values for runtime/numeric/microscaling: DeepSeek V4.1's block formats and the
reference's activation round trips, computed independently of the C++ code with numpy
(Debian's python3-numpy): every rounding is a nearest-value search over the format's whole
table of values, ties going to the even code, rather than bit manipulation.

    /usr/bin/python3 tests/reference/microscaling_golden.py > tests/reference/golden/microscaling.json
    /usr/bin/python3 tests/reference/microscaling_golden.py --check tests/reference/golden/microscaling.json
"""
import json

import numpy as np

from golden_output import emit


def bf16(x):
    """Round float32 values to bfloat16 (nearest, ties to even), as float32."""
    x = np.asarray(x, dtype=np.float32)
    out = np.empty_like(x)
    for i, v in enumerate(x.ravel()):
        if v == 0 or not np.isfinite(v):
            out.ravel()[i] = v
            continue
        # The two bf16 neighbours by value: float32 with the low 16 bits cleared, and the next.
        b = np.frombuffer(np.float32(v).tobytes(), dtype=np.uint32)[0]
        lo = np.frombuffer(np.uint32(b & 0xFFFF0000).tobytes(), dtype=np.float32)[0]
        hi = np.frombuffer(np.uint32((b & 0xFFFF0000) + 0x10000).tobytes(), dtype=np.float32)[0]
        dlo, dhi = abs(float(v) - float(lo)), abs(float(hi) - float(v))
        if dlo < dhi or (dlo == dhi and ((b >> 16) & 1) == 0):
            out.ravel()[i] = lo
        else:
            out.ravel()[i] = hi
    return out


def e4m3_table():
    """Every finite OCP E4M3 value by code 0..126 (positive; 127 is NaN)."""
    vals = []
    for code in range(127):
        e, m = code >> 3, code & 7
        vals.append((m / 8.0) * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7))
    return np.array(vals)


E4M3 = e4m3_table()
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def nearest(table, v):
    """The code of the value of `table` nearest |v| (ties: the even code), saturating."""
    a = abs(v)
    d = np.abs(table - a)
    best = np.flatnonzero(d == d.min())
    code = best[0] if len(best) == 1 else [c for c in best if c % 2 == 0][0]
    return int(code)


def e4m3(v):
    return np.copysign(E4M3[nearest(E4M3, min(abs(v), 448.0))], v)


def e2m1(v):
    return np.copysign(E2M1[nearest(E2M1, min(abs(v), 6.0))], v)


def pow2_ceil(y):
    """2^ceil(log2 y) for a positive normal float32 y."""
    m, e = np.frexp(np.float64(y))  # y = m 2^e, m in [0.5, 1)
    return np.float32(2.0 ** (e - 1) if m == 0.5 else 2.0 ** e)


def round_trip(x, block, scale_of, code):
    x = np.asarray(x, dtype=np.float32).copy()
    for b in range(0, len(x), block):
        v = x[b:b + block]
        s = scale_of(np.float32(np.max(np.abs(v))))
        q = np.array([code(float(np.clip(np.float32(t) / s, -code.limit, code.limit))) for t in v], dtype=np.float64)
        x[b:b + block] = bf16((q * np.float64(s)).astype(np.float32))
    return x


e4m3.limit = 448.0
e2m1.limit = 6.0


def fp8(x):
    return round_trip(x, 32, lambda a: pow2_ceil(np.float32(max(a, np.float32(1e-4))) * np.float32(1 / 448)), e4m3)


def fp4_pow2(x):
    floor = np.float32(6 * 2.0 ** -126)
    return round_trip(x, 32, lambda a: pow2_ceil(np.float32(max(a, floor)) * np.float32(1 / 6)), e2m1)


def fp4_e4m3(x):
    floor = np.float32(6 * 2.0 ** -9)
    return round_trip(x, 16, lambda a: np.float32(e4m3(float(np.float32(max(a, floor)) / np.float32(6.0)))), e2m1)


def main():
    rng = np.random.default_rng(41)
    rows = []
    for scale in [1e-9, 1e-6, 3e-3, 0.7, 1.0, 13.0, 900.0, 5e4]:
        rows.append(bf16(rng.standard_normal(64).astype(np.float32) * np.float32(scale)))
    # Heavy tails, zeros of both signs, a block far below the floors.
    t = bf16(rng.standard_t(2, 64).astype(np.float32))
    t[3], t[40] = 0.0, -0.0
    rows.append(t)
    rows.append(np.zeros(64, dtype=np.float32))
    # Exact E2M1 midpoints: a block whose power-of-two scale is 1 (max 6 → scale 1).
    ties = np.array([6, 0.25, -0.75, 1.25, 1.75, -2.5, 3.5, 5, 0.5, 2.75, -5.5, 4.5, 0.125, 1, -3, 2] * 4, dtype=np.float32)
    rows.append(bf16(ties))
    cases = []
    for r in rows:
        cases.append({
            "input": [float(v) for v in r],
            "fp8": [float(v) for v in fp8(r)],
            "fp4_pow2": [float(v) for v in fp4_pow2(r)],
            "fp4_e4m3": [float(v) for v in fp4_e4m3(r)],
        })
    # FP4 weight rows: random packed bytes, scales 2^-10..2^3.
    packed = rng.integers(0, 256, size=(4, 32), dtype=np.uint8)
    scales = rng.integers(117, 131, size=(4, 2), dtype=np.uint8)
    weights = []
    for p, s in zip(packed, scales):
        out = []
        for c in range(64):
            nib = (p[c // 2] & 0xF) if c % 2 == 0 else (p[c // 2] >> 4)
            mag = E2M1[nib & 7] * (-1 if nib & 8 else 1)
            out.append(float(mag * 2.0 ** (int(s[c // 32]) - 127)))
        weights.append({"packed": [int(v) for v in p], "scales": [int(v) for v in s], "values": out})
    text = json.dumps({"source": "tests/reference/microscaling_golden.py", "round_trips": cases, "fp4_rows": weights}, indent=0) + "\n"
    emit(text)


if __name__ == "__main__":
    main()
