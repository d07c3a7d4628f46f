#include "harness/traffic/context_text.hpp"

#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "common/input_error.hpp"
#include "common/sha256.hpp"
#include "runtime/model/utf8.hpp"

namespace tandem::harness {

namespace {

// Whether `b` continues a multi-byte UTF-8 character (10xxxxxx).
bool Continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// The whole characters of `text`: a token run may start or end inside a multi-byte character
// (byte-level BPE splits them), and a request body must be valid UTF-8.
std::string WholeCharacters(std::string text) {
  std::size_t start = 0;
  while (start < text.size() && Continuation(static_cast<unsigned char>(text[start]))) ++start;
  text.erase(0, start);
  // Drop a last character whose bytes are not all there.
  std::size_t last = text.size();
  while (last > 0 && Continuation(static_cast<unsigned char>(text[last - 1]))) --last;
  if (last > 0) {
    const auto lead = static_cast<unsigned char>(text[last - 1]);
    const std::size_t need = std::max<std::size_t>(1, rt::Utf8SequenceLength(lead));
    if (text.size() - (last - 1) < need) text.erase(last - 1);
  }
  return text;
}

// Whether `text` is UTF-8, by the rules the detokenizer and the JSON grammar share.
bool IsUtf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t n = rt::Utf8SequenceLength(lead);
    if (n == 0 || i + n > text.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if (!rt::Utf8ValidContinuation(lead, k, static_cast<unsigned char>(text[i + k]))) return false;
    }
    i += n;
  }
  return true;
}

std::string Join(std::string_view lead, std::string_view text, std::string_view tail) {
  std::string whole(lead);
  whole += text;
  whole += tail;
  return whole;
}

}  // namespace

ContextSource ContextSource::Load(const std::filesystem::path& file, const std::string& sha256, const rt::Tokenizer& tokenizer) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: the context source cannot be read", file.string()));
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().empty()) throw InputError(fmt::format("{}: the context source is empty", file.string()));
  if (!IsUtf8(text.str())) throw InputError(fmt::format("{}: the context source is not UTF-8 text", file.string()));
  if (!sha256.empty() && Sha256Hex(text.str()) != sha256) {
    throw InputError(fmt::format("{}: the context source changed since the campaign started (its sha256 was {}); restore it", file.string(),
                                 sha256.substr(0, 16)));
  }
  // The cycled source joins its end to its start with a paragraph break.
  return ContextSource(file, tokenizer, tokenizer.Encode(text.str() + "\n\n"));
}

std::string ContextSource::Cut(int offset, int count) const {
  std::vector<rt::TokenId> ids;
  ids.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) ids.push_back(ids_[static_cast<std::size_t>(offset + i) % ids_.size()]);
  return WholeCharacters(tokenizer_.Decode(ids));
}

int ContextSource::Count(std::string_view lead, std::string_view text, std::string_view tail) const {
  return static_cast<int>(tokenizer_.Encode(Join(lead, text, tail)).size());
}

std::string ContextSource::Fit(std::string_view lead, int tokens, std::string_view tail, int offset) const {
  if (tokens < 0) throw InputError(fmt::format("{}: a prompt of {} tokens was asked for", file_.string(), tokens));
  const int lead_tokens = Count(lead, "", tail);
  if (lead_tokens > tokens) {
    throw InputError(
        fmt::format("{}: a prompt of {} tokens was asked for, but its fixed part alone is {} tokens", file_.string(), tokens, lead_tokens));
  }
  // Decoded tokens re-encode to themselves but where the cut or the join with `lead`
  // merges differently: correct the count by the difference until it lands.
  int k = tokens - lead_tokens;
  std::set<int> tried;
  std::string text;
  while (tried.insert(k).second) {
    text = Cut(offset, k);
    const int n = Count(lead, text, tail);
    if (n == tokens) return Join(lead, text, tail);
    k = std::max(0, k + tokens - n);
  }
  // The count jumps over the target at a token cut (a character of several tokens): cut by
  // characters near the end instead, then make up what is missing with ASCII, a token a
  // character at a time.
  std::string best;
  for (int drop = 0; drop <= 64 && drop <= static_cast<int>(text.size()); ++drop) {
    const std::string shorter = WholeCharacters(text.substr(0, text.size() - static_cast<std::size_t>(drop)));
    const int n = Count(lead, shorter, tail);
    if (n == tokens) return Join(lead, shorter, tail);
    if (n < tokens) {
      best = shorter;
      break;
    }
  }
  int n = Count(lead, best, tail);
  for (int step = 0; step < 256 && n < tokens; ++step) {
    bool grew = false;
    for (const char* filler : {" ", ".", "\n", "a", "-", " x", ","}) {
      if (Count(lead, best + filler, tail) == n + 1) {
        best += filler;
        ++n;
        grew = true;
        break;
      }
    }
    if (n == tokens) return Join(lead, best, tail);
    if (grew || best.empty()) continue;
    // Nothing adds exactly one token after this character: step back one character.
    best = WholeCharacters(best.substr(0, best.size() - 1));
    n = Count(lead, best, tail);
  }
  throw InputError(
      fmt::format("{}: no cut of the source makes a prompt of exactly {} tokens; use another source text", file_.string(), tokens));
}

}  // namespace tandem::harness
