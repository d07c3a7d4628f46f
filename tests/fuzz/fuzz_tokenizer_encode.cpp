// Fuzzes encoding of arbitrary prompt bytes with the synthetic byte-level
// tokenizer plus a few merges: decode(encode(x)) must give back x exactly, for
// any bytes, valid UTF-8 or not.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/model/synthetic_tokenizer.hpp"
#include "runtime/model/tokenizer.hpp"

namespace {

const tandem::rt::Tokenizer& FuzzTokenizer() {
  static const tandem::rt::Tokenizer tokenizer = [] {
    auto t = nlohmann::json::parse(tandem::rt::DeriveSyntheticTokenizer("/nonexistent", 0).tokenizer_json);
    int next = 400;
    for (const char* merged : {"ab", "abc", "Ġa", "ĠĠ", "ĠĠĠĠ", "12", "Ċ", "ĊĊ"}) t["model"]["vocab"][merged] = next++;
    t["model"]["merges"] = {"a b", "ab c", "Ġ a", "Ġ Ġ", "ĠĠ ĠĠ", "1 2", "Ċ Ċ"};
    return tandem::rt::Tokenizer::FromJson(t.dump(), "fuzz");
  }();
  return tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto& tokenizer = FuzzTokenizer();
  if (tokenizer.Decode(tokenizer.Encode(text)) != text) std::abort();
  return 0;
}
