#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::rt {

using TokenId = std::int32_t;

// The printable UTF-8 text ByteLevel (GPT-2's reversible byte → code point map)
// writes for one raw byte.
const std::string& ByteLevelText(std::uint8_t byte);

// Whether Encode looks for the tokenizer's added tokens in a text: every
// `added_tokens` entry, special or not (DeepSeek's role markers "<｜User｜>" and
// "<｜Assistant｜>" are added tokens with "special": false, as is "<think>").
enum class SpecialTokens {
  kAsText,  // the text is only text: a marker typed in it is the marker's bytes
  kParse,   // markers in the text become their tokens, as HF's tokenizer.encode does
};

// An HF tokenizer.json byte-level BPE tokenizer: with SpecialTokens::kParse added
// tokens are split out first (leftmost, longest); then the pre-tokenizer (a Sequence
// of Split regexes, PCRE2 with Unicode classes, and ByteLevel) cuts the text into
// pieces, and each piece is byte-mapped and merged by BPE rank. Cheap to copy
// (shared, immutable).
class Tokenizer {
 public:
  // Throws ModelError naming `source` and the key that cannot be used.
  static Tokenizer FromJson(std::string_view json_text, std::string_view source);
  static Tokenizer Load(const std::filesystem::path& tokenizer_json);

  // Token ids for `text`, without BOS. Text that is not valid UTF-8 still
  // encodes: invalid bytes become byte tokens. Text from a user (a message, a
  // completion prompt) is kAsText, so nobody can type a role marker; kParse is for
  // markup that means its markers (a chat template's own: ChatTemplate::Encode).
  std::vector<TokenId> Encode(std::string_view text, SpecialTokens specials = SpecialTokens::kAsText) const;

  // The bytes `ids` stand for. Ids outside the vocabulary decode to nothing.
  std::string Decode(std::span<const TokenId> ids, bool skip_special = false) const;
  // The bytes one token stands for (empty for an unknown id).
  std::string_view TokenBytes(TokenId id) const;

  // The id of a vocabulary or added token, by its tokenizer.json content.
  std::optional<TokenId> Find(std::string_view content) const;
  bool IsSpecial(TokenId id) const;
  bool IsAdded(TokenId id) const;
  // One more than the largest id.
  int vocab_size() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace tandem::rt
