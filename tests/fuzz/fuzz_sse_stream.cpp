// Fuzzes the chat-completion SSE reader with arbitrary server bytes, fed in pieces
// whose sizes come from the input. It must never throw or crash, and what it reports
// must be consistent with itself.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "harness/traffic/sse_parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = 1 + data[0] % 97;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  tandem::harness::StreamedCompletion out;
  tandem::harness::SseCompletionParser parser(out);
  double now = 0;
  for (std::size_t i = 0; i < bytes.size(); i += piece) parser.Feed(bytes.substr(i, piece), now += 1);
  (void)parser.non_event_text();
  if (out.chunks > 0 && out.t_first_output <= 0) std::abort();
  if (!out.content.empty() && out.t_first_content < out.t_first_output) std::abort();
  if (out.prompt_tokens < 0 || out.completion_tokens < 0 || out.cached_tokens < 0) std::abort();
  return 0;
}
