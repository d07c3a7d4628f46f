#pragma once

#include <string>

#include "runtime/model/tokenizer.hpp"

namespace tandem::rt {

// Turns a stream of token ids into text deltas that are always valid UTF-8: bytes
// of a character split across tokens are held back until the character is
// complete, and bytes that can never form a character become U+FFFD.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}

  // The text that `id` completes (possibly empty).
  std::string Push(TokenId id);
  // Whatever is still held back, with incomplete sequences replaced by U+FFFD.
  std::string Flush();

 private:
  std::string TakeComplete(bool final);

  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace tandem::rt
