#pragma once

#include <random>

#include <nlohmann/json.hpp>

namespace tandem::testing {

// A random JSON schema of the kind constrained decoding supports, at most `depth`
// levels deep: closed objects with optional and required properties (names with
// quotes and non-ASCII), arrays with item counts, strings with lengths, numbers,
// integers, booleans, enums and nullable strings.
inline nlohmann::ordered_json RandomSchema(std::mt19937& rng, int depth) {
  using json = nlohmann::ordered_json;
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const int kind = depth <= 0 ? 2 + pick(5) : pick(7);
  switch (kind) {
    case 0: {
      json props = json::object();
      json required = json::array();
      const int n = 1 + pick(4);
      for (int i = 0; i < n; ++i) {
        const std::string name = std::string("k") + static_cast<char>('a' + i) + (pick(3) == 0 ? " é\"" : "");
        props[name] = RandomSchema(rng, depth - 1);
        if (pick(2) == 0) required.push_back(name);
      }
      return {{"type", "object"}, {"properties", props}, {"required", required}, {"additionalProperties", false}};
    }
    case 1: {
      json s = {{"type", "array"}, {"items", RandomSchema(rng, depth - 1)}};
      if (pick(2) == 0) s["minItems"] = pick(2);
      if (pick(2) == 0) s["maxItems"] = 2 + pick(2);
      return s;
    }
    case 2: {
      json s = {{"type", "string"}};
      if (pick(2) == 0) s["maxLength"] = 1 + pick(6);
      if (pick(3) == 0) s["minLength"] = 1;
      return s;
    }
    case 3:
      return {{"type", pick(2) == 0 ? "integer" : "number"}};
    case 4:
      return {{"type", "boolean"}};
    case 5:
      return {{"enum", json::array({"red", "green", 7, nullptr, "gré\"en"})}};
    default:
      return {{"type", json::array({"string", "null"})}};
  }
}

}  // namespace tandem::testing
