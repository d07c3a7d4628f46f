#include <cstdio>
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

namespace {

// --jsonl: one JSON string per input line, one JSON array of ids per output line.
void TokenizeLines(const std::string& model, const std::string& path, SpecialTokens specials) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot open", path));
  const Tokenizer tokenizer = Tokenizer::Load(std::filesystem::path(model) / "tokenizer.json");
  std::string line;
  std::string out;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    nlohmann::json text;
    try {
      text = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw std::invalid_argument(fmt::format("{}:{}: not a JSON string: {}", path, number, e.what()));
    }
    if (!text.is_string())
      throw std::invalid_argument(fmt::format("{}:{}: expected a JSON string, got {}", path, number, text.type_name()));
    out = nlohmann::json(tokenizer.Encode(text.get<std::string>(), specials)).dump();
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
}

}  // namespace

void AddTokenizeCommand(CLI::App& app) {
  struct Options {
    std::string model;
    std::string text;
    std::string file;
    std::string jsonl;
    bool chat = false;
    bool parse_special = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text as a JSON array (no BOS unless --chat)");
  cmd->add_option("--model", opt->model, "Checkpoint directory (its tokenizer.json)")->required();
  auto* text = cmd->add_option("--text", opt->text, "Text to tokenize");
  auto* file = cmd->add_option("--file", opt->file, "File whose bytes to tokenize");
  auto* jsonl = cmd->add_option("--jsonl", opt->jsonl,
                                "Many texts at once: each line of this file is one JSON string; prints one JSON array of ids per line, "
                                "in order (what a training script needs to tokenize a corpus exactly as the runtime does)");
  text->excludes(file);
  jsonl->excludes(text)->excludes(file);
  cmd->add_flag("--chat", opt->chat, "Render the text as one user turn of the chat template first");
  cmd->add_flag("--parse-special", opt->parse_special,
                "Read added tokens (<｜User｜>, <think>, ...) in the text as those tokens, as HF's tokenizer.encode does; by default "
                "the text is only text, as the server treats content (with --chat: the rendered conversation is read whole, "
                "markers typed in the text included)");
  cmd->callback([opt, text, file, jsonl] {
    if (jsonl->count() > 0) {
      if (opt->chat) throw std::invalid_argument("tokenize: --chat does not apply to --jsonl");
      TokenizeLines(opt->model, opt->jsonl, opt->parse_special ? SpecialTokens::kParse : SpecialTokens::kAsText);
      return;
    }
    if (text->count() == 0 && file->count() == 0) throw std::invalid_argument("tokenize: give --text, --file or --jsonl");
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
