#pragma once

#include <chrono>

namespace tandem::rt {

// The bounds of the HTTP server (runtime/serve/http_server.hpp) on what one client can hold.
struct HttpLimits {
  std::chrono::milliseconds request_read{30000};  // a request's line, headers and body, from its first byte
  std::chrono::milliseconds idle_read{10000};     // the longest pause between bytes of a request
  std::chrono::milliseconds keep_alive{5000};     // an idle connection waits this long for its next request
  std::chrono::milliseconds write{60000};         // the longest a write may wait for the client to read
  std::size_t max_header_bytes = 64 << 10;        // a request's line and headers (a line alone: 8 KiB, httplib's)
  std::size_t max_body_bytes = 16 << 20;          // a request's body as sent (chunked framing included)
  int max_connections = 512;                      // open connections in all
  int max_connections_per_client = 96;            // open connections from one client address
};

}  // namespace tandem::rt
