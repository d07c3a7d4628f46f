#pragma once

#include <memory>
#include <string>

#include <httplib.h>

#include "runtime/serve/http_limits.hpp"

// cpp-httplib's server (Debian's 0.11) with the bounds a server reachable by untrusted
// clients needs, which that version does not have: a deadline for receiving a whole
// request (httplib's read timeout restarts with every byte, so a client sending a
// header line every few seconds holds a handler forever), a cap on connections per
// client address and in all, and a thread per connection up to that cap instead of a
// fixed pool (so long streams cannot take the last thread and /health always answers).
// It replaces httplib's per-connection loop (the virtual process_and_close_socket) and
// keeps its request parsing and routing.
namespace tandem::rt {

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(HttpLimits limits);
  ~HttpServer() override;

  // Called from a handler (or the pre-routing handler): close this request's connection
  // after its response, as when a request is refused before its body was read (the
  // unread body must not be taken for the next request).
  static void CloseConnectionAfterResponse(httplib::Response& res);

  // Why the request this thread is answering had its head refused (RequestHeadError),
  // or "": for the error handler's message.
  static std::string RequestHeadRefusal();

  // Whether the client of the request this thread is answering has closed its connection
  // (it will read no answer): a handler that waits long asks, to stop work nobody wants.
  static bool ClientGone();

  int open_connections() const;

  // Runs one connection's requests from `raw` bytes instead of a socket; returns what the
  // server wrote. For fuzzing the whole request path (tests/fuzz).
  std::string ProcessForTesting(const std::string& raw);

 private:
  bool process_and_close_socket(socket_t sock) override;

  struct Connections;
  HttpLimits limits_;
  std::unique_ptr<Connections> connections_;
};

}  // namespace tandem::rt
