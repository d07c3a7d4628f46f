#pragma once

#include <chrono>
#include <stdexcept>
#include <string>

#include "runtime/serve/request_stream.hpp"

namespace tandem::testing {

// What a request produced, read from its scheduler stream to the end (`text`: content
// and reasoning together; `reasoning`: the think block's part alone; a failure throws
// with its message).
struct StreamOutput {
  std::string text, reasoning, finish_reason;
  int completion_tokens = 0, reasoning_tokens = 0;
};

inline StreamOutput ReadToEnd(rt::RequestStream& stream, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  StreamOutput o;
  for (;;) {
    const auto e = stream.Pop(timeout);
    if (!e) throw std::runtime_error("no event within the timeout");
    if (e->kind == rt::StreamEvent::Kind::kDelta) {
      o.text += e->text;
      if (e->reasoning) o.reasoning += e->text;
    }
    if (e->kind == rt::StreamEvent::Kind::kFailed) throw std::runtime_error(e->text);
    if (e->kind == rt::StreamEvent::Kind::kFinished) {
      o.completion_tokens = e->usage.completion_tokens;
      o.reasoning_tokens = e->usage.reasoning_tokens;
      o.finish_reason = e->finish_reason;
      return o;
    }
  }
}

}  // namespace tandem::testing
