#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "harness/traffic/sse_parser.hpp"

namespace tandem::harness {

// Seconds on the harness's monotonic clock (steady_clock), the only clock any timing
// figure is computed from.
double MonotonicSeconds();

// POSTs `body` (stream: true is set, with usage) to `base_url` + /v1/chat/completions
// and reads the server-sent events, timestamping each one. Never throws for what
// the server does: failures come back in `error`. `timeout_s` bounds the wait for
// each read.
StreamedCompletion StreamChat(const std::string& base_url, nlohmann::ordered_json body, double timeout_s, const std::string& api_key = "");

// GETs base_url + path (with `Authorization: Bearer API_KEY` when a key is given); the body
// on 200, empty otherwise (with `status` set).
std::string HttpGet(const std::string& base_url, const std::string& path, double timeout_s, int* status = nullptr,
                    const std::string& api_key = "");

}  // namespace tandem::harness
