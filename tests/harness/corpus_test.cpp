#include "harness/campaign/corpus.hpp"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"
#include "harness/traffic/checks.hpp"

namespace tandem::harness {
namespace {

std::filesystem::path Write(const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("tandem-corpus-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << text;
  return path;
}

TEST(Corpus, ResponseFormatIsSentAsJsonWithItsKeyOrder) {
  const auto file = Write(R"(cases:
  - id: book
    prompt: a book
    response_format:
      type: json_schema
      json_schema:
        strict: true
        schema: {type: object, additionalProperties: false, required: [z, a], properties: {z: {type: integer, maxLength: 3}, a: {enum: ["7", 7, true, null]}}}
    checks: [{json_fields: {keys: [z], types: {z: integer, a: string}}}]
)");
  const Corpus corpus = LoadCorpus(file);
  std::filesystem::remove(file);
  const auto rf = nlohmann::ordered_json::parse(corpus.Case("book").response_format);
  EXPECT_EQ(rf["json_schema"]["strict"], true) << "YAML true is JSON true";
  EXPECT_EQ(rf["json_schema"]["schema"]["properties"].begin().key(), "z") << "key order is kept";
  EXPECT_EQ(rf["json_schema"]["schema"]["properties"]["z"]["maxLength"], 3);
  EXPECT_EQ(rf["json_schema"]["schema"]["properties"]["a"]["enum"], nlohmann::ordered_json::parse(R"(["7", 7, true, null])"))
      << "quoted scalars stay strings";

  const ContentCheck& check = corpus.Case("book").checks.at(0);
  EXPECT_TRUE(RunContentCheck(check, R"({"z": 12, "a": "x"})", 0));
  EXPECT_FALSE(RunContentCheck(check, R"({"z": "12", "a": "x"})", 0)) << "z must be an integer";
  EXPECT_FALSE(RunContentCheck(check, R"({"z": 12, "a": 1})", 0)) << "a must be a string";
  EXPECT_FALSE(RunContentCheck(check, R"({"z": 12})", 0)) << "a typed key must be there";
}

TEST(Corpus, BadResponseFormatOrTypeIsAnErrorNamingTheLine) {
  const auto file = Write("cases:\n  - id: x\n    prompt: p\n    response_format: json\n");
  EXPECT_THROW(
      {
        try {
          LoadCorpus(file);
        } catch (const InputError& e) {
          EXPECT_NE(std::string(e.what()).find(":4:"), std::string::npos) << e.what();
          throw;
        }
      },
      InputError);
  std::ofstream(file) << "cases:\n  - id: x\n    prompt: p\n    checks: [{json_fields: {keys: [a], types: {a: date}}}]\n";
  EXPECT_THROW(LoadCorpus(file), InputError);
  std::filesystem::remove(file);
}

// Ten levels of anchors of nine aliases each grew `tandem run --dry-run` past 12 GB as the
// response_format was expanded; now the expanded size is bounded when the file is read.
TEST(Corpus, AnAliasBombIsRefusedNamingTheLineAndTheLimit) {
  std::string text = "cases:\n  - id: bomb\n    prompt: hi\n    response_format:\n      a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    text += fmt::format("      a{}: &a{} [", i, i);
    for (int k = 0; k < 9; ++k) text += fmt::format("{}*a{}", k == 0 ? "" : ", ", i - 1);
    text += "]\n";
  }
  const auto file = Write(text);
  try {
    LoadCorpus(file);
    ADD_FAILURE() << "the bomb was read";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(file.string() + ":", 0), 0u) << what;
    EXPECT_NE(what.find("more than 1000000 nodes (each use of an alias counts)"), std::string::npos) << what;
  }
  std::filesystem::remove(file);
}

TEST(Corpus, TheReleaseBatterysSchemaCaseSendsItsSchema) {
  const Corpus corpus = LoadCorpus(std::filesystem::path(TANDEM_SOURCE_DIR) / "campaigns/corpus.yaml");
  const auto rf = nlohmann::ordered_json::parse(corpus.Case("json_schema").response_format);
  EXPECT_EQ(rf["type"], "json_schema");
  EXPECT_EQ(rf["json_schema"]["schema"]["required"].size(), 5u);
}

// "Count from 1 to N ... nothing else": exactly 1..N, whitespace between and around.
TEST(Corpus, CountingMeansExactlyOneToN) {
  const ContentCheck counting{.kind = ContentCheck::Kind::kCounting};
  EXPECT_TRUE(RunContentCheck(counting, "1\n2\n3", 3));
  EXPECT_TRUE(RunContentCheck(counting, " 1\r\n2 \n3\n\n", 3));
  EXPECT_FALSE(RunContentCheck(counting, "1\n2\n3\n4", 3)) << "counting on past N";
  EXPECT_FALSE(RunContentCheck(counting, "1\n2\n3\nDone!", 3)) << "words after N";
  EXPECT_FALSE(RunContentCheck(counting, "1\n2\n34", 3));
  EXPECT_FALSE(RunContentCheck(counting, "1\n3\n2", 3));
  EXPECT_FALSE(RunContentCheck(counting, "1\n2", 3));
}

}  // namespace
}  // namespace tandem::harness
