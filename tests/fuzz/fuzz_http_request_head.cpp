// Fuzzes the head of a request to `tandem-rt serve` for smuggling: the input is the
// request's header lines (as sent, CRLF or LF), followed by a 2-byte body and a second,
// hidden request. Whatever the head says, the server may answer the hidden request only
// when the head frames the body exactly: Content-Length 2 in every copy (digits only),
// no Transfer-Encoding. A head refused for its framing gets one answer, nothing after it.
// A crash, a sanitizer report, an escaping exception or a broken rule fails.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "runtime/serve/api_server.hpp"

namespace {

std::string Trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Whether `head` frames a 2-byte body unambiguously, read the plain way.
bool FramesTwoBytes(const std::string& head) {
  bool length = false;
  std::size_t start = 0;
  while (start < head.size()) {
    std::size_t end = head.find('\n', start);
    if (end == std::string::npos) end = head.size();
    std::string line = head.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line.back() != '\r') return false;  // LF alone: refused
    line.pop_back();
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string name = Lower(Trim(line.substr(0, colon)));
    const std::string value = Trim(line.substr(colon + 1));
    if (name == "transfer-encoding") return false;
    if (name == "content-length") {
      if (value.empty() || !std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c) != 0; }) ||
          value.find_first_not_of('0') == std::string::npos || value.substr(value.find_first_not_of('0')) != "2") {
        return false;
      }
      length = true;
    }
  }
  return length;
}

// The bodies of the responses in `out`, split by their Content-Length (the server sends
// no chunked answer without a model).
std::vector<std::string> ResponseBodies(const std::string& out) {
  std::vector<std::string> bodies;
  std::size_t at = 0;
  while (at < out.size()) {
    const auto end = out.find("\r\n\r\n", at);
    if (end == std::string::npos) std::abort();  // a response cut short
    const std::string head = Lower(out.substr(at, end - at));
    const auto length = head.find("\r\ncontent-length: ");
    if (length == std::string::npos) std::abort();
    const std::size_t bytes = std::strtoull(head.c_str() + length + 18, nullptr, 10);
    bodies.push_back(out.substr(end + 4, bytes));
    at = end + 4 + bytes;
  }
  return bodies;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::unique_ptr<tandem::rt::ApiServer> server = [] {
    tandem::rt::ApiServerOptions options;
    options.listen = "127.0.0.1:0";
    return std::make_unique<tandem::rt::ApiServer>(options);
  }();
  std::string head(reinterpret_cast<const char*>(data), size);
  // The head ends where the input says: an empty line inside it would end it early.
  if (head.find("\r\n\r\n") != std::string::npos || head.rfind("\r\n", 0) == 0) return 0;
  if (!head.empty() && head.back() != '\n') head += "\r\n";
  const std::string raw = "POST /v1/chat/completions HTTP/1.1\r\nContent-Type: application/json\r\n" + head + "\r\n{}" +
                          "GET /hidden-request HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  const std::vector<std::string> bodies = ResponseBodies(server->HandleForTesting(raw));
  // The hidden request, when run, is answered 404 "no route GET /hidden-request", after the POST's answer.
  const bool hidden_answered =
      std::any_of(bodies.begin() + std::min<std::ptrdiff_t>(1, static_cast<std::ptrdiff_t>(bodies.size())), bodies.end(),
                  [](const std::string& b) { return b.find("no route GET /hidden-request") != std::string::npos; });
  if (hidden_answered && !FramesTwoBytes(head)) std::abort();
  if (!bodies.empty() && bodies.front().rfind(R"({"error":{"code":"invalid_framing")", 0) == 0 && bodies.size() > 1) std::abort();
  return 0;
}
