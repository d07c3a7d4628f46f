#!/usr/bin/python3
"""Builds the training data of the mini model, deterministically from a config.

    /usr/bin/python3 models/mini/make_data.py --config models/mini/mini.json \
        --tandem-rt build/bin/tandem-rt --out build/mini/data

1. The tokenizer: DeepSeek-V3's, cut to the config's merge count by
   `tandem-rt init-model --tokenizer-merges` (the derivation the synthetic presets use).
2. Raw text every Debian machine with python3.11 has: Python standard library sources
   (code) and /usr/share/common-licenses plus /usr/share/doc/*/copyright (prose); files
   in the order of sha256(path), each at most max_file_bytes, until the byte budgets;
   or, with --sources MANIFEST, exactly the files an earlier data manifest lists (checked
   by sha256), since which doc files fill the budget depends on the installed packages.
3. Instruction conversations from templates.py, rendered exactly as tandem-rt's chat
   template renders them (runtime/model/chat_template.cpp); most user prompts start with
   a nonce marker "Word: " as the campaign harness sends them (harness/campaign/nonce.cpp).
   Every text is checked against campaigns/corpus.yaml: an example that shares 40
   characters with a corpus prompt or system prompt is drawn again, and the script fails
   if any such text is left anywhere in the data.
4. Everything is tokenized by `tandem-rt tokenize --jsonl` (so exactly as the runtime
   tokenizes) and written as tokens.bin (uint16), mask.bin (uint8: 1 where the token is
   a training target), index.json (examples: offset, length, family, split),
   tokenizer.json / tokenizer_config.json, data_manifest.json (sources with sizes and
   sha256, counts, the corpus check) and samples.txt (a few rendered examples per family).
"""

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import templates  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
USER, ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
THINK_BEGIN, THINK_END = "<think>", "</think>"
WINDOW = 40   # characters shared with a corpus prompt that reject an example


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def sha256_file(path):
    with open(path, "rb") as f:
        return sha256_bytes(f.read())


def default_tokenizer_source():
    """The DeepSeek-V3 tokenizer committed in the repository (models/tokenizers/deepseek-v3)."""
    return Path(__file__).resolve().parent.parent / "tokenizers" / "deepseek-v3"


# ---------------------------------------------------------------------------
# Tokenizer and nonce words
# ---------------------------------------------------------------------------

def derive_tokenizer(tandem_rt, merges, source, out):
    with tempfile.TemporaryDirectory(prefix="mini-tok-") as tmp:
        r = subprocess.run([tandem_rt, "init-model", "--preset", "tiny", "--seed", "0", "--tokenizer-merges", str(merges),
                            "--tokenizer-source", str(source), "--out", tmp], capture_output=True, text=True, check=True)
        line = [l for l in r.stdout.splitlines() if l.startswith("tokenizer:")][0]
        if "byte-level" in line:
            sys.exit(f"make_data: {line}\nthe DeepSeek-V3 tokenizer is missing from {source}")
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(Path(tmp) / name, out / name)
    vocab = json.load(open(out / "tokenizer.json"))
    size = len(vocab["model"]["vocab"]) + sum(1 for a in vocab["added_tokens"] if a["content"] not in vocab["model"]["vocab"])
    return line.split("tokenizer: ", 1)[1], size


