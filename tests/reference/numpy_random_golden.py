#!/usr/bin/python3
"""Golden values for runtime/model/numpy_random: numpy.random.default_rng(seed).integers(0,
high, size=count, dtype=numpy.int64) for seeds and bounds of the kind DeepSeek V4.1's Engram
draws its hash multipliers with (seed 10007 · layer, bound (INT64_MAX // compressed vocab) // 2),
computed by numpy itself (Debian's python3-numpy).

    /usr/bin/python3 tests/reference/numpy_random_golden.py > tests/reference/golden/numpy_random.json
    /usr/bin/python3 tests/reference/numpy_random_golden.py --check tests/reference/golden/numpy_random.json
"""
import json

import numpy as np

from golden_output import emit

INT64_MAX = np.iinfo(np.int64).max
CASES = [(0, 256), (10007, 256), (10007, 99092), (140098, 99092), (2**40 + 7, 512), (3, 7)]

draws = []
for seed, compressed in CASES:
    high = max(1, (INT64_MAX // compressed) // 2)
    values = np.random.default_rng(seed).integers(0, high, size=6, dtype=np.int64)
    draws.append({"seed": seed, "high": int(high), "values": [int(v) for v in values]})
emit(json.dumps({"source": "tests/reference/numpy_random_golden.py", "draws": draws}) + "\n")
