// Fuzzes the OpenAI request parser with arbitrary bodies. Only ApiError may escape.
#include <cstdint>
#include <string_view>

#include "runtime/serve/api_error.hpp"
#include "runtime/serve/completion_request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (auto endpoint : {tandem::rt::Endpoint::kChatCompletions, tandem::rt::Endpoint::kCompletions}) {
    try {
      (void)tandem::rt::ParseCompletionRequest(body, endpoint, 1000);
    } catch (const tandem::rt::ApiError&) {
    }
  }
  return 0;
}
