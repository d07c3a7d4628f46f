#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/grammar/json_matcher.hpp"
#include "runtime/model/tokenizer.hpp"

namespace tandem::rt {

// The vocabulary as a byte trie, for masking logits with a JsonMatcher: a token is
// allowed when the matcher accepts all its bytes. Walking the trie shares the work
// of tokens with common prefixes, and a subtree is skipped as soon as its prefix is
// refused. Special and added tokens are never allowed (the end token is handled by
// the caller: allowed exactly when the matcher is Complete()).
class TokenTrie {
 public:
  TokenTrie(const Tokenizer& tokenizer, int vocab_size);

  // allowed[id] = 1 for the tokens `matcher` accepts whole; others 0.
  void Allowed(const JsonMatcher& matcher, std::vector<std::uint8_t>& allowed) const;
  // Sets the logits of tokens the matcher refuses to −∞; `eos` stays when Complete().
  void Mask(const JsonMatcher& matcher, TokenId eos, std::span<float> logits) const;
  // Whether a mask can ever allow `id`: it has bytes and is neither special nor added.
  bool Eligible(TokenId id) const { return id >= 0 && id < vocab_ && eligible_[static_cast<std::size_t>(id)] != 0; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int>> children;  // sorted by byte
    std::vector<TokenId> tokens;                          // tokens whose bytes end here
  };
  using Trie = std::vector<Node>;
  static void Insert(Trie& trie, std::string_view bytes, TokenId id);
  void Walk(const Trie& trie, const JsonMatcher& matcher, std::vector<std::uint8_t>& allowed) const;

  int vocab_ = 0;
  Trie all_;                            // every token
  Trie special_;                        // tokens that are not plain string characters
  std::vector<std::uint8_t> plain_;     // plain_[id]: printable, no quote or backslash, whole UTF-8
  std::vector<std::uint8_t> eligible_;  // eligible_[id]: in `all_`
};

}  // namespace tandem::rt
