#include "runtime/model/tokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <algorithm>
#include <array>
#include <mutex>
#include <queue>
#include <unordered_map>

#include <pcre2.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/model/model_error.hpp"
#include "runtime/model/text_file.hpp"

namespace tandem::rt {

namespace {

using nlohmann::json;

// GPT-2's reversible byte → printable code point map used by ByteLevel.
struct ByteMap {
  std::array<std::string, 256> byte_to_utf8;
  std::unordered_map<std::string, std::uint8_t> utf8_to_byte;

  ByteMap() {
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const int cp = printable ? b : 256 + extra++;
      std::string s;
      if (cp < 0x80) {
        s = static_cast<char>(cp);
      } else {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
      }
      byte_to_utf8[static_cast<std::size_t>(b)] = s;
      utf8_to_byte[s] = static_cast<std::uint8_t>(b);
    }
  }
};

const ByteMap& Bytes() {
  static const ByteMap map;
  return map;
}

// Length of the UTF-8 sequence starting at text[i] if it is valid, else 1.
std::size_t Utf8Length(std::string_view text, std::size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > text.size()) return 1;
  for (std::size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext };

struct Regex {
  std::shared_ptr<pcre2_code> code;
  std::shared_ptr<pcre2_match_context> context;  // bounds backtracking on hostile patterns

  static Regex Compile(const std::string& pattern, bool literal, std::string_view where) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    const std::uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : 0u);
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error, &offset, nullptr);
    if (code == nullptr) {
      std::array<PCRE2_UCHAR, 256> message{};
      pcre2_get_error_message(error, message.data(), message.size());
      throw ModelError(fmt::format("{}: regex error at offset {}: {}", where, offset, reinterpret_cast<const char*>(message.data())));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
    std::shared_ptr<pcre2_match_context> context(pcre2_match_context_create(nullptr), pcre2_match_context_free);
    pcre2_set_match_limit(context.get(), 10'000'000);
    pcre2_set_depth_limit(context.get(), 100'000);
    return Regex{std::shared_ptr<pcre2_code>(code, pcre2_code_free), std::move(context)};
  }

  // [begin, end) of every non-overlapping match in `text`.
  std::vector<std::pair<std::size_t, std::size_t>> FindAll(std::string_view text) const {
    std::vector<std::pair<std::size_t, std::size_t>> matches;
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(pcre2_match_data_create_from_pattern(code.get(), nullptr),
                                                                             pcre2_match_data_free);
    std::size_t start = 0;
    while (start <= text.size()) {
      const int rc = pcre2_match(code.get(), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start, 0, data.get(), context.get());
      if (rc == PCRE2_ERROR_NOMATCH) break;  // the rest is one gap
      if (rc < 0) {
        std::array<PCRE2_UCHAR, 256> message{};
        pcre2_get_error_message(rc, message.data(), message.size());
        throw ModelError(fmt::format("tokenizer: pre-tokenizer regex failed: {}", reinterpret_cast<const char*>(message.data())));
      }
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
      const std::size_t b = ovector[0];
      const std::size_t e = ovector[1];
      if (e > b) {
        matches.emplace_back(b, e);
        start = e;
      } else {  // empty match: step over one character
        if (b >= text.size()) break;
        start = b + Utf8Length(text, b);
      }
    }
    return matches;
  }
};

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel } kind = Kind::kSplit;
  Regex regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;
};

struct AddedToken {
  std::string content;
  TokenId id = 0;
  bool special = false;
};

constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A token id from JSON: an integer in [0, 10M] (no float, which would be UB to convert).
TokenId ReadTokenId(const json& value, std::string_view where) {
  if (!value.is_number_integer()) throw ModelError(fmt::format("{}: token id must be an integer, got {}", where, value.dump()));
  const auto id = value.get<std::int64_t>();
  if (id < 0 || id > 10'000'000) throw ModelError(fmt::format("{}: token id {} is out of range", where, id));
  return static_cast<TokenId>(id);
}

std::uint64_t PairKey(TokenId a, TokenId b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

}  // namespace

