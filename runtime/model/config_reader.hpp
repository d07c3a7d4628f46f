#pragma once

// Reads the keys of a config.json object, each failure a ModelError naming the source
// and the key. Internal to runtime/model.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/model/model_error.hpp"

namespace tandem::rt {

class ConfigReader {
 public:
  using json = nlohmann::json;

  ConfigReader(const json& doc, std::string_view source) : doc_(doc), source_(source) {}

  ModelError Error(std::string_view key, std::string_view problem) const {
    return ModelError(fmt::format("{}: '{}' {}", source_, key, problem));
  }

  const json* Find(std::string_view key) const {
    const auto it = doc_.find(key);
    return it == doc_.end() || it->is_null() ? nullptr : &*it;
  }

  const json& Required(std::string_view key) const {
    const json* v = Find(key);
    if (v == nullptr) throw Error(key, "is missing");
    return *v;
  }

  // Integers in [min, 1e9] (a list: each element), defaulting to `fallback` when absent.
  int Int(std::string_view key, std::optional<int> fallback = std::nullopt, int min = 0) const {
    const json* v = Find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      throw Error(key, "is missing");
    }
    if (!v->is_number_integer()) throw Error(key, fmt::format("must be an integer, got {}", v->dump()));
    const auto value = v->get<std::int64_t>();
    if (value < min || value > 1'000'000'000) throw Error(key, fmt::format("must be in [{}, 1e9], got {}", min, value));
    return static_cast<int>(value);
  }

  double Number(std::string_view key, std::optional<double> fallback = std::nullopt) const {
    const json* v = Find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      throw Error(key, "is missing");
    }
    if (!v->is_number()) throw Error(key, fmt::format("must be a number, got {}", v->dump()));
    return v->get<double>();
  }

  bool Bool(std::string_view key, bool fallback) const {
    const json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) throw Error(key, fmt::format("must be true or false, got {}", v->dump()));
    return v->get<bool>();
  }

  std::string String(std::string_view key, std::optional<std::string> fallback = std::nullopt) const {
    const json* v = Find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      throw Error(key, "is missing");
    }
    if (!v->is_string()) throw Error(key, fmt::format("must be a string, got {}", v->dump()));
    return v->get<std::string>();
  }

  // A list of integers in [min, max], each; `fallback` when absent.
  std::vector<std::int64_t> IntList(std::string_view key, std::optional<std::vector<std::int64_t>> fallback, std::int64_t min,
                                    std::int64_t max) const {
    const json* v = Find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      throw Error(key, "is missing");
    }
    if (!v->is_array()) throw Error(key, fmt::format("must be a list of integers, got {}", v->dump()));
    if (v->size() > 100'000) throw Error(key, fmt::format("has {} entries; at most 100000 are read", v->size()));
    std::vector<std::int64_t> out;
    for (const json& e : *v) {
      if (!e.is_number_integer() || e.get<std::int64_t>() < min || e.get<std::int64_t>() > max) {
        throw Error(key, fmt::format("must hold integers in [{}, {}], got {}", min, max, e.dump()));
      }
      out.push_back(e.get<std::int64_t>());
    }
    return out;
  }

  // eos_token_id may be a list in HF configs; the first entry is the primary one.
  std::int64_t TokenId(std::string_view key, std::int64_t fallback) const {
    const json* v = Find(key);
    if (v == nullptr) return fallback;
    if (v->is_array() && !v->empty()) v = &(*v)[0];
    if (!v->is_number_integer() || v->get<std::int64_t>() < 0) throw Error(key, fmt::format("must be a token id, got {}", v->dump()));
    return v->get<std::int64_t>();
  }

 private:
  const json& doc_;
  std::string_view source_;
};

}  // namespace tandem::rt
