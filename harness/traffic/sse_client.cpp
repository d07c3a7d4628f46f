#include "harness/traffic/sse_client.hpp"

#include <chrono>

#include <httplib.h>

#include <fmt/format.h>

namespace tandem::harness {

namespace {

struct Endpoint {
  std::string host;
  int port = 80;
};

Endpoint Parse(const std::string& base_url) {
  std::string rest = base_url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos) return {rest, 80};
  return {rest.substr(0, colon), std::atoi(rest.c_str() + colon + 1)};
}

httplib::Client MakeClient(const std::string& base_url, double timeout_s) {
  const Endpoint e = Parse(base_url);
  httplib::Client client(e.host, e.port);
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  client.set_connection_timeout(std::chrono::seconds(10));
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  return client;
}

}  // namespace

double MonotonicSeconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

StreamedCompletion StreamChat(const std::string& base_url, nlohmann::ordered_json body, double timeout_s, const std::string& api_key) {
  StreamedCompletion out;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  httplib::Client client = MakeClient(base_url, timeout_s);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  if (!api_key.empty()) req.set_header("Authorization", "Bearer " + api_key);
  SseCompletionParser parser(out);
  req.content_receiver = [&](const char* data, std::size_t len, std::uint64_t, std::uint64_t) {
    parser.Feed(std::string_view(data, len), MonotonicSeconds());
    return true;
  };
  out.t_start = MonotonicSeconds();
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(req, res, error);
  out.status = sent ? res.status : 0;
  if (!sent) {
    out.error = fmt::format("request failed: {}", httplib::to_string(error));
  } else if (res.status != 200 && out.error.empty()) {
    const std::string text = !parser.non_event_text().empty() ? parser.non_event_text() : res.body;
    const auto j = nlohmann::json::parse(text, nullptr, false);
    out.error = fmt::format("HTTP {}: {}", res.status,
                            !j.is_discarded() && j.contains("error") ? j["error"].value("message", text) : text.substr(0, 300));
  }
  return out;
}

std::string HttpGet(const std::string& base_url, const std::string& path, double timeout_s, int* status, const std::string& api_key) {
  httplib::Client client = MakeClient(base_url, timeout_s);
  httplib::Headers headers;
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  auto res = client.Get(path.c_str(), headers);
  if (status != nullptr) *status = res ? res->status : 0;
  if (!res || res->status != 200) return "";
  return res->body;
}

}  // namespace tandem::harness
