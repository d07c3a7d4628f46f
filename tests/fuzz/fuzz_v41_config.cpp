// Fuzzes DeepSeek V4.1's configuration parser (inference/config.json or config.json's
// text_config) and, for a configuration it accepts, the Engram sidecar's parser against it
// (the input's second half, after the first NUL). Only ModelError may escape.
#include <cstdint>
#include <string_view>

#include "runtime/model/engram_constants.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/v41_config.hpp"
#include "runtime/model/v41_synthetic.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view config_text = input.substr(0, nul);
  const std::string_view engram_text = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  try {
    const tandem::rt::V41Config c = tandem::rt::ParseV41Config(config_text, "fuzz-config.json");
    (void)tandem::rt::ParseEngramConstants(engram_text, c, "fuzz-engram.json");
  } catch (const tandem::rt::ModelError&) {
  }
  // The sidecar against a known-good configuration too, whatever the config half was.
  try {
    static const tandem::rt::V41Config tiny = tandem::rt::V41Preset("v41-tiny");
    (void)tandem::rt::ParseEngramConstants(engram_text.empty() ? config_text : engram_text, tiny, "fuzz-engram.json");
  } catch (const tandem::rt::ModelError&) {
  }
  return 0;
}
