#include "runtime/model/synthetic_tokenizer.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/model/cache_dir.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/tokenizer.hpp"

namespace tandem::rt {

namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;

// DeepSeek-V3's pre-tokenizer: digits in runs of up to three, CJK runs, then the
// main word/punctuation/whitespace pattern; all Isolated, then ByteLevel.
json DeepSeekPreTokenizer() {
  auto split = [](const char* regex) {
    return json{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
  };
  return json{{"type", "Sequence"},
              {"pretokenizers",
               {split(R"(\p{N}{1,3})"), split("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"),
                split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
                      "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"),
                json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
}

// Added tokens a synthetic model keeps: the named ones (DeepSeek-V3 has ~800
// numbered placeholders we drop), plus the thinking markers of R1 / V3.1.
bool KeepAddedToken(const std::string& content) { return content.find("place\u2581holder") == std::string::npos; }
const std::vector<std::string> kExtraAddedTokens = {"<think>", "</think>"};

json ReadJson(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw ModelError(fmt::format("{}: cannot open", path.string()));
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw ModelError(fmt::format("{}: not valid JSON: {}", path.string(), e.what()));
  }
}

json AddedTokenJson(int id, const std::string& content, bool special) {
  return json{{"id", id},        {"content", content},     {"single_word", false}, {"lstrip", false},
              {"rstrip", false}, {"normalized", !special}, {"special", special}};
}

json TokenizerConfig(const std::string& bos, const std::string& eos, const json& source_config) {
  auto token = [](const std::string& content) {
    return json{{"__type", "AddedToken"}, {"content", content}, {"lstrip", false},
                {"normalized", true},     {"rstrip", false},    {"single_word", false}};
  };
  json config = {{"add_bos_token", true},   {"add_eos_token", false},     {"bos_token", token(bos)},
                 {"eos_token", token(eos)}, {"pad_token", token(eos)},    {"clean_up_tokenization_spaces", false},
                 {"legacy", true},          {"model_max_length", 131072}, {"tokenizer_class", "LlamaTokenizerFast"},
                 {"unk_token", nullptr}};
  if (source_config.contains("chat_template")) config["chat_template"] = source_config["chat_template"];
  return config;
}

SyntheticTokenizerFiles ByteLevelFallback(const std::filesystem::path& source_dir) {
  const std::vector<std::pair<std::string, bool>> added = {{"<\uff5cbegin\u2581of\u2581sentence\uff5c>", true},
                                                           {"<\uff5cend\u2581of\u2581sentence\uff5c>", true},
                                                           {"<\uff5c\u2581pad\u2581\uff5c>", true},
                                                           {"<\uff5cUser\uff5c>", false},
                                                           {"<\uff5cAssistant\uff5c>", false},
                                                           {"<think>", false},
                                                           {"</think>", false}};
  json vocab = json::object();
  json added_json = json::array();
  int id = 0;
  for (int i = 0; i < 3; ++i, ++id) {
    vocab[added[i].first] = id;
    added_json.push_back(AddedTokenJson(id, added[i].first, added[i].second));
  }
  for (int b = 0; b < 256; ++b) vocab[ByteLevelText(static_cast<std::uint8_t>(b))] = id++;
  for (std::size_t i = 3; i < added.size(); ++i, ++id) added_json.push_back(AddedTokenJson(id, added[i].first, added[i].second));
  json tokenizer = {{"version", "1.0"},
                    {"truncation", nullptr},
                    {"padding", nullptr},
                    {"added_tokens", added_json},
                    {"normalizer", {{"type", "Sequence"}, {"normalizers", json::array()}}},
                    {"pre_tokenizer", DeepSeekPreTokenizer()},
                    {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
                    {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
                    {"model",
                     {{"type", "BPE"},
                      {"dropout", nullptr},
                      {"unk_token", nullptr},
                      {"continuing_subword_prefix", nullptr},
                      {"end_of_word_suffix", nullptr},
                      {"fuse_unk", false},
                      {"byte_fallback", false},
                      {"vocab", vocab},
                      {"merges", json::array()}}}};
  SyntheticTokenizerFiles files;
  files.tokenizer_json = tokenizer.dump() + "\n";
  files.tokenizer_config_json = TokenizerConfig(added[0].first, added[1].first, json::object()).dump(2) + "\n";
  files.vocab_size = id;
  files.byte_level_fallback = true;
  files.description = fmt::format(
      "byte-level vocabulary of {} tokens (no merges): the DeepSeek-V3 tokenizer was not found in {}; scripts/setup "
      "installs it there from the repository (models/tokenizers/deepseek-v3)",
      id, source_dir.string());
  return files;
}

}  // namespace

std::filesystem::path DefaultTokenizerSource() { return TandemCacheDir() / "tokenizers" / "deepseek-v3"; }

SyntheticTokenizerFiles DeriveSyntheticTokenizer(const std::filesystem::path& source_dir, int merges) {
  if (!std::filesystem::exists(source_dir / "tokenizer.json") || !std::filesystem::exists(source_dir / "tokenizer_config.json")) {
    return ByteLevelFallback(source_dir);
  }
  const json source = ReadJson(source_dir / "tokenizer.json");
  const json source_config = ReadJson(source_dir / "tokenizer_config.json");
  const std::string where = (source_dir / "tokenizer.json").string();
  try {
    const json& vocab = source.at("model").at("vocab");
    const json& all_merges = source.at("model").at("merges");

    // Original ids to keep, with their contents: bytes, then merge results whose
    // parts are already kept.
    std::map<int, std::string> kept;
    std::set<std::string> have;
    for (int b = 0; b < 256; ++b) {
      const std::string ch = ByteLevelText(static_cast<std::uint8_t>(b));
      kept[vocab.at(ch).get<int>()] = ch;
      have.insert(ch);
    }
    json kept_merges = json::array();
    for (std::size_t i = 0; i < all_merges.size() && kept_merges.size() < static_cast<std::size_t>(merges); ++i) {
      const json& m = all_merges[i];
      const std::string text = m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>();
      const auto space = text.find(' ');
      const std::string left = text.substr(0, space), right = text.substr(space + 1);
      if (!have.contains(left) || !have.contains(right)) continue;
      const std::string merged = left + right;
      kept[vocab.at(merged).get<int>()] = merged;
      have.insert(merged);
      kept_merges.push_back(text);
    }
    std::vector<std::pair<int, const json*>> added;
    for (const json& a : source.at("added_tokens")) {
      if (KeepAddedToken(a.at("content").get<std::string>())) added.emplace_back(a.at("id").get<int>(), &a);
    }
    std::sort(added.begin(), added.end(), [](const auto& a, const auto& b) { return a.first < b.first; });

    // Renumber densely in original id order: added tokens below the first vocab id
    // (BOS, EOS, pad) keep their place at the front.
    json new_vocab = json::object();
    json new_added = json::array();
    int next = 0;
    std::size_t a = 0;
    auto emit_added = [&](const json& token) {
      const std::string content = token.at("content").get<std::string>();
      const bool special = token.value("special", false);
      if (vocab.contains(content)) new_vocab[content] = next;
      new_added.push_back(AddedTokenJson(next++, content, special));
    };
    for (const auto& [old_id, content] : kept) {
      while (a < added.size() && added[a].first < old_id) emit_added(*added[a++].second);
      new_vocab[content] = next++;
    }
    while (a < added.size()) emit_added(*added[a++].second);
    for (const std::string& extra : kExtraAddedTokens) new_added.push_back(AddedTokenJson(next++, extra, false));

    json tokenizer = source;
    tokenizer["added_tokens"] = new_added;
    tokenizer["model"]["vocab"] = new_vocab;
    tokenizer["model"]["merges"] = kept_merges;
    const std::string bos = source_config.at("bos_token").is_string() ? source_config["bos_token"].get<std::string>()
                                                                      : source_config["bos_token"].at("content").get<std::string>();
    const std::string eos = source_config.at("eos_token").is_string() ? source_config["eos_token"].get<std::string>()
                                                                      : source_config["eos_token"].at("content").get<std::string>();
    SyntheticTokenizerFiles files;
    files.tokenizer_json = tokenizer.dump() + "\n";
    files.tokenizer_config_json = TokenizerConfig(bos, eos, source_config).dump(2) + "\n";
    files.vocab_size = next;
    files.description = fmt::format("DeepSeek-V3 tokenizer cut to {} merges: {} tokens", kept_merges.size(), next);
    return files;
  } catch (const json::exception& e) {
    throw ModelError(fmt::format("{}: unexpected structure: {}", where, e.what()));
  }
}

}  // namespace tandem::rt
