// Fuzzes the tokenizer.json loader; whatever loads must then encode and decode a
// few strings without crashing. Only ModelError may escape.
#include <cstdint>
#include <string_view>

#include "runtime/model/model_error.hpp"
#include "runtime/model/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto tokenizer = tandem::rt::Tokenizer::FromJson(text, "fuzz-tokenizer.json");
    for (std::string_view s :
         {"Hello, world! 12345", "  \n\t x", "\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80", "<\xEF\xBD\x9CUser\xEF\xBD\x9C>"}) {
      (void)tokenizer.Decode(tokenizer.Encode(s));
    }
  } catch (const tandem::rt::ModelError&) {
  }
  return 0;
}
