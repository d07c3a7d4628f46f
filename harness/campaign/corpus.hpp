#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// The workload corpus (campaigns/corpus.yaml): the release battery's weighted cases
// and diagnostics, each with its prompt, output budget and content checks.
namespace tandem::harness {

// The JSON value types a json_fields check can require, as JSON Schema names them.
enum class JsonType { kString, kInteger, kNumber, kBoolean, kArray, kObject, kNull };
std::optional<JsonType> ParseJsonType(std::string_view name);  // "string", ..., "null"

struct ContentCheck {
  enum class Kind { kNonEmpty, kRegex, kJsonFields, kCounting } kind = Kind::kNonEmpty;
  std::string pattern;                        // regex (ECMAScript, searched anywhere in the content)
  std::vector<std::string> keys;              // json_fields: keys the object must have
  std::map<std::string, std::string> values;  // json_fields: key → expected value as JSON text
  std::map<std::string, JsonType> types;      // json_fields: key → the type its value must have
};

struct CorpusCase {
  std::string id;
  double weight = 0.0;  // weight in the battery's weighted decode; 0: a diagnostic
  int max_tokens = 128;
  std::string system;           // optional system message
  std::string prompt;           // the user message
  bool nonce = true;            // start the prompt with the run's nonce marker
  int count = 0;                // counting diagnostic: 1..count
  std::string response_format;  // JSON text sent as the request's response_format; empty: none
  std::vector<ContentCheck> checks;
};

struct Corpus {
  std::filesystem::path file;
  std::vector<CorpusCase> cases;

  // Throws InputError naming the case and the corpus file.
  const CorpusCase& Case(const std::string& id) const;
  // The cases with weight > 0, in file order.
  std::vector<const CorpusCase*> Weighted() const;
  // The cases `ids` name, in that order; every weighted case when `ids` is empty (a
  // workload's `cases:`). Throws InputError for an unknown id, as Case does.
  std::vector<const CorpusCase*> Select(const std::vector<std::string>& ids) const;
};

Corpus LoadCorpus(const std::filesystem::path& file);

}  // namespace tandem::harness
