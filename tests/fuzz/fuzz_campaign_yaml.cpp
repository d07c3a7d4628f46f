// Fuzzes the campaign YAML loader. Only InputError (with a file:line:column message)
// may escape; anything else, or a crash, is a bug.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/input_error.hpp"
#include "harness/campaign/campaign.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)tandem::harness::ParseCampaign(text, "/nonexistent/fuzz.yaml");
  } catch (const tandem::InputError& e) {
    if (std::string_view(e.what()).rfind("/nonexistent/fuzz.yaml", 0) != 0) std::abort();
  }
  return 0;
}
