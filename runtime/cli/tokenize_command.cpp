#include <fstream>
#include <memory>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/cli/commands.hpp"
#include "runtime/model/chat_template.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/tokenizer.hpp"

namespace tandem::rt::cli {

void AddTokenizeCommand(CLI::App& app) {
  struct Options {
    std::string model;
    std::string text;
    std::string file;
    bool chat = false;
    bool parse_special = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text as a JSON array (no BOS unless --chat)");
  cmd->add_option("--model", opt->model, "Checkpoint directory (its tokenizer.json)")->required();
  auto* text = cmd->add_option("--text", opt->text, "Text to tokenize");
  auto* file = cmd->add_option("--file", opt->file, "File whose bytes to tokenize");
  text->excludes(file);
  cmd->add_flag("--chat", opt->chat, "Render the text as one user turn of the chat template first");
  cmd->add_flag("--parse-special", opt->parse_special,
                "Read added tokens (<｜User｜>, <think>, ...) in the text as those tokens, as HF's tokenizer.encode does; by default "
                "the text is only text, as the server treats content (with --chat: the rendered conversation is read whole, "
                "markers typed in the text included)");
  cmd->callback([opt, text, file] {
    if (text->count() == 0 && file->count() == 0) throw std::invalid_argument("tokenize: give --text or --file");
    std::string input = opt->text;
    if (file->count() > 0) {
      std::ifstream in(opt->file, std::ios::binary);
      if (!in) throw std::invalid_argument(fmt::format("{}: cannot open", opt->file));
      std::ostringstream bytes;
      bytes << in.rdbuf();
      input = bytes.str();
    }
    const Tokenizer tokenizer = Tokenizer::Load(std::filesystem::path(opt->model) / "tokenizer.json");
    const SpecialTokens specials = opt->parse_special ? SpecialTokens::kParse : SpecialTokens::kAsText;
    std::vector<TokenId> ids;
    if (opt->chat) {
      const ChatTemplate chat = ChatTemplate::Load(opt->model);
      const std::vector<ChatMessage> messages = {ChatMessage{"user", input}};
      ids = opt->parse_special ? tokenizer.Encode(chat.Render(messages), specials) : chat.Encode(tokenizer, messages);
    } else {
      ids = tokenizer.Encode(input, specials);
    }
    fmt::print("{}\n", nlohmann::json(ids).dump());
  });
}

}  // namespace tandem::rt::cli
