#!/usr/bin/python3
"""Golden values for Engram's n-gram hashing (runtime/engine/engram_hash) on the v41-tiny
preset — the reference's small test model: the constants DeepSeek's reference derives
(primes, offsets, numpy PCG64 multipliers, its stub token map t // 2) and the table rows
of every position of a token sequence, computed with Python's unbounded integers
(Debian's python3-numpy for the random stream only).

    /usr/bin/python3 tests/reference/engram_golden.py > tests/reference/golden/engram.json
    /usr/bin/python3 tests/reference/engram_golden.py --check tests/reference/golden/engram.json
"""
import json

import numpy as np

from golden_output import emit

VOCAB, COMPRESSED, PAD_TOKEN = 512, 256, 2
LAYERS, ENGRAM_VOCAB, HEADS, MAX_N = [0, 1], 100, 2, 4


def primes_from(start, count, used):
    out, p = [], start
    while len(out) < count:
        p += 1
        if p in used or any(p % d == 0 for d in range(2, int(p ** 0.5) + 1)):
            continue
        used.add(p)
        out.append(p)
    return out


def main():
    used, layers = set(), []
    for layer in LAYERS:
        primes = []
        for _ in range(2, MAX_N + 1):
            primes += primes_from(ENGRAM_VOCAB - 1, HEADS, used)
        offsets = [sum(primes[:i]) for i in range(len(primes))]
        bound = max(1, (2 ** 63 - 1) // COMPRESSED // 2)
        draws = np.random.default_rng(10007 * layer).integers(0, bound, size=MAX_N, dtype=np.int64)
        layers.append({"layer": layer, "multipliers": [2 * int(v) + 1 for v in draws], "primes": primes, "offsets": offsets})
    token_map = [t // 2 for t in range(VOCAB)]
    pad = token_map[PAD_TOKEN]
    rng = np.random.default_rng(2)
    tokens = [int(t) for t in rng.integers(0, VOCAB, size=40)]
    tokens[7:11] = [tokens[3]] * 4  # repeated n-grams
    compressed = [token_map[t] for t in tokens]
    rows = []
    for l in layers:
        per_position = []
        for p in range(len(tokens)):
            t = [compressed[p - k] if p - k >= 0 else pad for k in range(MAX_N)]
            ids = []
            for n in range(2, MAX_N + 1):
                h = 0
                for k in range(n):
                    h ^= t[k] * l["multipliers"][k]
                for j in range(HEADS):
                    at = (n - 2) * HEADS + j
                    ids.append(h % l["primes"][at] + l["offsets"][at])
            per_position.append(ids)
        rows.append(per_position)
    sidecar = {"source": "models/v41/engram_constants.py", "pad_id": pad, "compressed_vocab_size": COMPRESSED, "layers": layers,
               "token_map": token_map}
    text = json.dumps({"source": "tests/reference/engram_golden.py", "engram_json": sidecar, "tokens": tokens, "rows": rows}) + "\n"
    emit(text)


if __name__ == "__main__":
    main()
