#include "runtime/model/chat_template.hpp"

#include <fstream>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/model/model_error.hpp"

namespace tandem::rt {

namespace {

// bos_token / eos_token are a string or an AddedToken object {"content": ...}.
std::string TokenText(const nlohmann::json& config, const char* key, const std::string& where) {
  const auto it = config.find(key);
  if (it == config.end()) throw ModelError(fmt::format("{}: '{}' is missing", where, key));
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  throw ModelError(fmt::format("{}: '{}' must be a string or an object with 'content'", where, key));
}

}  // namespace

ChatTemplate ChatTemplate::Load(const std::filesystem::path& checkpoint_dir) {
  const auto path = checkpoint_dir / "tokenizer_config.json";
  std::ifstream in(path);
  if (!in) throw ModelError(fmt::format("{}: cannot open", path.string()));
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw ModelError(fmt::format("{}: not valid JSON: {}", path.string(), e.what()));
  }
  return ChatTemplate(TokenText(config, "bos_token", path.string()), TokenText(config, "eos_token", path.string()));
}

std::vector<PromptSegment> ChatTemplate::Segments(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                                  bool thinking) const {
  std::vector<PromptSegment> out;
  const auto add = [&](std::string_view text, bool markup) {
    if (text.empty()) return;
    if (!out.empty() && out.back().markup == markup) {
      out.back().text += text;
    } else {
      out.push_back({std::string(text), markup});
    }
  };
  add(bos_, true);
  bool first_system = true;
  for (const ChatMessage& m : messages) {
    if (m.role != "system") continue;
    if (!first_system) add("\n\n", false);
    add(m.content, false);
    first_system = false;
  }
  for (const ChatMessage& m : messages) {
    if (m.role == "system") continue;
    if (m.role == "user") {
      add(kUser, true);
      add(m.content, false);
    } else if (m.role == "assistant") {
      add(kAssistant, true);
      add(m.content, false);
      add(eos_, true);
    } else {
      throw ModelError(fmt::format("chat: role '{}' is not supported (system, user, assistant)", m.role));
    }
  }
  if (add_generation_prompt) {
    add(kAssistant, true);
    if (thinking) add(kThinkBegin, true);
  }
  return out;
}

std::vector<TokenId> ChatTemplate::Encode(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                          bool thinking) const {
  std::vector<TokenId> ids;
  for (const PromptSegment& s : Segments(messages, add_generation_prompt, thinking)) {
    const std::vector<TokenId> part = tokenizer.Encode(s.text, s.markup ? SpecialTokens::kParse : SpecialTokens::kAsText);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

std::string ChatTemplate::Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt, bool thinking) const {
  std::string text;
  for (const PromptSegment& s : Segments(messages, add_generation_prompt, thinking)) text += s.text;
  return text;
}

}  // namespace tandem::rt
