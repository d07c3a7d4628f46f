#!/usr/bin/python3
"""Writes DIR/engram.json: the constants of a DeepSeek V4.1 checkpoint's Engram layers,
which DeepSeek's reference (inference/engram.py) generates in Python at load time and
Tandem reads from this sidecar instead (as GGUF converters store a tokenizer's tables):

  * per Engram layer: the hash multipliers (numpy's PCG64 seeded 10007·layer: 2v+1 for v
    drawn in [0, (INT64_MAX // compressed_vocab) // 2)), the primes of its table heads (for
    each n-gram size 2..max and head, the smallest prime above engram_vocab_size − 1 not
    handed out before; the search restarts for every layer and size) and where each head's
    rows start;
  * the token map: raw token id → compressed id, and the pad id (the map of engram_pad_id).

    /usr/bin/python3 models/v41/engram_constants.py DIR --stub              # synthetic presets
    .venv/bin/python3 models/v41/engram_constants.py DIR --tokenizer DIR2   # a real checkpoint
    ... --check FILE   compare with FILE instead of writing

--stub maps token t to t // 2 (the reference's small test tokenizer). --tokenizer builds
the map as the reference does: each token decoded alone; a text holding U+FFFD keys on the
raw token string, any other on its normal form (NFKC, NFD, accents stripped, lowercase,
runs of whitespace as one space, stripped, a lone space kept); compressed ids in first-seen
order. It needs the `tokenizers` package (scripts/setup's .venv) and has not yet been run on
DeepSeek's published tokenizer.
"""
import argparse
import json
import os
import sys

import numpy as np


def read_args(directory):
    path = os.path.join(directory, "inference", "config.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    with open(os.path.join(directory, "config.json")) as f:
        doc = json.load(f)
    return doc.get("text_config", doc)


def is_prime(n):
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    d = 3
    while d * d <= n:
        if n % d == 0:
            return False
        d += 2
    return True


def layouts(args):
    used, out = set(), []
    for layer in args.get("engram_layer_ids", []):
        primes = []
        for _ in range(2, args["engram_max_ngram_size"] + 1):
            current = args["engram_vocab_size"] - 1
            for _ in range(args["engram_n_heads"]):
                p = current + 1
                while not is_prime(p) or p in used:
                    p += 1
                used.add(p)
                primes.append(p)
                current = p
        offsets = [int(v) for v in np.concatenate([[0], np.cumsum(primes)[:-1]])]
        bound = max(1, (np.iinfo(np.int64).max // args["engram_compressed_vocab_size"]) // 2)
        v = np.random.default_rng(10007 * layer).integers(0, bound, size=args["engram_max_ngram_size"], dtype=np.int64)
        out.append({"layer": layer, "multipliers": [int(2 * x + 1) for x in v], "primes": primes, "offsets": offsets})
    return out


def stub_map(args):
    return [t // 2 for t in range(args["vocab_size"])]


def tokenizer_map(args, directory):
    import unicodedata
    import re
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
    keys, out = {}, []
    for t in range(tok.get_vocab_size(with_added_tokens=True)):
        text = tok.decode([t], skip_special_tokens=False)
        if "\ufffd" in text:
            key = tok.id_to_token(t)
        else:
            s = unicodedata.normalize("NFKC", text)
            s = unicodedata.normalize("NFD", s)
            s = "".join(c for c in s if unicodedata.category(c) != "Mn").lower()
            s = re.sub(r"[ \t\r\n]+", " ", s)
            s = "\ue000" if s == " " else s
            s = s.strip().replace("\ue000", " ")
            key = s if s else text
        out.append(keys.setdefault(key, len(keys)))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("directory")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stub", action="store_true")
    source.add_argument("--tokenizer")
    parser.add_argument("--check")
    a = parser.parse_args()
    args = read_args(a.directory)
    token_map = stub_map(args) if a.stub else tokenizer_map(args, a.tokenizer)
    distinct = len(set(token_map))
    if distinct != args["engram_compressed_vocab_size"]:
        sys.exit(f"the token map has {distinct} distinct ids; engram_compressed_vocab_size is {args['engram_compressed_vocab_size']}")
    text = json.dumps({"source": "models/v41/engram_constants.py", "pad_id": token_map[args["engram_pad_id"]],
                       "compressed_vocab_size": distinct, "layers": layouts(args), "token_map": token_map}) + "\n"
    if a.check:
        with open(a.check) as f:
            if f.read() != text:
                sys.exit(f"{a.check} is not what this script computes")
        return
    with open(os.path.join(a.directory, "engram.json"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
