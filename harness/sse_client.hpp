#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tandem::harness {

// Seconds on the harness's monotonic clock (steady_clock), the only clock any timing
// figure is computed from.
double MonotonicSeconds();

// What one streamed completion looked like from the client's side.
struct StreamedCompletion {
  int status = 0;           // HTTP status; 0 when no response arrived
  std::string error;        // transport, HTTP or in-stream error; empty when none
  double t_start = 0;          // just before the POST
  double t_first_output = 0;   // first delta with non-empty content or reasoning_content
  double t_first_content = 0;  // first non-empty content
  double t_finish = 0;         // the event carrying finish_reason
  std::string content;
  std::string reasoning;
  int chunks = 0;           // deltas that carried text
  bool done = false;        // saw data: [DONE]
  bool has_usage = false;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
  std::string finish_reason;

  // A stream without [DONE] or usage is incomplete: a failed sample, never a timing.
  bool complete() const { return status == 200 && error.empty() && done && has_usage && t_finish > 0; }
};

// POSTs `body` (stream: true is set, with usage) to `base_url` + /v1/chat/completions
// and reads the server-sent events, timestamping each one. Never throws for what
// the server does: failures come back in `error`. `timeout_s` bounds the wait for
// each read.
StreamedCompletion StreamChat(const std::string& base_url, nlohmann::json body, double timeout_s,
                              const std::string& api_key = "");

// GETs base_url + path; the body on 200, empty otherwise (with `status` set).
std::string HttpGet(const std::string& base_url, const std::string& path, double timeout_s, int* status = nullptr);

}  // namespace tandem::harness
