#!/usr/bin/env python3
"""tandem-rt's tokenizer against Hugging Face `tokenizers` (the Rust library every HF
runtime uses, from PyPI into .venv by scripts/setup), on the same tokenizer.json files.

    hf_tokenizers_check.py --tandem-rt PATH --cases cases.json --golden golden_v3.json \
        --work DIR --tokenizer DIR [--tokenizer DIR ...] [--mutation-check]

The texts: every string of cases.json (Unicode classes, digit runs, whitespace runs, CJK,
emoji, added tokens written out and near misses of them), every chat text of the golden
file, and 1500 strings drawn with a fixed seed from pieces of the same kinds. For each
tokenizer directory, two readings are compared id for id:
  - `tandem-rt tokenize --parse-special` against HF's `encode` (added tokens matched in the
    text, as HF always does);
  - `tandem-rt tokenize` (added tokens are only text, as the server treats content) against
    HF on the same file with its added tokens removed;
and HF's `decode` of Tandem's ids must give each text back.

Code points whose Unicode class changed after Unicode 14 (the golden file flags them) may
split differently under PCRE2 (Tandem) and Oniguruma (HF), by the two libraries' Unicode
versions: those texts are reported, not failed. Everything else must be identical.

--mutation-check shows the comparison can fail: the first tokenizer's most used merge is
moved to the end of its merge list; Tandem and HF must still agree on that changed file, and
Tandem on it must now disagree with HF on the original.

Exit 0 when everything holds, 1 otherwise."""
import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

try:
    from tokenizers import Tokenizer
    import tokenizers
except ImportError:
    sys.exit("hf_tokenizers_check: Hugging Face `tokenizers` is missing: scripts/setup installs it into .venv")

TEXTS_DRAWN = 1500

# Pieces for the drawn texts: each one's characters keep their Unicode class from Unicode 10 on.
PIECES = [
    "the", " the", "Hello", " world", "HTTPServer", "don't", "I'M", "'s", "'ll", " can't", "x",
    "0", "7", "42", "123", "1234", "3.14159", "2026-12-07", "1,000,000", "٣٤٥", "१२३", "Ⅻ", "½",
    " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u2009", "\u3000", "\u2028",
    "\u0085", "\ufeff", "\u200b", "\u200d", "\x0b", "\x0c", "\x00", "\x1b[0m",
    ".", ",", "!", "?", "...", "—", "–", "«", "»", "“", "”", "(", ")", "[]", "{}", "<", ">", "|", "/",
    "\\", "#", "@", "$", "%", "&", "*", "+", "=", "~", "^", "_", "`", "'", '"', "€", "£", "¥", "©", "°",
    "∑", "≠", "→", "⟨x⟩", "::", "->", "=>", "==", "!=", "//", "/*", "*/", "#include", "std::vector<int>",
    "def f(x):", "    return x", "{\"key\": [1, 2]}", "https://example.com/a?b=c", "/usr/lib/x86_64",
    "中文", "一", "龥", "龦", "鿕", "日本語", "ひらがな", "カタカナ", "ｶﾀｶﾅ", "々", "〆", "〇", "한국어",
    "Ελληνικά", "Русский", "עברית", "العربية", "हिन्दी", "ไทย", "ქართული", "Ἀθῆναι",
    "e\u0301", "a\u0308", "\u0301", "n\u0303\u0323", "ﬁ", "Å", "ǅ",
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🏳️‍🌈", "❤️", "☃", "🤖",
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<|EOT|>",
    "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜fim▁hole｜>", "<think>",
    "</think>", "<｜User", "｜>", "<｜", "<|EOT|", "<｜place▁holder▁no▁7｜>", "▁", "Ġ", "Ċ",
]


def drawn_texts(count, seed=20261207):
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12))) for _ in range(count)]


def unicode_version_texts(golden):
    """Texts whose ids depend on the regex library's Unicode version (flagged in the golden file)."""
    return {c["text"] for c in golden["cases"]
            if "suspect_js_deviation" in c and "ids_oniguruma_whitespace" not in c}


def tandem_encode(tandem_rt, model_dir, texts, parse_special, work):
    lines = work / "texts.jsonl"
    with open(lines, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps(t) + "\n")
    cmd = [tandem_rt, "tokenize", "--model", str(model_dir), "--jsonl", str(lines)]
    if parse_special:
        cmd.append("--parse-special")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"hf_tokenizers_check: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    ids = [json.loads(line) for line in r.stdout.splitlines()]
    if len(ids) != len(texts):
        sys.exit(f"hf_tokenizers_check: tandem-rt printed {len(ids)} lines for {len(texts)} texts")
    return ids


