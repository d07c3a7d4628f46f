#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/model/tokenizer.hpp"

namespace tandem::harness {

// Prompt text of an exact token count, cut from a source file: the prefill matrix and
// retained context build their prompts to the token, so the server's usage can confirm
// them. A source shorter than asked is cycled.
class ContextSource {
 public:
  // Reads and tokenizes `file`. Throws InputError naming the file when it cannot be read,
  // is empty, or is no longer the text whose sha256 the campaign recorded.
  static ContextSource Load(const std::filesystem::path& file, const std::string& sha256, const rt::Tokenizer& tokenizer);

  // `lead` + T + `tail` where T is the source's text from its `offset`-th token on, cut so
  // that the whole encodes to exactly `tokens` tokens. Throws InputError when `lead` and
  // `tail` alone are longer, or when no cut of the source lands on the count.
  std::string Fit(std::string_view lead, int tokens, std::string_view tail = "", int offset = 0) const;

  const std::filesystem::path& file() const { return file_; }

 private:
  ContextSource(std::filesystem::path file, const rt::Tokenizer& tokenizer, std::vector<rt::TokenId> ids)
      : file_(std::move(file)), tokenizer_(tokenizer), ids_(std::move(ids)) {}
  std::string Cut(int offset, int count) const;  // the source's tokens [offset, offset + count), cycled
  int Count(std::string_view lead, std::string_view text, std::string_view tail) const;

  std::filesystem::path file_;
  rt::Tokenizer tokenizer_;
  std::vector<rt::TokenId> ids_;
};

}  // namespace tandem::harness
