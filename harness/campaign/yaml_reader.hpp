#pragma once

// Reading YAML with errors that say where: every value carries its file, line,
// column and key path ("quick.yaml:12:5: arms[1].source.kind: ..."), and mappings
// reject keys they do not know. Internal to the harness's YAML loaders.
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "common/input_error.hpp"

namespace tandem::harness::yaml {

// One YAML node and where it came from, for messages like
// "quick.yaml:12:5: arms[1].source.kind: 'svn' is not one of binary, git, command, external".
class At {
 public:
  At(YAML::Node node, const std::string& file, std::string path) : node_(std::move(node)), file_(&file), path_(std::move(path)) {}

  InputError Error(const std::string& problem) const {
    const YAML::Mark m = node_.Mark();
    const std::string where = m.is_null() ? *file_ : fmt::format("{}:{}:{}", *file_, m.line + 1, m.column + 1);
    return InputError(fmt::format("{}: {}: {}", where, path_.empty() ? "(top level)" : path_, problem));
  }

  const YAML::Node& node() const { return node_; }
  const std::string& file() const { return *file_; }
  const std::string& path() const { return path_; }
  At Child(const YAML::Node& child, const std::string& name) const { return At(child, *file_, path_.empty() ? name : path_ + "." + name); }
  At Item(const YAML::Node& child, std::size_t i) const { return At(child, *file_, fmt::format("{}[{}]", path_, i)); }

  std::string String() const {
    if (!node_.IsScalar()) throw Error("must be a string");
    return node_.Scalar();
  }
  template <typename T>
  T Number(T min, T max) const {
    if (!node_.IsScalar()) throw Error("must be a number");
    T value{};
    try {
      value = node_.as<T>();
    } catch (const YAML::Exception&) {
      throw Error(fmt::format("'{}' is not a valid number here", node_.Scalar()));
    }
    if (!(value >= min && value <= max)) throw Error(fmt::format("{} is outside [{}, {}]", node_.Scalar(), min, max));
    return value;
  }
  bool Bool() const {
    if (!node_.IsScalar()) throw Error("must be true or false");
    try {
      return node_.as<bool>();
    } catch (const YAML::Exception&) {
      throw Error(fmt::format("'{}' is not true or false", node_.Scalar()));
    }
  }
  std::vector<std::string> StringList() const {
    if (node_.IsScalar()) return {node_.Scalar()};
    if (!node_.IsSequence()) throw Error("must be a string or a list of strings");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < node_.size(); ++i) out.push_back(Item(node_[i], i).String());
    return out;
  }
  template <typename T>
  std::vector<T> NumberList(T min, T max) const {
    if (!node_.IsSequence() || node_.size() == 0) throw Error("must be a non-empty list of numbers");
    std::vector<T> out;
    for (std::size_t i = 0; i < node_.size(); ++i) out.push_back(Item(node_[i], i).template Number<T>(min, max));
    return out;
  }

 private:
  YAML::Node node_;
  const std::string* file_;
  std::string path_;
};

// A mapping whose keys are checked against the ones this section knows.
class Map {
 public:
  Map(const At& at, std::initializer_list<const char*> known) : at_(at) {
    if (!at.node().IsMap()) throw at.Error("must be a mapping (key: value)");
    std::set<std::string> names(known.begin(), known.end()), seen;
    for (const auto& kv : at.node()) {
      const std::string key = kv.first.Scalar();
      if (!names.contains(key)) {
        throw At(kv.first, at.file(), at.path()).Error(fmt::format("unknown key '{}' (known: {})", key, fmt::join(known, ", ")));
      }
      // yaml-cpp keeps both and reads the first; a silently ignored setting is worse.
      if (!seen.insert(key).second) throw At(kv.first, at.file(), at.path()).Error(fmt::format("key '{}' appears twice", key));
    }
  }
  bool Has(const char* key) const { return at_.node()[key] && !at_.node()[key].IsNull(); }
  At Get(const char* key) const {
    if (!Has(key)) throw at_.Error(fmt::format("'{}' is missing", key));
    return at_.Child(at_.node()[key], key);
  }
  std::string String(const char* key, std::string fallback) const { return Has(key) ? Get(key).String() : fallback; }
  template <typename T>
  T Number(const char* key, T fallback, T min, T max) const {
    return Has(key) ? Get(key).template Number<T>(min, max) : fallback;
  }
  bool Bool(const char* key, bool fallback) const { return Has(key) ? Get(key).Bool() : fallback; }
  std::vector<std::string> StringList(const char* key) const { return Has(key) ? Get(key).StringList() : std::vector<std::string>{}; }
  const At& at() const { return at_; }

 private:
  At at_;
};

inline std::string OneOf(const At& at, std::initializer_list<const char*> allowed) {
  const std::string value = at.String();
  for (const char* a : allowed) {
    if (value == a) return value;
  }
  throw at.Error(fmt::format("'{}' is not one of {}", value, fmt::join(allowed, ", ")));
}

// What one YAML document the harness reads may hold: its text, and what it expands to
// when every alias is followed (a few anchors of aliases make billions of nodes).
inline constexpr std::size_t kMaxYamlBytes = 16 << 20;
inline constexpr std::size_t kMaxYamlNodes = 1'000'000;
inline constexpr std::size_t kMaxYamlScalarBytes = 64 << 20;
inline constexpr int kMaxYamlDepth = 64;

// Parses YAML text, turning a syntax error into "FILE:LINE:COLUMN: not valid YAML: ...",
// and refuses a document past the bounds above with where and which bound.
YAML::Node Load(const std::string& text, const std::string& file);

}  // namespace tandem::harness::yaml
