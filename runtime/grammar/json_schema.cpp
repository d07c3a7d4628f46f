#include "runtime/grammar/json_schema.hpp"

#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tandem::rt {

namespace {

using json = nlohmann::ordered_json;

std::uint32_t TypeBit(const std::string& name, const std::string& path) {
  if (name == "object") return SchemaNode::kObject;
  if (name == "array") return SchemaNode::kArray;
  if (name == "string") return SchemaNode::kString;
  if (name == "number") return SchemaNode::kNumber | SchemaNode::kInteger;
  if (name == "integer") return SchemaNode::kInteger;
  if (name == "boolean") return SchemaNode::kBoolean;
  if (name == "null") return SchemaNode::kNull;
  throw SchemaError(fmt::format("{}: unknown type '{}'", path, name));
}

// A name as an error message quotes it: long ones cut, so a path stays short.
std::string Abbreviated(const std::string& name) { return name.size() <= 64 ? name : name.substr(0, 61) + "..."; }

int Count(const json& v, const std::string& key, const std::string& path) {
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 1'000'000) {
    throw SchemaError(fmt::format("{}: '{}' must be an integer in 0..1000000", path, key));
  }
  return static_cast<int>(v.get<std::int64_t>());
}

}  // namespace

int JsonGrammar::Add(const json& schema, const std::string& path, int depth) {
  if (depth > kMaxDepth) throw SchemaError(fmt::format("{}: schemas nest deeper than {} levels", path, kMaxDepth));
  if (static_cast<int>(nodes_.size()) >= kMaxNodes) {
    throw SchemaError(fmt::format("{}: the schema has more than {} schemas in all", path, kMaxNodes));
  }
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) throw SchemaError(fmt::format("{}: the schema 'false' allows nothing", path));
    nodes_.emplace_back();
    return static_cast<int>(nodes_.size()) - 1;
  }
  if (!schema.is_object()) throw SchemaError(fmt::format("{}: a schema must be an object", path));
  static const std::set<std::string> kAnnotations = {"title", "description", "default", "examples", "$schema", "$id", "$comment"};
  static const std::set<std::string> kSupported = {"type",  "enum",     "const",    "properties", "required", "additionalProperties",
                                                   "items", "minItems", "maxItems", "minLength",  "maxLength"};
  for (const auto& [key, value] : schema.items()) {
    if (!kSupported.contains(key) && !kAnnotations.contains(key)) {
      throw SchemaError(fmt::format("{}: '{}' is not supported by constrained decoding", path, key));
    }
  }
  const int index = static_cast<int>(nodes_.size());
  nodes_.emplace_back();
  SchemaNode n;
  if (schema.contains("type")) {
    const json& t = schema["type"];
    n.types = 0;
    if (t.is_string()) {
      n.types = TypeBit(t.get<std::string>(), path);
    } else if (t.is_array() && !t.empty()) {
      for (const json& name : t) {
        if (!name.is_string()) throw SchemaError(fmt::format("{}: 'type' lists something that is not a type name", path));
        n.types |= TypeBit(name.get<std::string>(), path);
      }
    } else {
      throw SchemaError(fmt::format("{}: 'type' must be a type name or a list of them", path));
    }
  }
  // Counts are checked before anything is built from them, so the worst schema costs
  // linear time: at most kMaxChoices values or properties, each visited once.
  const auto at_most = [&path](const json& list, const char* key) {
    if (list.size() > kMaxChoices) {
      throw SchemaError(fmt::format("{}: '{}' has {} entries; at most {} are supported", path, key, list.size(), kMaxChoices));
    }
  };
  if (schema.contains("enum")) {
    if (!schema["enum"].is_array() || schema["enum"].empty()) throw SchemaError(fmt::format("{}: 'enum' must be a non-empty array", path));
    at_most(schema["enum"], "enum");
    for (const json& v : schema["enum"]) n.literals.push_back(v.dump());
  }
  if (schema.contains("const")) n.literals = {schema["const"].dump()};
  std::unordered_map<std::string, std::size_t> property_index;
  if (schema.contains("properties")) {
    if (!schema["properties"].is_object()) throw SchemaError(fmt::format("{}: 'properties' must be an object", path));
    at_most(schema["properties"], "properties");
    for (const auto& [name, sub] : schema["properties"].items()) {
      property_index.emplace(name, n.properties.size());
      n.properties.push_back({name, Add(sub, fmt::format("{}.properties.{}", path, Abbreviated(name)), depth + 1), false});
    }
  }
  if (schema.contains("required")) {
    if (!schema["required"].is_array()) throw SchemaError(fmt::format("{}: 'required' must be an array", path));
    for (const json& r : schema["required"]) {
      const auto it = r.is_string() ? property_index.find(r.get<std::string>()) : property_index.end();
      if (it == property_index.end()) {
        throw SchemaError(fmt::format("{}: required '{}' is not among 'properties'", path, Abbreviated(r.dump())));
      }
      n.properties[it->second].required = true;
    }
  }
  if (schema.contains("additionalProperties")) {
    const json& a = schema["additionalProperties"];
    if (a.is_boolean() && !a.get<bool>()) {
      n.closed = true;
    } else if (!(a.is_boolean() && a.get<bool>())) {
      n.additional = Add(a, path + ".additionalProperties", depth + 1);
    }
  }
  if (!n.properties.empty() && !n.closed) {
    // Keys beside the named ones could repeat a named key or break its schema.
    throw SchemaError(fmt::format("{}: 'properties' needs 'additionalProperties': false (strict mode)", path));
  }
  for (const SchemaNode::Property& p : n.properties) n.keys.push_back(json(p.name).dump());
  if (schema.contains("items")) n.items = Add(schema["items"], path + ".items", depth + 1);
  if (schema.contains("minItems")) n.min_items = Count(schema["minItems"], "minItems", path);
  if (schema.contains("maxItems")) n.max_items = Count(schema["maxItems"], "maxItems", path);
  if (schema.contains("minLength")) n.min_length = Count(schema["minLength"], "minLength", path);
  if (schema.contains("maxLength")) n.max_length = Count(schema["maxLength"], "maxLength", path);
  if ((n.max_items >= 0 && n.max_items < n.min_items) || (n.max_length >= 0 && n.max_length < n.min_length)) {
    throw SchemaError(fmt::format("{}: a maximum is below its minimum", path));
  }
  nodes_[static_cast<std::size_t>(index)] = std::move(n);
  return index;
}

std::shared_ptr<const JsonGrammar> JsonGrammar::Compile(const json& schema) {
  auto g = std::make_shared<JsonGrammar>();
  g->Add(schema, "schema", 0);
  return g;
}

std::shared_ptr<const JsonGrammar> JsonGrammar::AnyObject() {
  auto g = std::make_shared<JsonGrammar>();
  SchemaNode root;
  root.types = SchemaNode::kObject;
  g->nodes_.push_back(root);
  return g;
}

}  // namespace tandem::rt