def byte_decoder():
    """GPT-2 byte-level alphabet: character -> byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def nonce_words(tokenizer_json):
    """Whole-word vocabulary tokens of 4-12 ASCII letters, with or without a leading space:
    the words the harness draws its prompt markers from (harness/campaign/nonce.cpp)."""
    dec = byte_decoder()
    words = []
    for piece in sorted(json.load(open(tokenizer_json))["model"]["vocab"]):
        try:
            text = bytes(dec[c] for c in piece).decode("ascii")
        except (KeyError, UnicodeDecodeError):
            continue
        if re.fullmatch(r" ?[A-Za-z]{4,12}", text):
            words.append(text)
    return words


# ---------------------------------------------------------------------------
# The corpus check
# ---------------------------------------------------------------------------

def normalize(text):
    return re.sub(r"\s+", " ", text)


def corpus_windows(corpus_path):
    import yaml
    cases = yaml.safe_load(open(corpus_path))["cases"]
    strings = [c["prompt"] for c in cases] + [c["system"] for c in cases if c.get("system")]
    windows = set()
    for s in strings:
        s = normalize(s)
        for i in range(len(s) - WINDOW + 1):
            windows.add(s[i:i + WINDOW])
    return strings, windows


def shares_window(text, windows):
    t = normalize(text)
    return any(t[i:i + WINDOW] in windows for i in range(len(t) - WINDOW + 1))


# ---------------------------------------------------------------------------
# Raw text
# ---------------------------------------------------------------------------

def select_files(candidates, budget, max_bytes):
    """candidates: paths. Returns [(path, text)] in sha256(path) order until the byte budget;
    files over max_bytes, empty, not UTF-8, or duplicates of an earlier file are skipped."""
    chosen, used, seen = [], 0, set()
    for path in sorted(candidates, key=lambda p: hashlib.sha256(str(p).encode()).hexdigest()):
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue
        if not data.strip() or len(data) > max_bytes or used + len(data) > budget:
            continue
        digest = sha256_bytes(data)
        if digest in seen:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        seen.add(digest)
        chosen.append((str(path), text, len(data), digest))
        used += len(data)
    return chosen


def listed_sources(manifest_path):
    """The raw files a data manifest lists, each checked against its recorded sha256: the same
    raw text on a machine whose installed packages differ (a package added or removed changes
    which /usr/share/doc files fill the byte budget)."""
    try:
        listed = json.load(open(manifest_path))["sources"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"make_data: --sources {manifest_path}: not a data manifest with a 'sources' list ({e})")
    picked = {"code": [], "prose": []}
    for s in listed:
        path = Path(s["path"])
        try:
            data = path.read_bytes()
        except OSError as e:
            package = path.parts[4] if path.parts[:4] == ("/", "usr", "share", "doc") else None
            sys.exit(f"make_data: --sources {manifest_path}: {path} cannot be read ({e.strerror})"
                     + (f"; it comes with the Debian package {package}" if package else ""))
        digest = sha256_bytes(data)
        if digest != s["sha256"]:
            sys.exit(f"make_data: --sources {manifest_path}: {path} is not the file the manifest lists "
                     f"(sha256 {digest[:12]}…, listed {s['sha256'][:12]}…): another package version")
        picked[s["kind"]].append((str(path), data.decode("utf-8"), len(data), s["sha256"]))
    return picked["code"], picked["prose"]


def raw_sources(cfg):
    py = Path("/usr/lib/python3.11")
    skip = re.compile(r"/(test|tests|idle_test|site-packages|dist-packages|__pycache__)/")
    code = [p for p in py.rglob("*.py") if not skip.search(str(p)) and p.is_file()]
    prose = [p for p in Path("/usr/share/common-licenses").iterdir() if p.is_file()]
    prose += [p for p in Path("/usr/share/doc").glob("*/copyright") if p.is_file()]
    if not code:
        sys.exit("make_data: no Python 3.11 standard library under /usr/lib/python3.11")
    d = cfg["data"]
    return (select_files(code, d["code_bytes"], d["max_file_bytes"]),
            select_files(prose, d["prose_bytes"], d["max_file_bytes"]))


# ---------------------------------------------------------------------------
# Rendering: segments (text, is_markup, is_target), as ChatTemplate::Segments
# ---------------------------------------------------------------------------

def render(ex):
    segs = [(BOS, True, False)]
    if ex["system"]:
        segs.append((ex["system"], False, False))
    segs += [(USER, True, False), (ex["user"], False, False)]
    if ex["think"] is not None:
        segs += [(ASSISTANT + THINK_BEGIN, True, False), ("\n" + ex["think"] + "\n", False, True), (THINK_END, True, True),
                 ("\n\n" + ex["reply"], False, True)]
    else:
        segs += [(ASSISTANT, True, False), (ex["reply"], False, True)]
    segs.append((EOS, True, True))
    return segs


def render_text(segs):
    return "".join(t for t, _, _ in segs)


def generate(cfg, windows, words):
    """Instruction examples: {split: [(family, example)]}, and per-family rejection counts."""
    d = cfg["data"]
    templates.INVENTED["fraction"] = d.get("invented_names_fraction", 0.0)
    templates.VOCABULARY["words"] = words
    templates.VOCABULARY["names_fraction"] = d.get("vocabulary_names_fraction", 0.0)
    out = {"train": [], "valid": []}
    rejected = {}
    for family, count in d["instructions"].items():
        gen = templates.FAMILIES[family]
        nonce_p = d["counting_nonce_fraction"] if family in ("counting", "count_range") else d["nonce_fraction"]
        for split, n in (("train", count), ("valid", d["valid_per_family"] if count else 0)):
            rng = random.Random(f"{cfg['seed']}:{split}:{family}")
            made = 0
            while made < n:
                ex = gen(rng)
                if rng.random() < nonce_p:
                    ex["user"] = rng.choice(words) + ": " + ex["user"]
                texts = [ex["user"], ex["reply"]] + [t for t in (ex["system"], ex["think"]) if t]
                if any(shares_window(t, windows) for t in texts):
                    rejected[family] = rejected.get(family, 0) + 1
                    continue
                out[split].append((family, ex))
                made += 1
    return out, rejected


def tokenize(tandem_rt, model_dir, texts, parse_special):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as f:
        for t in texts:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
        path = f.name
    try:
        cmd = [tandem_rt, "tokenize", "--model", str(model_dir), "--jsonl", path] + (["--parse-special"] if parse_special else [])
        r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    finally:
        os.unlink(path)
    ids = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(ids) == len(texts)
    return dict(zip(texts, ids))


def check_chat_template(tandem_rt, model_dir, rendered, ids, count=4):
    """The prompt part of a few examples (no system prompt, no thinking) must be the tokens
    `tandem-rt tokenize --chat` gives for that user message: the runtime's chat template."""
    checked = 0
    for family, segs in rendered:
        if checked == count:
            return
        if len(segs) != 6 or segs[3][0] != ASSISTANT:
            continue
        ours = [i for text, _, _ in segs[:4] for i in ids[text]]
        r = subprocess.run([tandem_rt, "tokenize", "--model", str(model_dir), "--chat", "--text", segs[2][0]],
                           capture_output=True, text=True, check=True)
        if json.loads(r.stdout) != ours:
            sys.exit(f"make_data: a {family} prompt renders differently from tandem-rt's chat template:\n{segs[2][0]!r}")
        checked += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--tandem-rt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer-source", default=str(default_tokenizer_source()))
    ap.add_argument("--sources", metavar="MANIFEST",
                    help="take exactly the raw files this data manifest lists (checked by sha256) instead of selecting "
                         "them from what this machine has installed")
    args = ap.parse_args()
    cfg = json.load(open(args.config))
    d = cfg["data"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tandem_rt = os.path.abspath(args.tandem_rt)

    description, vocab = derive_tokenizer(tandem_rt, cfg["tokenizer"]["merges"], args.tokenizer_source, out)
    words = nonce_words(out / "tokenizer.json")
    print(f"tokenizer: {description}; {len(words)} nonce-style words")

    strings, windows = corpus_windows(REPO / "campaigns" / "corpus.yaml")
    code, prose = listed_sources(args.sources) if args.sources else raw_sources(cfg)
    print(f"raw text: {len(code)} code files ({sum(c[2] for c in code)} bytes), "
          f"{len(prose)} prose files ({sum(p[2] for p in prose)} bytes)")
    examples, rejected = generate(cfg, windows, words)
    print("instructions: " + ", ".join(f"{f} {n}" for f, n in d["instructions"].items())
          + (f"; redrawn for sharing {WINDOW} characters with the corpus: {rejected}" if rejected else ""))

    # Every text in the data, raw files included, against the corpus.
    hits = [p for p, t, _, _ in code + prose if shares_window(t, windows)]
    for split in examples:
        for family, ex in examples[split]:
            if shares_window(render_text(render(ex)), windows):
                hits.append(f"{split} {family}: {ex['user'][:60]}")
    if hits:
        sys.exit(f"make_data: {len(hits)} texts share {WINDOW} characters with campaigns/corpus.yaml: {hits[:5]}")

    # Tokenize: markup with added tokens parsed, everything else as text.
    rendered = {split: [(f, render(ex)) for f, ex in exs] for split, exs in examples.items()}
    markup = sorted({t for exs in rendered.values() for _, segs in exs for t, m, _ in segs if m})
    texts = sorted({t for exs in rendered.values() for _, segs in exs for t, m, _ in segs if not m}
                   | {t for _, t, _, _ in code + prose})
    ids = tokenize(tandem_rt, out, texts, False)
    ids.update(tokenize(tandem_rt, out, markup, True))
    bos, eos = ids[BOS], ids[EOS]
    assert len(bos) == 1 and len(eos) == 1

    check_chat_template(tandem_rt, out, rendered["train"], ids)

    families = ["code", "prose"] + list(d["instructions"])
    seq_len = d["seq_len"]
    tokens, mask, index = [], [], []
    stats = {f: {"examples": 0, "valid": 0, "tokens": 0, "target_tokens": 0, "dropped_too_long": 0} for f in families}

    def add(family, split, toks, targets):
        if len(toks) > seq_len:
            stats[family]["dropped_too_long"] += 1
            return
        index.append([sum(len(t) for t in tokens), len(toks), families.index(family), 0 if split == "train" else 1])
        tokens.append(np.asarray(toks, dtype=np.uint16))
        mask.append(np.asarray(targets, dtype=np.uint8))
        s = stats[family]
        s["examples" if split == "train" else "valid"] += 1
        if split == "train":
            s["tokens"] += len(toks)
            s["target_tokens"] += int(sum(targets))

    # Raw documents: BOS + text (+ EOS at the end), cut into pieces of raw_chunk tokens; one
    # document in raw_valid_every goes to the validation split.
    for kind, files in (("code", code), ("prose", prose)):
        for i, (path, text, _, _) in enumerate(files):
            body = ids[text] + eos
            split = "valid" if i % d["raw_valid_every"] == d["raw_valid_every"] - 1 else "train"
            for start in range(0, len(body), d["raw_chunk"] - 1):
                piece = body[start:start + d["raw_chunk"] - 1]
                add(kind, split, bos + piece, [0] + [1] * len(piece))
    for split, exs in rendered.items():
        for family, segs in exs:
            toks, targets = [], []
            for text, _, target in segs:
                toks += ids[text]
                targets += [1 if target else 0] * len(ids[text])
            add(family, split, toks, targets)

    all_tokens = np.concatenate(tokens)
    assert all_tokens.max() < vocab and len(all_tokens) < 2**32
    all_tokens.astype("<u2").tofile(out / "tokens.bin")
    np.concatenate(mask).tofile(out / "mask.bin")
    json.dump({"families": families, "seq_len": seq_len, "examples": index}, open(out / "index.json", "w"))

    # A few rendered examples per family, for people to read.
    with open(out / "samples.txt", "w", encoding="utf-8") as f:
        for family in d["instructions"]:
            for _, ex in [e for e in examples["train"] if e[0] == family][:3]:
                f.write(f"===== {family}\n{render_text(render(ex))}\n\n")

    manifest = {
        "recipe": "models/mini/make_data.py",
        "config": cfg,
        "tokenizer": {"description": description, "vocab_size": vocab, "merges": cfg["tokenizer"]["merges"],
                      "source_sha256": sha256_file(Path(args.tokenizer_source) / "tokenizer.json"),
                      "tokenizer_json_sha256": sha256_file(out / "tokenizer.json")},
        "nonce_words": len(words),
        "sources": [{"path": p, "kind": k, "bytes": n, "sha256": h}
                    for k, files in (("code", code), ("prose", prose)) for p, _, n, h in files],
        "families": stats,
        "redrawn_for_corpus_overlap": rejected,
        "corpus_check": {"corpus": "campaigns/corpus.yaml", "strings": len(strings), "window_chars": WINDOW, "hits": 0},
        "totals": {"examples": len(index), "tokens": int(len(all_tokens)),
                   "train_tokens": int(sum(e[1] for e in index if e[3] == 0)),
                   "train_target_tokens": int(sum(s["target_tokens"] for s in stats.values()))},
        "files": {name: sha256_file(out / name) for name in ("tokens.bin", "mask.bin", "index.json", "tokenizer.json",
                                                            "tokenizer_config.json")},
    }
    json.dump(manifest, open(out / "data_manifest.json", "w"), indent=1, ensure_ascii=False)
    t = manifest["totals"]
    print(f"wrote {out}: {t['examples']} examples, {t['tokens']} tokens ({t['train_tokens']} train, "
          f"{t['train_target_tokens']} train targets)")
    for f in families:
        s = stats[f]
        print(f"  {f:12} {s['examples']:6} train {s['valid']:4} valid {s['tokens']:9} tokens"
              + (f" ({s['dropped_too_long']} too long, dropped)" if s["dropped_too_long"] else ""))


if __name__ == "__main__":
    main()
