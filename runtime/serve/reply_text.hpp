#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/serve/completion_text.hpp"

namespace tandem::rt {

// A reply's text in its two channels: with thinking, every token up to and including
// the think block's closing token is reasoning (reasoning_content), the rest content;
// without, all content. Stop strings apply to the content only.
class ReplyText {
 public:
  struct Piece {
    std::string text;
    bool reasoning = false;
  };

  // `think_end` < 0: no think block.
  ReplyText(const Tokenizer& tokenizer, std::vector<std::string> stop, TokenId think_end);

  // The text that can be emitted after `id`, in order (at most one piece per channel).
  std::vector<Piece> Push(TokenId id);
  // What is still held back, when the reply ends.
  std::vector<Piece> Flush();

  bool reasoning() const { return thinking_; }  // still inside the think block
  int reasoning_tokens() const { return reasoning_tokens_; }
  bool stopped() const { return content_.stopped(); }

 private:
  CompletionText content_;
  std::unique_ptr<CompletionText> thought_;
  TokenId think_end_;
  bool thinking_;
  int reasoning_tokens_ = 0;
};

}  // namespace tandem::rt