const std::string& ByteLevelText(std::uint8_t byte) { return Bytes().byte_to_utf8[byte]; }

struct Tokenizer::Impl {
  std::string source;
  std::unordered_map<std::string, TokenId> vocab;                     // content (byte-level alphabet) → id
  std::vector<std::string> id_bytes;                                  // id → raw bytes
  std::vector<std::uint8_t> id_kind;                                  // 0 unknown, 1 vocab, 2 added, 3 special
  std::array<TokenId, 256> byte_token{};                              // raw byte → its single-byte token
  std::unordered_map<std::uint64_t, std::pair<int, TokenId>> merges;  // (left, right) → (rank, merged)
  std::vector<AddedToken> added;                                      // sorted by content length, longest first
  std::array<std::vector<std::size_t>, 256> added_by_first_byte;
  std::vector<PreTokenizerStep> steps;
  bool ignore_merges = false;

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<TokenId>> cache;

  void PreTokenize(std::string_view text, std::vector<std::string>& pieces) const;
  void EncodePiece(const std::string& piece, std::vector<TokenId>& out) const;
  std::vector<TokenId> Bpe(const std::string& piece) const;
};

namespace {

std::vector<std::string> ApplySplit(const PreTokenizerStep& step, const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  for (const std::string& piece : pieces) {
    // Segments in order, each flagged as a match of the pattern or a gap between matches.
    std::vector<std::pair<std::string_view, bool>> segments;
    std::size_t pos = 0;
    const std::string_view text(piece);
    for (const auto& [b, e] : step.regex.FindAll(text)) {
      if (b > pos) segments.emplace_back(text.substr(pos, b - pos), false);
      segments.emplace_back(text.substr(b, e - b), true);
      pos = e;
    }
    if (pos < text.size()) segments.emplace_back(text.substr(pos), false);
    if (step.invert) {
      for (auto& s : segments) s.second = !s.second;
    }
    switch (step.behavior) {
      case SplitBehavior::kIsolated:
        for (const auto& s : segments) out.emplace_back(s.first);
        break;
      case SplitBehavior::kRemoved:
        for (const auto& s : segments) {
          if (!s.second) out.emplace_back(s.first);
        }
        break;
      case SplitBehavior::kMergedWithPrevious: {
        std::string current;
        for (const auto& s : segments) {
          if (s.second && !current.empty()) {
            current += s.first;
            out.push_back(std::move(current));
            current.clear();
          } else if (s.second) {
            out.emplace_back(s.first);
          } else {
            if (!current.empty()) out.push_back(std::move(current));
            current = std::string(s.first);
          }
        }
        if (!current.empty()) out.push_back(std::move(current));
        break;
      }
      case SplitBehavior::kMergedWithNext: {
        std::string pending;
        for (const auto& s : segments) {
          if (s.second) {
            if (!pending.empty()) out.push_back(std::move(pending));
            pending = std::string(s.first);
          } else {
            out.push_back(pending + std::string(s.first));
            pending.clear();
          }
        }
        if (!pending.empty()) out.push_back(std::move(pending));
        break;
      }
    }
  }
  return out;
}

}  // namespace

void Tokenizer::Impl::PreTokenize(std::string_view text, std::vector<std::string>& pieces) const {
  pieces.assign(1, std::string(text));
  for (const PreTokenizerStep& step : steps) {
    if (step.kind == PreTokenizerStep::Kind::kSplit) {
      pieces = ApplySplit(step, pieces);
    } else if (step.add_prefix_space) {
      for (std::string& p : pieces) {
        if (!p.empty() && p[0] != ' ') p.insert(p.begin(), ' ');
      }
    }
  }
}

