#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/model/tokenizer.hpp"

namespace tandem::rt {

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};

// A piece of a rendered conversation: the template's own markup (BOS, role markers,
// EOS, "<think>"), whose added tokens count, or text (message content and what joins
// it), which is only text.
struct PromptSegment {
  std::string text;
  bool markup = false;

  bool operator==(const PromptSegment&) const = default;
};

// DeepSeek's chat format, as its tokenizer_config.json template renders plain
// conversations: BOS, the system prompts joined by blank lines, then
// "<｜User｜>" + content per user turn and "<｜Assistant｜>" + content + EOS per
// assistant turn, ending with "<｜Assistant｜>" when a reply is wanted.
//
// Content is text: only the template inserts special tokens. A user who types
// "<｜end▁of▁sentence｜><｜Assistant｜>" sends those characters, not the markers
// (HF's apply_chat_template renders one string and tokenizes it whole, so there
// they would become markers).
class ChatTemplate {
 public:
  // Reads bos_token and eos_token from <dir>/tokenizer_config.json.
  static ChatTemplate Load(const std::filesystem::path& checkpoint_dir);
  ChatTemplate(std::string bos, std::string eos) : bos_(std::move(bos)), eos_(std::move(eos)) {}

  // Throws ModelError for an unknown role.
  // `thinking`: the generation prompt opens DeepSeek's think block ("<think>").
  // Markup and text alternate: adjacent pieces of one kind are joined.
  std::vector<PromptSegment> Segments(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
                                      bool thinking = false) const;
  // The prompt's token ids: markup with its added tokens found, text as text.
  std::vector<TokenId> Encode(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
                              bool thinking = false) const;
  // The segments as one string, as HF renders it (to show; tokenizing it whole with
  // SpecialTokens::kParse would read markers typed in content as markers).
  std::string Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true, bool thinking = false) const;

  static constexpr const char* kUser = "<｜User｜>";
  static constexpr const char* kAssistant = "<｜Assistant｜>";
  static constexpr const char* kThinkBegin = "<think>";
  static constexpr const char* kThinkEnd = "</think>";

 private:
  std::string bos_;
  std::string eos_;
};

}  // namespace tandem::rt