def without_added_tokens(tokenizer_json):
    stripped = json.loads(json.dumps(tokenizer_json))
    stripped["added_tokens"] = []
    return Tokenizer.from_str(json.dumps(stripped))


def hf_encode(tokenizer, texts):
    return [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


class Comparison:
    def __init__(self, name, unicode_version):
        self.name, self.unicode_version = name, unicode_version
        self.equal, self.unicode_differences, self.failures = 0, [], []

    def add(self, text, ours, theirs, hf):
        if ours == theirs:
            self.equal += 1
        elif text in self.unicode_version:
            self.unicode_differences.append(text)
        else:
            self.failures.append(f"{json.dumps(text, ensure_ascii=False)}\n    tandem {ours} {[hf.id_to_token(i) for i in ours]}"
                                 f"\n    hf     {theirs} {[hf.id_to_token(i) for i in theirs]}")

    def report(self):
        print(f"{self.name}: {self.equal} identical, {len(self.unicode_differences)} differ by Unicode version"
              f" [{', '.join(json.dumps(t, ensure_ascii=False) for t in self.unicode_differences)}], {len(self.failures)} differ")
        for f in self.failures[:20]:
            print(f"  {f}")
        return not self.failures


def compare(label, tandem_rt, model_dir, texts, unicode_version, work):
    tokenizer_json = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    hf = Tokenizer.from_str(json.dumps(tokenizer_json))
    ok = True

    parsed = Comparison(f"{label} --parse-special vs HF encode", unicode_version)
    for text, ours, theirs in zip(texts, tandem_encode(tandem_rt, model_dir, texts, True, work), hf_encode(hf, texts)):
        parsed.add(text, ours, theirs, hf)
    ok &= parsed.report()

    ours_as_text = tandem_encode(tandem_rt, model_dir, texts, False, work)
    as_text = Comparison(f"{label} added tokens as text vs HF without added tokens", unicode_version)
    for text, ours, theirs in zip(texts, ours_as_text, hf_encode(without_added_tokens(tokenizer_json), texts)):
        as_text.add(text, ours, theirs, hf)
    ok &= as_text.report()

    not_back = [t for t, ids in zip(texts, ours_as_text) if hf.decode(ids, skip_special_tokens=False) != t]
    print(f"{label}: HF decodes Tandem's ids back to {len(texts) - len(not_back)} of {len(texts)} texts")
    for t in not_back[:10]:
        print(f"  not given back: {json.dumps(t, ensure_ascii=False)}")
    return ok and not not_back


def mutation_check(tandem_rt, model_dir, texts, unicode_version, work):
    """The most used merge moved last: both libraries follow the change, and the comparison sees it."""
    tokenizer_json = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    merges = tokenizer_json["model"]["merges"]
    moved = merges.pop(0)
    merges.append(moved)
    mutated_dir = work / "mutated"
    mutated_dir.mkdir(parents=True, exist_ok=True)
    (mutated_dir / "tokenizer.json").write_text(json.dumps(tokenizer_json, ensure_ascii=False), encoding="utf-8")
    ours = tandem_encode(tandem_rt, mutated_dir, texts, False, work)
    follows = Comparison(f"merge {moved!r} moved last: Tandem vs HF on that file", unicode_version)
    hf = without_added_tokens(tokenizer_json)
    for text, a, b in zip(texts, ours, hf_encode(hf, texts)):
        follows.add(text, a, b, hf)
    ok = follows.report()
    original = without_added_tokens(json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8")))
    caught = sum(a != b for a, b in zip(ours, hf_encode(original, texts)))
    print(f"merge {moved!r} moved last: Tandem on the changed file differs from HF on the original on {caught} texts")
    return ok and caught > 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tandem-rt", required=True)
    ap.add_argument("--cases", required=True, type=Path)
    ap.add_argument("--golden", required=True, type=Path, help="golden_v3.json: its chat texts and Unicode-version flags")
    ap.add_argument("--tokenizer", required=True, type=Path, action="append", help="a directory with tokenizer.json")
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--mutation-check", action="store_true")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)

    golden = json.loads(args.golden.read_text(encoding="utf-8"))
    texts = json.loads(args.cases.read_text(encoding="utf-8"))
    texts += [c["text"] for c in golden["chat"]] + drawn_texts(TEXTS_DRAWN)
    unicode_version = unicode_version_texts(golden)
    print(f"hf_tokenizers_check: tokenizers {tokenizers.__version__}, {len(texts)} texts")

    ok = True
    for directory in args.tokenizer:
        ok &= compare(directory.name, args.tandem_rt, directory, texts, unicode_version, args.work)
    if args.mutation_check:
        ok &= mutation_check(args.tandem_rt, args.tokenizer[0], texts, unicode_version, args.work)
    print("hf_tokenizers_check: " + ("every comparison holds" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
