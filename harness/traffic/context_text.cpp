#include "harness/traffic/context_text.hpp"

#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "common/input_error.hpp"
#include "common/sha256.hpp"

namespace tandem::harness {

namespace {

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
  return tokenizer_.Decode(ids);
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
  // The count jumps over the target at a token cut: cut by characters near the end instead.
  for (int drop = 1; drop <= 64 && drop <= static_cast<int>(text.size()); ++drop) {
    const std::string shorter = text.substr(0, text.size() - static_cast<std::size_t>(drop));
    if (Count(lead, shorter, tail) == tokens) return Join(lead, shorter, tail);
  }
  throw InputError(
      fmt::format("{}: no cut of the source makes a prompt of exactly {} tokens; use another source text", file_.string(), tokens));
}

}  // namespace tandem::harness