std::vector<TokenId> Tokenizer::Impl::Bpe(const std::string& piece) const {
  struct Symbol {
    TokenId id;
    int prev;
    int next;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i) {
    symbols.push_back(
        {byte_token[static_cast<unsigned char>(piece[i])], static_cast<int>(i) - 1, i + 1 < piece.size() ? static_cast<int>(i) + 1 : -1});
  }
  struct Candidate {
    int rank;
    int left;
    TokenId left_id;
    TokenId right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int left) {
    if (left < 0 || symbols[static_cast<std::size_t>(left)].next < 0) return;
    const Symbol& l = symbols[static_cast<std::size_t>(left)];
    const Symbol& r = symbols[static_cast<std::size_t>(l.next)];
    const auto it = merges.find(PairKey(l.id, r.id));
    if (it != merges.end()) queue.push({it->second.first, left, l.id, r.id});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<std::size_t>(c.left)];
    if (left.id != c.left_id || left.next < 0) continue;  // stale: the left symbol changed
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    if (right.id != c.right_id) continue;  // stale: the right symbol changed
    left.id = merges.at(PairKey(c.left_id, c.right_id)).second;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = c.left;
    right.id = -1;  // removed
    consider(left.prev);
    consider(c.left);
  }
  std::vector<TokenId> ids;
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
    ids.push_back(symbols[static_cast<std::size_t>(i)].id);
  }
  return ids;
}

