// Fuzzes the structured-output grammar: the input is a JSON schema, a NUL byte, then
// output bytes. The schema either compiles or is refused with SchemaError; the bytes
// are fed until the matcher refuses one. Invariant: whenever the matcher says the
// output so far is complete, it is JSON that parses (nlohmann), so a constrained
// output can never be invalid JSON.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/grammar/json_matcher.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t split = input.find('\0');
  if (split == std::string_view::npos) return 0;
  const auto schema = nlohmann::ordered_json::parse(input.substr(0, split), nullptr, false);
  if (schema.is_discarded()) return 0;
  std::shared_ptr<const tandem::rt::JsonGrammar> grammar;
  try {
    grammar = tandem::rt::JsonGrammar::Compile(schema);
  } catch (const tandem::rt::SchemaError&) {
    return 0;
  }
  tandem::rt::JsonMatcher matcher(grammar);
  const std::string_view output = input.substr(split + 1);
  for (std::size_t i = 0; i < output.size(); ++i) {
    if (!matcher.Accept(static_cast<unsigned char>(output[i]))) break;
    if (matcher.Complete() && nlohmann::json::parse(output.substr(0, i + 1), nullptr, false).is_discarded()) std::abort();
  }
  return 0;
}
