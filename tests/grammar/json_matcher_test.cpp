#include "runtime/grammar/json_matcher.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/grammar/token_mask.hpp"
#include "runtime/model/tokenizer.hpp"
#include "tests/grammar/random_schema.hpp"
#include "tests/runtime/tiny_model.hpp"

namespace tandem::rt {
namespace {

using json = nlohmann::ordered_json;

bool Matches(const json& schema, std::string_view text) {
  JsonMatcher m(JsonGrammar::Compile(schema));
  return m.Accept(text) && m.Complete();
}

TEST(JsonMatcher, AcceptsValidDocumentsAndRefusesTheRest) {
  const json person = json::parse(R"({"type": "object", "additionalProperties": false, "required": ["name", "age"],
    "properties": {"name": {"type": "string", "maxLength": 5}, "nick": {"type": "string"}, "age": {"type": "integer"},
                   "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 2}}})");
  EXPECT_TRUE(Matches(person, R"({"name": "Ann", "age": 41})"));
  EXPECT_TRUE(Matches(person, R"({"name":"Ann","nick":"A\n\u00e9","age":-0,"tags":["a",3]})"));
  EXPECT_TRUE(Matches(person, "{ \"name\" : \"Zoë\" ,\n \"age\" : 7 }"));
  EXPECT_FALSE(Matches(person, R"({"name": "Ann"})")) << "age is required";
  EXPECT_FALSE(Matches(person, R"({"age": 41, "name": "Ann"})")) << "properties come in schema order";
  EXPECT_FALSE(Matches(person, R"({"name": "Annabel", "age": 41})")) << "maxLength";
  EXPECT_FALSE(Matches(person, R"({"name": "Ann", "age": 4.5})")) << "integer";
  EXPECT_FALSE(Matches(person, R"({"name": "Ann", "age": 041})")) << "leading zero";
  EXPECT_FALSE(Matches(person, R"({"name": "Ann", "age": 1, "tags": ["c"]})")) << "enum";
  EXPECT_FALSE(Matches(person, R"({"name": "Ann", "age": 1, "tags": ["a", "b", 3]})")) << "maxItems";
  EXPECT_FALSE(Matches(person, R"({"name": "Ann", "age": 1, "x": 2})")) << "additionalProperties: false";
  EXPECT_FALSE(Matches(person, "{\"name\": \"A\x01\", \"age\": 1}")) << "control character in a string";
  EXPECT_FALSE(Matches(person, R"({"name": "Ann", "age": 41} )")) << "nothing after the value";

  EXPECT_TRUE(Matches(json::parse(R"({"type": "number"})"), "-12.5e+3"));
  EXPECT_TRUE(Matches(json::parse(R"({"type": "integer"})"), "-999999999999999999"));
  EXPECT_FALSE(Matches(json::parse(R"({"type": "integer"})"), "1000000000000000000")) << "integers stay within 64 bits";
  EXPECT_TRUE(Matches(json::parse(R"({"type": ["string", "null"]})"), "null"));
  EXPECT_TRUE(Matches(json::parse(R"({"const": {"a": [1, true]}})"), R"({"a":[1,true]})"));
  EXPECT_TRUE(Matches(json::parse(R"({"enum": [1, 12]})"), "12"));
  EXPECT_TRUE(Matches(json::parse(R"({"enum": [1, 12]})"), "1"));
  EXPECT_FALSE(Matches(json::parse(R"({"enum": [1, 12]})"), "13"));
  EXPECT_TRUE(Matches(json::parse(R"({"type": "array", "minItems": 1})"), R"([{"x": [null, "y", 2]}])"));
  EXPECT_FALSE(Matches(json::parse(R"({"type": "array", "minItems": 1})"), "[]"));
  EXPECT_TRUE(Matches(json::parse(R"({"type": "string", "minLength": 2})"), "\"\xe2\x82\xac\\u0041\""));
  EXPECT_FALSE(Matches(json::parse(R"({"type": "string", "minLength": 2})"), "\"\xe2\x82\xac\""));
}

// \u escapes of UTF-16 surrogates only in pairs, as JSON parsers require (nlohmann refuses
// a lone one): a pair is one character of maxLength.
TEST(JsonMatcher, SurrogateEscapesComeInPairs) {
  const json any = json::object();
  EXPECT_TRUE(Matches(any, R"("\ud83d\ude00")"));
  EXPECT_TRUE(Matches(json::parse(R"({"type": "string", "maxLength": 1})"), R"("\ud83d\ude00")"));
  EXPECT_FALSE(Matches(any, R"("0\udddepy")")) << "a lone low surrogate";
  EXPECT_FALSE(Matches(any, R"("\ud83d")")) << "a high surrogate the string ends after";
  EXPECT_FALSE(Matches(any, R"("\ud83dx")")) << "a high surrogate without its low half";
  EXPECT_FALSE(Matches(any, R"("\ud83d\n")"));
  EXPECT_FALSE(Matches(any, R"("\ud83d\ud83d")")) << "two high surrogates";
}

TEST(JsonMatcher, AnyObjectIsAnyJsonObject) {
  JsonMatcher m(JsonGrammar::AnyObject());
  EXPECT_TRUE(m.Accept(R"({"a": {"b": [1, 2.5, "c", false, null, {}]}, "a": []})"));
  EXPECT_TRUE(m.Complete());
  EXPECT_FALSE(JsonMatcher(JsonGrammar::AnyObject()).Accept("[")) << "json_object: the top level is an object";
}

TEST(JsonSchema, UnsupportedFeaturesAreNamed) {
  const auto message = [](const char* text) {
    try {
      JsonGrammar::Compile(json::parse(text));
    } catch (const SchemaError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message(R"({"type": "string", "pattern": "^a"})").find("'pattern' is not supported"), std::string::npos);
  EXPECT_NE(message(R"({"anyOf": [{"type": "string"}]})").find("'anyOf'"), std::string::npos);
  EXPECT_NE(message(R"({"type": "object", "properties": {"a": {"$ref": "#/x"}}, "additionalProperties": false})")
                .find("schema.properties.a: '$ref'"),
            std::string::npos);
  EXPECT_NE(message(R"({"type": "object", "properties": {"a": {}}})").find("additionalProperties"), std::string::npos);
  EXPECT_NE(message(R"({"type": "object", "properties": {"a": {}}, "required": ["b"], "additionalProperties": false})").find("'\"b\"'"),
            std::string::npos);
  EXPECT_NE(message(R"({"type": "strin"})").find("unknown type 'strin'"), std::string::npos);
  EXPECT_NE(message(R"({"type": "string", "minLength": 3, "maxLength": 2})").find("below its minimum"), std::string::npos);
}

TEST(JsonSchema, DepthSizeAndChoicesAreBoundedBeforeAnythingIsBuilt) {
  const auto message = [](const json& schema) {
    try {
      JsonGrammar::Compile(schema);
    } catch (const SchemaError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  // 100,000 nested schemas recursed once per level and overflowed the stack.
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += R"({"type":"array","items":)";
  deep += R"({"type":"string"})" + std::string(100000, '}');
  EXPECT_NE(message(json::parse(deep)).find("schemas nest deeper than 16 levels"), std::string::npos);
  std::string sixteen;
  for (int i = 0; i < 16; ++i) sixteen += R"({"type":"array","items":)";
  sixteen += R"({"type":"string"})" + std::string(16, '}');
  EXPECT_EQ(message(json::parse(sixteen)), "(accepted)");

  json wide = {{"type", "object"}, {"additionalProperties", false}, {"properties", json::object()}};
  for (int i = 0; i < 65; ++i) wide["properties"][fmt::format("p{}", i)] = {{"type", "string"}};
  EXPECT_NE(message(wide).find("'properties' has 65 entries; at most 64"), std::string::npos) << message(wide);
  json many_values = {{"enum", json::array()}};
  for (int i = 0; i < 65; ++i) many_values["enum"].push_back(i);
  EXPECT_NE(message(many_values).find("'enum' has 65 entries"), std::string::npos);

  // Objects of objects: 64 x 64 + 65 = 4161 schemas in all is over the limit, 16 x 16 + 17 is not.
  const auto nested = [](int width) {
    json level = {{"type", "string"}};
    for (int d = 0; d < 2; ++d) {
      json next = {{"type", "object"}, {"additionalProperties", false}, {"properties", json::object()}};
      for (int i = 0; i < width; ++i) next["properties"][fmt::format("p{}", i)] = level;
      level = next;
    }
    return level;
  };
  EXPECT_NE(message(nested(64)).find("more than 1024 schemas in all"), std::string::npos) << message(nested(64));
  EXPECT_EQ(message(nested(16)), "(accepted)");
}

// Walks `trie` with random allowed tokens until the matcher is complete (or gives up
// after `limit` tokens), as constrained sampling from a model with random logits.
std::string RandomConstrainedOutput(const TokenTrie& trie, const Tokenizer& tokenizer, const std::shared_ptr<const JsonGrammar>& g,
                                    std::mt19937& rng, int limit, bool& complete) {
  JsonMatcher m(g);
  std::string out;
  std::vector<std::uint8_t> allowed;
  for (int step = 0; step < limit; ++step) {
    // Past half the budget, stop as soon as the value is complete.
    if (m.Complete() && (step > limit / 2 || !m.CanContinue() || rng() % 4 == 0)) break;
    trie.Allowed(m, allowed);
    std::vector<TokenId> ids;
    for (std::size_t i = 0; i < allowed.size(); ++i) {
      if (allowed[i] != 0) ids.push_back(static_cast<TokenId>(i));
    }
    if (ids.empty()) break;
    // Favour closing brackets and quotes later on, so walks end.
    TokenId id = ids[rng() % ids.size()];
    if (step > limit / 3) {
      for (TokenId candidate : ids) {
        const std::string_view b = tokenizer.TokenBytes(candidate);
        if (b == "}" || b == "]" || b == "\"" || b == "null" || b == "0" || b == "\",") id = rng() % 2 == 0 ? candidate : id;
      }
    }
    const std::string_view bytes = tokenizer.TokenBytes(id);
    EXPECT_TRUE(m.Accept(bytes)) << "the trie allowed a token the matcher refuses";
    out += bytes;
  }
  complete = m.Complete();
  return out;
}

// 50 random schemas × 4 walks through the tiny model's real vocabulary. Every
// finished output must parse and validate; the validation is done independently by
// validate_outputs.py (python3-jsonschema), which CTest runs on the file written here.
TEST(JsonMatcher, RandomSchemasGiveValidOutputs) {
  const Tokenizer tokenizer = Tokenizer::Load(testing::TinyCheckpoint() / "tokenizer.json");
  const TokenTrie trie(tokenizer, tokenizer.vocab_size());
  std::mt19937 rng(2026);
  json cases = json::array();
  int finished = 0;
  for (int s = 0; s < 50; ++s) {
    const json schema = testing::RandomSchema(rng, 3);
    const auto grammar = JsonGrammar::Compile(schema);
    for (int walk = 0; walk < 4; ++walk) {
      bool complete = false;
      const std::string out = RandomConstrainedOutput(trie, tokenizer, grammar, rng, 400, complete);
      if (!complete) continue;
      ++finished;
      const json parsed = json::parse(out, nullptr, false);
      EXPECT_FALSE(parsed.is_discarded()) << "schema " << schema.dump() << "\noutput " << json(out).dump();
      cases.push_back({{"schema", schema}, {"output", out}});
    }
  }
  std::printf("%d of 200 walks finished\n", finished);
  // Measured: 200 of 200 walks finish within 400 tokens (the walk favours ending).
  EXPECT_GE(finished, 150) << "most walks finish within 400 tokens";
  if (const char* dir = std::getenv("TANDEM_GRAMMAR_OUTPUTS"); dir != nullptr && *dir != '\0') {
    std::ofstream(std::string(dir) + "/walk-outputs.json") << cases.dump(1) << "\n";
  }
}

}  // namespace
}  // namespace tandem::rt