void Tokenizer::Impl::EncodePiece(const std::string& piece, std::vector<TokenId>& out) const {
  if (piece.empty()) return;
  {
    std::lock_guard lock(cache_mutex);
    const auto it = cache.find(piece);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<TokenId> ids;
  if (ignore_merges) {
    std::string mapped;
    for (unsigned char b : piece) mapped += Bytes().byte_to_utf8[b];
    const auto it = vocab.find(mapped);
    if (it != vocab.end()) ids.push_back(it->second);
  }
  if (ids.empty()) ids = Bpe(piece);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard lock(cache_mutex);
  if (cache.size() > 100000) cache.clear();  // bounded: long-running servers see unbounded text
  cache.emplace(piece, std::move(ids));
}

std::vector<TokenId> Tokenizer::Encode(std::string_view text, SpecialTokens specials) const {
  const Impl& t = *impl_;
  std::vector<TokenId> out;
  std::vector<std::string> pieces;
  auto encode_plain = [&](std::string_view plain) {
    if (plain.empty()) return;
    t.PreTokenize(plain, pieces);
    for (const std::string& p : pieces) t.EncodePiece(p, out);
  };
  if (specials == SpecialTokens::kAsText) {
    encode_plain(text);
    return out;
  }
  std::size_t plain_start = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const AddedToken* match = nullptr;
    for (std::size_t index : t.added_by_first_byte[static_cast<unsigned char>(text[i])]) {
      const AddedToken& a = t.added[index];
      if (text.compare(i, a.content.size(), a.content) == 0) {
        match = &a;  // candidates are longest first
        break;
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    encode_plain(text.substr(plain_start, i - plain_start));
    out.push_back(match->id);
    i += match->content.size();
    plain_start = i;
  }
  encode_plain(text.substr(plain_start));
  return out;
}

std::string Tokenizer::Decode(std::span<const TokenId> ids, bool skip_special) const {
  std::string out;
  for (TokenId id : ids) {
    if (skip_special && IsSpecial(id)) continue;
    out += TokenBytes(id);
  }
  return out;
}

std::string_view Tokenizer::TokenBytes(TokenId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->id_bytes.size()) return {};
  return impl_->id_bytes[static_cast<std::size_t>(id)];
}

std::optional<TokenId> Tokenizer::Find(std::string_view content) const {
  for (const AddedToken& a : impl_->added) {
    if (a.content == content) return a.id;
  }
  const auto it = impl_->vocab.find(std::string(content));
  if (it == impl_->vocab.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::IsSpecial(TokenId id) const {
  return id >= 0 && static_cast<std::size_t>(id) < impl_->id_kind.size() && impl_->id_kind[static_cast<std::size_t>(id)] == 3;
}

bool Tokenizer::IsAdded(TokenId id) const {
  return id >= 0 && static_cast<std::size_t>(id) < impl_->id_kind.size() && impl_->id_kind[static_cast<std::size_t>(id)] >= 2;
}

int Tokenizer::vocab_size() const { return static_cast<int>(impl_->id_bytes.size()); }

namespace {

void ParsePreTokenizer(const json& node, Tokenizer::Impl& t, const std::string& where) {
  if (node.is_null()) return;
  if (!node.is_object() || !node.contains("type") || !node["type"].is_string()) {
    throw ModelError(fmt::format("{}: must be an object with a 'type'", where));
  }
  const std::string type = node["type"].get<std::string>();
  if (type == "Sequence") {
    const auto& list = node.value("pretokenizers", json::array());
    for (std::size_t i = 0; i < list.size(); ++i) ParsePreTokenizer(list[i], t, fmt::format("{}.pretokenizers[{}]", where, i));
    return;
  }
  PreTokenizerStep step;
  if (type == "Split") {
    const json& pattern = node.value("pattern", json::object());
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      step.regex = Regex::Compile(pattern["Regex"].get<std::string>(), false, where + ".pattern.Regex");
    } else if (pattern.contains("String") && pattern["String"].is_string()) {
      step.regex = Regex::Compile(pattern["String"].get<std::string>(), true, where + ".pattern.String");
    } else {
      throw ModelError(fmt::format("{}.pattern: needs 'Regex' or 'String'", where));
    }
    const std::string behavior = node.value("behavior", std::string("Isolated"));
    if (behavior == "Isolated")
      step.behavior = SplitBehavior::kIsolated;
    else if (behavior == "Removed")
      step.behavior = SplitBehavior::kRemoved;
    else if (behavior == "MergedWithPrevious")
      step.behavior = SplitBehavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext")
      step.behavior = SplitBehavior::kMergedWithNext;
    else
      throw ModelError(fmt::format("{}.behavior: '{}' is not supported", where, behavior));
    step.invert = node.value("invert", false);
    t.steps.push_back(std::move(step));
  } else if (type == "ByteLevel") {
    if (node.value("use_regex", true)) {
      PreTokenizerStep split;
      split.regex = Regex::Compile(kGpt2Pattern, false, where + " (GPT-2 pattern)");
      t.steps.push_back(std::move(split));
    }
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = node.value("add_prefix_space", false);
    t.steps.push_back(std::move(step));
  } else {
    throw ModelError(fmt::format("{}: pre-tokenizer type '{}' is not supported (Sequence, Split, ByteLevel)", where, type));
  }
}

void CheckNormalizer(const json& node, const std::string& where) {
  if (node.is_null()) return;
  const std::string type = node.value("type", std::string());
  if (type == "Sequence" && node.value("normalizers", json::array()).empty()) return;
  throw ModelError(fmt::format("{}: normalizer '{}' is not supported (only none)", where, node.dump().substr(0, 80)));
}

void CheckDecoder(const json& node, const std::string& where) {
  if (node.is_null()) return;
  const std::string type = node.value("type", std::string());
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    for (const json& d : node.value("decoders", json::array())) CheckDecoder(d, where);
    return;
  }
  throw ModelError(fmt::format("{}: decoder '{}' is not supported (ByteLevel)", where, type));
}

}  // namespace

Tokenizer Tokenizer::FromJson(std::string_view json_text, std::string_view source) {
  auto t = std::make_shared<Impl>();
  t->source = std::string(source);
  const std::string& src = t->source;
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    throw ModelError(fmt::format("{}: not valid JSON: {}", src, e.what()));
  }
  if (!doc.is_object()) throw ModelError(fmt::format("{}: expected a JSON object", src));
  try {
    const json& model = doc.at("model");
    if (model.value("type", std::string()) != "BPE") {
      throw ModelError(fmt::format("{}: model.type '{}' is not supported (only BPE)", src, model.value("type", std::string("?"))));
    }
    if (model.value("byte_fallback", false)) throw ModelError(fmt::format("{}: model.byte_fallback is not supported", src));
    t->ignore_merges = model.value("ignore_merges", false);
    CheckNormalizer(doc.value("normalizer", json()), src + ": normalizer");
    CheckDecoder(doc.value("decoder", json()), src + ": decoder");

    auto grow = [&](TokenId id) {
      if (static_cast<std::size_t>(id) >= t->id_bytes.size()) {
        t->id_bytes.resize(static_cast<std::size_t>(id) + 1);
        t->id_kind.resize(static_cast<std::size_t>(id) + 1, 0);
      }
    };
    for (const auto& [content, id_json] : model.at("vocab").items()) {
      const TokenId id = ReadTokenId(id_json, fmt::format("{}: model.vocab['{}']", src, content));
      grow(id);
      t->vocab[content] = id;
      // Byte-level content maps back to raw bytes one code point at a time. Entries
      // outside that alphabet (special tokens also listed in the vocab) stand for
      // their own text; BPE never produces them.
      std::string raw;
      for (std::size_t i = 0; i < content.size();) {
        const std::size_t n = Utf8Length(content, i);
        const auto it = Bytes().utf8_to_byte.find(content.substr(i, n));
        if (it == Bytes().utf8_to_byte.end()) {
          raw = content;
          break;
        }
        raw += static_cast<char>(it->second);
        i += n;
      }
      t->id_bytes[static_cast<std::size_t>(id)] = std::move(raw);
      t->id_kind[static_cast<std::size_t>(id)] = 1;
    }
    for (int b = 0; b < 256; ++b) {
      const auto it = t->vocab.find(Bytes().byte_to_utf8[static_cast<std::size_t>(b)]);
      if (it == t->vocab.end()) throw ModelError(fmt::format("{}: vocab lacks the token for byte 0x{:02x}", src, b));
      t->byte_token[static_cast<std::size_t>(b)] = it->second;
    }
    const json& merges = model.at("merges");
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
      const json& m = merges[rank];
      std::string left, right;
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const auto space = s.find(' ');
        if (space == std::string::npos) throw ModelError(fmt::format("{}: merge {} '{}' has no space", src, rank, s));
        left = s.substr(0, space);
        right = s.substr(space + 1);
      } else if (m.is_array() && m.size() == 2) {
        left = m[0].get<std::string>();
        right = m[1].get<std::string>();
      } else {
        throw ModelError(fmt::format("{}: merge {} is neither \"a b\" nor [a, b]", src, rank));
      }
      const auto l = t->vocab.find(left), r = t->vocab.find(right), merged = t->vocab.find(left + right);
      if (l == t->vocab.end() || r == t->vocab.end() || merged == t->vocab.end()) {
        throw ModelError(fmt::format("{}: merge {} ('{}' + '{}') uses a token missing from the vocab", src, rank, left, right));
      }
      t->merges.try_emplace(PairKey(l->second, r->second), static_cast<int>(rank), merged->second);
    }

    for (const json& a : doc.value("added_tokens", json::array())) {
      AddedToken token{a.at("content").get<std::string>(), ReadTokenId(a.at("id"), src + ": added_tokens[].id"), a.value("special", false)};
      if (token.content.empty()) throw ModelError(fmt::format("{}: added token {} has empty content", src, token.id));
      if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false)) {
        throw ModelError(fmt::format("{}: added token '{}' uses lstrip/rstrip/single_word, which is not supported", src, token.content));
      }
      grow(token.id);
      t->id_bytes[static_cast<std::size_t>(token.id)] = token.content;
      t->id_kind[static_cast<std::size_t>(token.id)] = token.special ? 3 : 2;
      t->added.push_back(std::move(token));
    }
    std::stable_sort(t->added.begin(), t->added.end(),
                     [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
    for (std::size_t i = 0; i < t->added.size(); ++i) {
      t->added_by_first_byte[static_cast<unsigned char>(t->added[i].content[0])].push_back(i);
    }
    ParsePreTokenizer(doc.value("pre_tokenizer", json()), *t, src + ": pre_tokenizer");
  } catch (const json::exception& e) {
    throw ModelError(fmt::format("{}: unexpected structure: {}", src, e.what()));
  }
  return Tokenizer(std::move(t));
}

Tokenizer Tokenizer::Load(const std::filesystem::path& tokenizer_json) {
  return FromJson(ReadTextFile(tokenizer_json), tokenizer_json.string());
}

}  // namespace tandem::rt
