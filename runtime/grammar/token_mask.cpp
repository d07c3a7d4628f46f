#include "runtime/grammar/token_mask.hpp"

#include <algorithm>
#include <limits>

#include "runtime/model/utf8.hpp"

namespace tandem::rt {

namespace {

// Printable characters other than the quote and the backslash, in whole, valid UTF-8
// sequences: what JsonMatcher::InPlainString accepts without changing state.
bool PlainStringBytes(std::string_view bytes) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F || c == '"' || c == '\\') return false;
      ++i;
      continue;
    }
    const std::size_t length = Utf8SequenceLength(c);
    if (length < 2) return false;
    if (i + length > bytes.size()) return false;  // the sequence continues in another token
    for (std::size_t k = 1; k < length; ++k) {
      if (!Utf8ValidContinuation(c, k, static_cast<unsigned char>(bytes[i + k]))) return false;
    }
    i += length;
  }
  return true;
}

}  // namespace

void TokenTrie::Insert(Trie& trie, std::string_view bytes, TokenId id) {
  int at = 0;
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    auto& kids = trie[static_cast<std::size_t>(at)].children;
    const auto it = std::lower_bound(kids.begin(), kids.end(), c, [](const auto& kid, unsigned char b) { return kid.first < b; });
    if (it != kids.end() && it->first == c) {
      at = it->second;
    } else {
      const int next = static_cast<int>(trie.size());
      kids.insert(it, {c, next});
      trie.emplace_back();  // invalidates `kids`: not used after this
      at = next;
    }
  }
  trie[static_cast<std::size_t>(at)].tokens.push_back(id);
}

TokenTrie::TokenTrie(const Tokenizer& tokenizer, int vocab_size)
    : vocab_(vocab_size),
      all_(1),
      special_(1),
      plain_(static_cast<std::size_t>(vocab_size), 0),
      eligible_(static_cast<std::size_t>(vocab_size), 0) {
  for (TokenId id = 0; id < vocab_size; ++id) {
    if (tokenizer.IsSpecial(id) || tokenizer.IsAdded(id)) continue;
    const std::string_view bytes = tokenizer.TokenBytes(id);
    if (bytes.empty()) continue;
    Insert(all_, bytes, id);
    eligible_[static_cast<std::size_t>(id)] = 1;
    if (PlainStringBytes(bytes)) {
      plain_[static_cast<std::size_t>(id)] = 1;
    } else {
      Insert(special_, bytes, id);
    }
  }
}

void TokenTrie::Allowed(const JsonMatcher& matcher, std::vector<std::uint8_t>& allowed) const {
  // Inside an unlimited string every plain token is allowed as it is; only the others
  // (quotes, escapes, control bytes, partial UTF-8) need the matcher.
  if (matcher.InPlainString()) {
    allowed = plain_;
    Walk(special_, matcher, allowed);
    return;
  }
  allowed.assign(static_cast<std::size_t>(vocab_), 0);
  Walk(all_, matcher, allowed);
}

void TokenTrie::Walk(const Trie& trie, const JsonMatcher& matcher, std::vector<std::uint8_t>& allowed) const {
  // Depth-first with one matcher per depth, reused (copy-assignment keeps their
  // buffers), so the walk allocates nothing once it has been as deep once.
  thread_local std::vector<JsonMatcher> states;
  thread_local std::vector<std::pair<int, std::size_t>> path;  // (node, next child) per depth
  states.clear();
  states.push_back(matcher);
  path.assign(1, {0, 0});
  while (!path.empty()) {
    auto& [node, next] = path.back();
    const Node& n = trie[static_cast<std::size_t>(node)];
    if (next == n.children.size()) {
      path.pop_back();
      continue;
    }
    const auto [byte, child] = n.children[next++];
    const std::size_t depth = path.size();
    if (states.size() <= depth) {
      states.push_back(states[depth - 1]);
    } else {
      states[depth] = states[depth - 1];
    }
    if (!states[depth].Accept(byte)) continue;
    for (TokenId id : trie[static_cast<std::size_t>(child)].tokens) allowed[static_cast<std::size_t>(id)] = 1;
    path.push_back({child, 0});
  }
}

void TokenTrie::Mask(const JsonMatcher& matcher, TokenId eos, std::span<float> logits) const {
  thread_local std::vector<std::uint8_t> allowed;  // reused: this runs for every constrained row
  Allowed(matcher, allowed);
  const bool end = matcher.Complete();
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const bool ok = static_cast<TokenId>(i) == eos ? end : i < allowed.size() && allowed[i] != 0;
    if (!ok) logits[i] = -std::numeric_limits<float>::infinity();
  }
}

}  // namespace tandem::rt
