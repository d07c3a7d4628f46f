#include "harness/campaign/corpus.hpp"

#include <fstream>
#include <regex>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "harness/campaign/yaml_reader.hpp"

namespace tandem::harness {

std::optional<JsonType> ParseJsonType(std::string_view name) {
  static constexpr std::pair<std::string_view, JsonType> kNames[] = {
      {"string", JsonType::kString}, {"integer", JsonType::kInteger}, {"number", JsonType::kNumber}, {"boolean", JsonType::kBoolean},
      {"array", JsonType::kArray},   {"object", JsonType::kObject},   {"null", JsonType::kNull}};
  for (const auto& [n, type] : kNames) {
    if (n == name) return type;
  }
  return std::nullopt;
}

namespace {

using yaml::At;
using yaml::Map;

ContentCheck ParseCheck(const At& at) {
  ContentCheck check;
  if (at.node().IsScalar()) {
    const std::string name = yaml::OneOf(at, {"non_empty", "counting"});
    check.kind = name == "non_empty" ? ContentCheck::Kind::kNonEmpty : ContentCheck::Kind::kCounting;
    return check;
  }
  const Map m(at, {"regex", "json_fields"});
  if (m.Has("regex")) {
    check.kind = ContentCheck::Kind::kRegex;
    check.pattern = m.Get("regex").String();
    try {
      std::regex compiled(check.pattern);
    } catch (const std::regex_error& e) {
      throw m.Get("regex").Error(std::string("not a valid regular expression: ") + e.what());
    }
  } else if (m.Has("json_fields")) {
    check.kind = ContentCheck::Kind::kJsonFields;
    const Map j(m.Get("json_fields"), {"keys", "values", "types"});
    check.keys = j.StringList("keys");
    if (j.Has("types")) {
      const At types = j.Get("types");
      if (!types.node().IsMap()) throw types.Error("must be a mapping key: type");
      for (const auto& kv : types.node()) {
        const std::optional<JsonType> type = ParseJsonType(kv.second.IsScalar() ? kv.second.Scalar() : "");
        if (!type)
          throw types.Error(
              fmt::format("'{}': the type must be one of string, integer, number, boolean, array, object, null", kv.first.Scalar()));
        check.types[kv.first.Scalar()] = *type;
      }
    }
    if (j.Has("values")) {
      const At values = j.Get("values");
      if (!values.node().IsMap()) throw values.Error("must be a mapping key: expected value");
      for (const auto& kv : values.node()) {
        const std::string v = kv.second.Scalar();
        // Expected values are compared as JSON: numbers and booleans as such, the rest as strings.
        const auto parsed = nlohmann::json::parse(v, nullptr, false);
        check.values[kv.first.Scalar()] = parsed.is_discarded() || parsed.is_string() ? nlohmann::json(v).dump() : parsed.dump();
      }
    }
  } else {
    throw at.Error("a check is non_empty, counting, {regex: ...} or {json_fields: {keys, values}}");
  }
  return check;
}

// A YAML value as JSON: plain scalars that read as JSON literals (numbers, true,
// false, null) become those, quoted ones and the rest strings; key order is kept.
nlohmann::ordered_json YamlToJson(const YAML::Node& node) {
  if (node.IsMap()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const auto& kv : node) out[kv.first.Scalar()] = YamlToJson(kv.second);
    return out;
  }
  if (node.IsSequence()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& item : node) out.push_back(YamlToJson(item));
    return out;
  }
  if (node.IsNull()) return nullptr;
  const std::string text = node.Scalar();
  if (node.Tag() != "!") {
    const auto literal = nlohmann::ordered_json::parse(text, nullptr, false);
    if (!literal.is_discarded() && !literal.is_string() && !literal.is_object() && !literal.is_array()) return literal;
  }
  return text;
}

}  // namespace

const CorpusCase& Corpus::Case(const std::string& id) const {
  for (const CorpusCase& c : cases) {
    if (c.id == id) return c;
  }
  throw InputError(fmt::format("{}: no case '{}'", file.string(), id));
}

std::vector<const CorpusCase*> Corpus::Weighted() const {
  std::vector<const CorpusCase*> out;
  for (const CorpusCase& c : cases) {
    if (c.weight > 0) out.push_back(&c);
  }
  return out;
}

std::vector<const CorpusCase*> Corpus::Select(const std::vector<std::string>& ids) const {
  if (ids.empty()) return Weighted();
  std::vector<const CorpusCase*> out;
  for (const std::string& id : ids) out.push_back(&Case(id));
  return out;
}

Corpus LoadCorpus(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open the corpus", file.string()));
  std::ostringstream text;
  text << in.rdbuf();
  const std::string name = file.string();
  const YAML::Node root = yaml::Load(text.str(), name);
  const Map top(At(root, name, ""), {"cases"});
  const At cases = top.Get("cases");
  if (!cases.node().IsSequence() || cases.node().size() == 0) throw cases.Error("must be a non-empty list");
  Corpus corpus;
  corpus.file = file;
  for (std::size_t i = 0; i < cases.node().size(); ++i) {
    const At at = cases.Item(cases.node()[i], i);
    const Map m(at, {"id", "weight", "max_tokens", "system", "prompt", "nonce", "count", "response_format", "checks"});
    CorpusCase c;
    c.id = m.Get("id").String();
    c.weight = m.Number<double>("weight", 0.0, 0.0, 1000.0);
    c.max_tokens = m.Number<int>("max_tokens", 128, 1, 1 << 20);
    c.system = m.String("system", "");
    c.prompt = m.Get("prompt").String();
    c.nonce = m.Bool("nonce", true);
    c.count = m.Number<int>("count", 0, 0, 100000);
    if (m.Has("response_format")) {
      const At rf = m.Get("response_format");
      if (!rf.node().IsMap()) throw rf.Error("must be a mapping, sent as the request's response_format");
      c.response_format = YamlToJson(rf.node()).dump();
    }
    if (m.Has("checks")) {
      const At checks = m.Get("checks");
      if (!checks.node().IsSequence()) throw checks.Error("must be a list");
      for (std::size_t k = 0; k < checks.node().size(); ++k) c.checks.push_back(ParseCheck(checks.Item(checks.node()[k], k)));
    }
    for (const CorpusCase& other : corpus.cases) {
      if (other.id == c.id) throw at.Error(fmt::format("case id '{}' is used twice", c.id));
    }
    corpus.cases.push_back(std::move(c));
  }
  return corpus;
}

}  // namespace tandem::harness
