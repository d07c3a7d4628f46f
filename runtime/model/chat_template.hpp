#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tandem::rt {

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};

// DeepSeek's chat format, as its tokenizer_config.json template renders plain
// conversations: BOS, the system prompts joined by blank lines, then
// "<｜User｜>" + content per user turn and "<｜Assistant｜>" + content + EOS per
// assistant turn, ending with "<｜Assistant｜>" when a reply is wanted.
class ChatTemplate {
 public:
  // Reads bos_token and eos_token from <dir>/tokenizer_config.json.
  static ChatTemplate Load(const std::filesystem::path& checkpoint_dir);
  ChatTemplate(std::string bos, std::string eos) : bos_(std::move(bos)), eos_(std::move(eos)) {}

  // Throws ModelError for an unknown role.
  // `thinking`: the generation prompt opens DeepSeek's think block ("<think>").
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
