#include "runtime/serve/api_server.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <ctime>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include <httplib.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/serve/api_error.hpp"
#include "runtime/serve/completion_request.hpp"
#include "runtime/serve/http_server.hpp"
#include "runtime/serve/listen_backlog.hpp"
#include "runtime/serve/request_limits.hpp"
#include "runtime/serve/runtime_revision.hpp"
#include "runtime/serve/scheduler.hpp"

namespace tandem::rt {

namespace {

using nlohmann::json;

// Serialises a response. Error messages can quote a client's invalid UTF-8 back to
// it; those bytes become U+FFFD rather than an exception.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json ErrorJson(const std::string& message, const std::string& type, const std::string& code, const std::string& param) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"code", code.empty() ? json(nullptr) : json(code)},
            {"param", param.empty() ? json(nullptr) : json(param)}}}};
}

void SendError(httplib::Response& res, const ApiError& e, int retry_after_s = 0) {
  res.status = e.status();
  if (retry_after_s > 0) res.set_header("Retry-After", std::to_string(retry_after_s));
  res.set_content(Dump(ErrorJson(e.what(), e.type(), e.code(), e.param())), "application/json");
}

json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"prompt_cache_hit_tokens", u.cached_tokens},
          {"prompt_cache_miss_tokens", u.prompt_tokens - u.cached_tokens},
          {"completion_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}}};
}

std::string Sse(const json& payload) { return "data: " + Dump(payload) + "\n\n"; }

// The OpenAI shapes of one reply, streamed (chunks, the usage chunk) or whole: one place
// for the fields both carry (id, object, created, model).
struct OpenAiReply {
  std::string id;
  std::int64_t created = 0;
  std::string model;
  bool chat = true;  // chat completions; else completions

  json Envelope(const std::string& object, json choices) const {
    return json{{"id", id}, {"object", object}, {"created", created}, {"model", model}, {"choices", std::move(choices)}};
  }
  std::string ChunkObject() const { return chat ? "chat.completion.chunk" : "text_completion"; }

  // A streamed chunk: a chat delta, or a completion's text.
  json Chunk(const json& delta_or_text, const json& finish_reason) const {
    json choice = {{"index", 0}, {"finish_reason", finish_reason}};
    if (chat) {
      choice["delta"] = delta_or_text;
    } else {
      choice["text"] = delta_or_text;
      choice["logprobs"] = nullptr;
    }
    return Envelope(ChunkObject(), json::array({choice}));
  }
  // The chunk a stream ends with when the client asked for usage.
  json UsageChunk(const Usage& usage) const {
    json j = Envelope(ChunkObject(), json::array());
    j["usage"] = UsageJson(usage);
    return j;
  }
  // A whole reply; `reasoning` is sent when the request asked to think.
  json Whole(const std::string& text, const std::optional<std::string>& reasoning, const std::string& finish_reason,
             const Usage& usage) const {
    json choice = {{"index", 0}, {"finish_reason", finish_reason}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
      if (reasoning) choice["message"]["reasoning_content"] = *reasoning;
    } else {
      choice["text"] = text;
      choice["logprobs"] = nullptr;
    }
    json j = Envelope(chat ? "chat.completion" : "text_completion", json::array({choice}));
    j["usage"] = UsageJson(usage);
    return j;
  }
};

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// Compares in time that depends on the lengths only, not on where the first difference
// is: a key guessed byte by byte learns nothing from the response time.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    difference |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  }
  return difference == 0;
}

// The credentials of `Authorization: Bearer KEY`; the scheme is case-insensitive (RFC 7235).
std::optional<std::string_view> BearerToken(std::string_view header) {
  const auto space = header.find(' ');
  if (space == std::string_view::npos || Lower(std::string(header.substr(0, space))) != "bearer") return std::nullopt;
  std::string_view token = header.substr(space + 1);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return token;
}

// HOST:PORT with a port in [0, 65535], digits only; [v6]:PORT too.
std::pair<std::string, int> ListenAddress(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument(fmt::format("--listen '{}' is not HOST:PORT", listen));
  std::string host = listen.substr(0, colon);
  const std::string port_text = listen.substr(colon + 1);
  int port = -1;
  const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || error != std::errc() || end != port_text.data() + port_text.size() || port < 0 || port > 65535 ||
      port_text.find_first_not_of("0123456789") != std::string::npos) {
    throw std::invalid_argument(fmt::format("--listen '{}': the port '{}' is not a number in [0, 65535]", listen, port_text));
  }
  if (host.empty()) {
    throw std::invalid_argument(fmt::format(
        "--listen '{}': the host is missing (127.0.0.1:{} for this machine only, 0.0.0.0:{} for every interface)", listen, port, port));
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return {host, port};
}

}  // namespace

struct ApiServer::State {
  ApiServerOptions options;
  std::unique_ptr<HttpServer> server;
  std::thread thread;
  int port = 0;
  std::string host;

  std::mutex mutex;  // guards the fields below, set once by Attach
  Scheduler* scheduler = nullptr;
  const Tokenizer* tokenizer = nullptr;
  std::optional<ChatTemplate> chat;
  ServedModel model;
  std::atomic<bool> draining{false};
  std::atomic<std::uint64_t> next_id{1};
  std::atomic<int> open_streams{0};  // streamed responses not yet ended
  std::atomic<bool> listening_ended{false};
  bool loopback = false;  // listening on a loopback address only

  Scheduler* Ready() {
    std::lock_guard lock(mutex);
    return scheduler;
  }

  bool Authorized(const httplib::Request& req, httplib::Response& res) {
    if (options.api_key.empty()) return true;
    const std::string header = req.get_header_value("Authorization");
    const std::optional<std::string_view> token = BearerToken(header);
    if (token && ConstantTimeEquals(*token, options.api_key)) return true;
    SendError(res, ApiError(401,
                            req.has_header("Authorization") ? "the API key is not valid"
                                                            : "an API key is required: "
                                                              "'Authorization: Bearer KEY'",
                            "authentication_error", "invalid_api_key"));
    return false;
  }

  // Loopback servers answer only to names of this machine, so a page on a rebound
  // domain (attacker.example resolving to 127.0.0.1) cannot use the user's browser as
  // a same-origin client. A server on another address is reached by names Tandem cannot
  // know; there the API key protects it.
  bool HostAllowed(const std::string& host_header) const {
    if (!loopback || host_header.empty()) return true;  // HTTP/1.0 clients may send none; browsers always do
    std::string name = Lower(host_header);
    if (!name.empty() && name.front() == '[') {
      name = name.substr(0, name.find(']') + 1);
    } else if (const auto colon = name.rfind(':'); colon != std::string::npos) {
      name = name.substr(0, colon);
    }
    const bool ipv4_loopback = name.rfind("127.", 0) == 0 && name.find_first_not_of("0123456789.") == std::string::npos;
    const bool dot_localhost = name.size() > 10 && name.compare(name.size() - 10, 10, ".localhost") == 0;  // browsers keep it local
    if (name == "localhost" || name == "[::1]" || ipv4_loopback || dot_localhost) return true;
    return std::find(options.allow_hosts.begin(), options.allow_hosts.end(), name) != options.allow_hosts.end();
  }

  bool OriginAllowed(const std::string& origin) const {
    return std::any_of(options.allow_origins.begin(), options.allow_origins.end(),
                       [&](const std::string& allowed) { return allowed == "*" || allowed == origin; });
  }

  // Runs before a request's body is read: cross-origin policy, content type and the API
  // key, so a refused request costs no body and no parsing. False: answered here.
  bool Screen(const httplib::Request& req, httplib::Response& res) {
    const std::string origin = req.get_header_value("Origin");
    const bool granted = !origin.empty() && OriginAllowed(origin);
    if (granted && !res.has_header("Access-Control-Allow-Origin")) {  // screened twice when the client sent Expect: 100-continue
      res.set_header("Access-Control-Allow-Origin", origin);
      res.set_header("Vary", "Origin");
    }
    const bool has_body = req.has_header("Content-Length") || req.has_header("Transfer-Encoding");
    auto refuse = [&](const ApiError& e) {
      SendError(res, e);
      if (has_body) HttpServer::CloseConnectionAfterResponse(res);  // its body stays unread
      return false;
    };
    // httplib reads no body of a GET: it would be taken for the next request.
    if (has_body && req.method != "POST") HttpServer::CloseConnectionAfterResponse(res);
    if (!HostAllowed(req.get_header_value("Host"))) {
      return refuse(ApiError(403,
                             fmt::format("Host '{}' does not name this server, which listens on {} (a page on another "
                                         "domain resolving to this machine?); use http://127.0.0.1:{}, or allow the name with "
                                         "--allow-host",
                                         req.get_header_value("Host"), host, port),
                             "permission_error", "host_not_allowed"));
    }
    if (req.method == "OPTIONS") {
      if (!granted) {
        return refuse(ApiError(403,
                               origin.empty() ? "OPTIONS is a CORS preflight; this request has no Origin"
                                              : fmt::format("cross-origin requests from '{}' are not allowed; start the server with "
                                                            "--allow-origin {} to allow them",
                                                            origin, origin),
                               "permission_error", "origin_not_allowed"));
      }
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "600");
      if (has_body) HttpServer::CloseConnectionAfterResponse(res);
      return false;
    }
    if (req.method == "POST") {
      // Browsers send text/plain, form and multipart bodies cross-origin without asking
      // first; application/json needs a preflight, which only --allow-origin grants.
      const std::string type = req.get_header_value("Content-Type");
      std::string media = Lower(type.substr(0, type.find(';')));
      media.erase(std::remove(media.begin(), media.end(), ' '), media.end());
      const std::string encoding = Lower(req.get_header_value("Content-Encoding"));
      if (!encoding.empty() && encoding != "identity") {
        // A compressed body is inflated before any bound on the request's size applies.
        return refuse(ApiError(415, fmt::format("Content-Encoding '{}' is not supported: send the body uncompressed", encoding),
                               "invalid_request_error", "unsupported_media_type"));
      }
      if (media != "application/json") {
        return refuse(ApiError(415,
                               type.empty() ? "the request has no Content-Type: send the JSON body with 'Content-Type: application/json'"
                                            : fmt::format("Content-Type '{}' is not supported: send the JSON body with "
                                                          "'Content-Type: application/json'",
                                                          type),
                               "invalid_request_error", "unsupported_media_type"));
      }
    }
    if (req.path.rfind("/v1/", 0) == 0 && !Authorized(req, res)) {
      if (has_body) HttpServer::CloseConnectionAfterResponse(res);
      return false;
    }
    return true;
  }

  void Health(httplib::Response& res) {
    Scheduler* s = Ready();
    std::string problem = s == nullptr ? "loading" : draining ? "draining" : s->Unhealthy();
    res.status = problem.empty() ? 200 : 503;
    res.set_content(Dump(json{{"status", problem.empty() ? "ok" : problem}}), "application/json");
  }

  void Models(httplib::Response& res) {
    Scheduler* s = Ready();
    if (s == nullptr) return SendError(res, ApiError(503, "the model is still loading", "server_error", "loading"));
    res.set_content(Dump(json{{"object", "list"},
                              {"data",
                               {{{"id", options.served_model},
                                 {"object", "model"},
                                 {"created", 0},
                                 {"owned_by", "tandem"},
                                 {"model_revision", model.model_revision},
                                 {"runtime_revision", std::string(RuntimeRevision())},
                                 {"max_context", model.max_context},
                                 {"max_output_tokens", model.max_output_tokens}}}}}),
                    "application/json");
  }

  void Stats(httplib::Response& res) {
    Scheduler* s = Ready();
    if (s == nullptr) return SendError(res, ApiError(503, "the model is still loading", "server_error", "loading"));
    if (model.startup_json.empty()) return res.set_content(s->StatsJson(), "application/json");
    nlohmann::json stats = nlohmann::json::parse(s->StatsJson());
    stats["startup"] = nlohmann::json::parse(model.startup_json);
    res.set_content(stats.dump(), "application/json");
  }

  void Completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  Submission ToSubmission(const CompletionRequest& request, Endpoint endpoint) const;
  void SendWholeReply(RequestStream& stream, const OpenAiReply& reply, bool thinking, httplib::Response& res);
  void StreamReply(std::shared_ptr<RequestStream> stream, const OpenAiReply& reply, bool include_usage, httplib::Response& res);
};

// The request as the scheduler takes it: the prompt encoded, the limits checked against
// the model. Throws ApiError (400, 404) naming what is wrong.
Submission ApiServer::State::ToSubmission(const CompletionRequest& request, Endpoint endpoint) const {
  Submission submission;
  if (!request.model.empty() && request.model != options.served_model) {
    throw ApiError(404, fmt::format("the model '{}' does not exist; this server serves '{}'", request.model, options.served_model),
                   "invalid_request_error", "model_not_found", "model");
  }
  if (request.thinking) {
    if (endpoint != Endpoint::kChatCompletions) throw ApiError::BadRequest("'thinking' applies to chat completions only", "thinking");
    const std::optional<TokenId> end = tokenizer->Find(ChatTemplate::kThinkEnd);
    if (!end) throw ApiError::BadRequest("this model's tokenizer has no </think> token: it cannot think", "thinking");
    submission.think_end = *end;
  }
  if (endpoint == Endpoint::kChatCompletions) {
    submission.prompt = chat->Encode(*tokenizer, request.messages, true, request.thinking);
  } else if (request.prompt_is_tokens) {
    submission.prompt = request.prompt_tokens;
  } else {
    submission.prompt = {model.bos};
    const std::vector<TokenId> text = tokenizer->Encode(request.prompt_text);
    submission.prompt.insert(submission.prompt.end(), text.begin(), text.end());
  }
  const auto prompt = static_cast<int>(submission.prompt.size());
  if (request.max_tokens > model.max_output_tokens) {
    throw ApiError::BadRequest(fmt::format("'max_tokens' is {}, the server allows at most {}", request.max_tokens, model.max_output_tokens),
                               "max_tokens");
  }
  const int max_new = request.max_tokens > 0 ? request.max_tokens : std::min(model.max_output_tokens, model.max_context - prompt);
  if (prompt + max_new > model.max_context || max_new < 1) {
    throw ApiError(400,
                   fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceeds the context of {} tokens", prompt, std::max(max_new, 1),
                               model.max_context),
                   "invalid_request_error", "context_length_exceeded", "messages");
  }
  submission.max_new_tokens = max_new;
  submission.sampling = request.sampling;
  submission.stop = request.stop;
  submission.ignore_eos = request.ignore_eos;
  submission.grammar = request.grammar;
  return submission;
}

void ApiServer::State::Completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  // The body is checked first: a malformed request gets its 400 even while the model
  // loads (and the request path can be fuzzed without a model).
  CompletionRequest request;
  try {
    request = ParseCompletionRequest(req.body, endpoint, Ready() != nullptr ? model.vocab_size : 0);
  } catch (const ApiError& e) {
    if (Scheduler* s = Ready()) s->CountInvalidRequest();
    return SendError(res, e);
  }
  Scheduler* scheduler_ptr = Ready();
  if (scheduler_ptr == nullptr) return SendError(res, ApiError(503, "the model is still loading", "server_error", "loading"));
  Scheduler& sched = *scheduler_ptr;
  Submission submission;
  try {
    submission = ToSubmission(request, endpoint);
  } catch (const ApiError& e) {
    sched.CountInvalidRequest();
    return SendError(res, e);
  }
  std::shared_ptr<RequestStream> stream;
  try {
    stream = sched.Submit(std::move(submission));
  } catch (const ApiError& e) {
    return SendError(res, e, e.status() == 429 ? 1 : 0);
  }
  // Wait for a slot: the status line depends on it. A client that hangs up meanwhile
  // takes its request out of the queue.
  std::optional<StreamEvent> first;
  while (!(first = stream->Pop(std::chrono::milliseconds(200)))) {
    if (HttpServer::ClientGone()) {
      stream->Cancel();
      return;
    }
  }
  if (first->kind == StreamEvent::Kind::kFailed) {
    return SendError(res, ApiError(first->status, first->text, first->error_type), first->retry_after_s);
  }
  const bool chat_endpoint = endpoint == Endpoint::kChatCompletions;
  const OpenAiReply reply{fmt::format("{}-{}", chat_endpoint ? "chatcmpl" : "cmpl", next_id++), std::time(nullptr), options.served_model,
                          chat_endpoint};
  if (request.stream) return StreamReply(stream, reply, request.include_usage, res);
  SendWholeReply(*stream, reply, request.thinking, res);
}

// A reply that is not streamed: the deltas gathered, sent once finished. Whether the
// client is still there is asked now and then: one that hung up is cancelled as a
// streaming one is, instead of decoding to the end for nobody.
void ApiServer::State::SendWholeReply(RequestStream& stream, const OpenAiReply& reply, bool thinking, httplib::Response& res) {
  std::string text, reasoning;
  auto checked = std::chrono::steady_clock::now();
  for (;;) {
    std::optional<StreamEvent> e = stream.Pop(std::chrono::milliseconds(200));
    if (const auto now = std::chrono::steady_clock::now(); now - checked > std::chrono::milliseconds(200)) {
      checked = now;
      if (HttpServer::ClientGone()) {
        stream.Cancel();
        return;
      }
    }
    if (!e) continue;
    if (e->kind == StreamEvent::Kind::kDelta) {
      (e->reasoning ? reasoning : text) += e->text;
    } else if (e->kind == StreamEvent::Kind::kFailed) {
      return SendError(res, ApiError(e->status, e->text, e->error_type));
    } else if (e->kind == StreamEvent::Kind::kFinished) {
      res.set_content(Dump(reply.Whole(text, thinking ? std::optional(reasoning) : std::nullopt, e->finish_reason, e->usage)),
                      "application/json");
      return;
    }
  }
}

// A streamed reply: server-sent events, one chunk per delta, then the finishing chunk,
// the usage chunk when asked for, and [DONE]. A client that goes away cancels the request.
void ApiServer::State::StreamReply(std::shared_ptr<RequestStream> stream, const OpenAiReply& reply, bool include_usage,
                                   httplib::Response& res) {
  auto finished = std::make_shared<bool>(false);
  ++open_streams;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [=, started = false](std::size_t, httplib::DataSink& sink) mutable {
        auto write = [&](const std::string& data) {
          if (!sink.write(data.data(), data.size())) {
            stream->Cancel();  // the client went away
            return false;
          }
          return true;
        };
        if (!started) {
          started = true;
          if (reply.chat && !write(Sse(reply.Chunk({{"role", "assistant"}, {"content", ""}}, nullptr)))) return false;
        }
        for (;;) {
          std::optional<StreamEvent> e = stream->Pop(std::chrono::milliseconds(50));
          if (!e) {
            if (!sink.is_writable()) {
              stream->Cancel();
              return false;
            }
            continue;
          }
          if (e->kind == StreamEvent::Kind::kDelta) {
            // Completions have no reasoning field: their think block is part of the text.
            return write(
                Sse(reply.Chunk(reply.chat ? json{{e->reasoning ? "reasoning_content" : "content", e->text}} : json(e->text), nullptr)));
          }
          if (e->kind == StreamEvent::Kind::kFinished) {
            if (!write(Sse(reply.Chunk(reply.chat ? json::object() : json(""), e->finish_reason)))) return false;
            if (include_usage && !write(Sse(reply.UsageChunk(e->usage)))) return false;
            if (!write("data: [DONE]\n\n")) return false;
            *finished = true;
            sink.done();
            return true;
          }
          if (e->kind == StreamEvent::Kind::kFailed) {
            // No [DONE]: the stream is incomplete, and says why (as when a drain runs out
            // of time: "the server is shutting down"); the chunked body still ends properly.
            write(Sse(ErrorJson(e->text, e->error_type, "", "")));
            *finished = true;
            sink.done();
            return true;
          }
        }
      },
      [this, stream, finished](bool) {
        if (!*finished) stream->Cancel();
        --open_streams;
      });
}

ApiServer::ApiServer(ApiServerOptions options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = std::move(options);
  const auto [host, wanted] = ListenAddress(s.options.listen);
  s.host = host;
  s.loopback = host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
  s.options.http.max_body_bytes = limits::kBodyBytes;
  s.server = std::make_unique<HttpServer>(s.options.http);
  httplib::Server& server = *s.server;
  server.set_payload_max_length(limits::kBodyBytes);
  server.set_keep_alive_max_count(1000);

  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return state_->Screen(req, res) ? httplib::Server::HandlerResponse::Unhandled : httplib::Server::HandlerResponse::Handled;
  });
  // A client that asks before sending its body (curl does for large ones) is screened
  // first: it hears 401 or 415 instead of "100 Continue" and never uploads.
  server.set_expect_100_continue_handler(
      [this](const httplib::Request& req, httplib::Response& res) { return state_->Screen(req, res) ? 100 : res.status; });
  server.Get("/health", [this](const httplib::Request&, httplib::Response& res) { state_->Health(res); });
  server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { state_->Models(res); });
  server.Get("/v1/stats", [this](const httplib::Request&, httplib::Response& res) { state_->Stats(res); });
  server.Post("/v1/chat/completions",
              [this](const httplib::Request& req, httplib::Response& res) { state_->Completion(req, res, Endpoint::kChatCompletions); });
  server.Post("/v1/completions",
              [this](const httplib::Request& req, httplib::Response& res) { state_->Completion(req, res, Endpoint::kCompletions); });
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler already wrote an OpenAI-shaped error
    // httplib's own refusals: a request that did not parse or arrive in time, or was too
    // large. What follows it on the connection cannot be trusted to start a request.
    if (res.status == 400 || res.status == 413 || res.status == 414) HttpServer::CloseConnectionAfterResponse(res);
    if (const std::string head = HttpServer::RequestHeadRefusal(); res.status == 400 && !head.empty()) {
      // Where this request's body ends is unclear: so is where the next one would start.
      res.set_content(Dump(ErrorJson(head, "invalid_request_error", "invalid_framing", "")), "application/json");
      return;
    }
    const std::string message = res.status == 404   ? fmt::format("no route {} {}", req.method, req.path)
                                : res.status == 413 ? fmt::format("the request body is larger than {} bytes", limits::kBodyBytes)
                                : res.status == 400 ? "the request is malformed, or did not arrive in time"
                                                    : fmt::format("HTTP {}", res.status);
    res.set_content(Dump(ErrorJson(message, "invalid_request_error", "", "")), "application/json");
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      message = fmt::format("internal error: {}", e.what());
    } catch (...) {
    }
    res.status = 500;
    res.set_content(Dump(ErrorJson(message, "server_error", "", "")), "application/json");
  });

  const rt::ListenBacklog backlog(server);
  if (wanted == 0) {
    s.port = server.bind_to_any_port(s.host);
  } else {
    s.port = server.bind_to_port(s.host, wanted) ? wanted : -1;
  }
  if (s.port <= 0) {
    throw std::runtime_error(fmt::format("--listen {}: cannot bind (is the address local and the port free?)", s.options.listen));
  }
  // Every client of a concurrency-C batch connects at once; room for all of them and the queue.
  backlog.Widen(std::max(1024, s.options.http.max_connections));
  s.thread = std::thread([this] {
    state_->server->listen_after_bind();
    state_->listening_ended = true;
  });
}

ApiServer::~ApiServer() { Stop(); }

std::string ApiServer::address() const {
  // An IPv6 host is bracketed, as in a URL: [::1]:8000.
  if (state_->host.find(':') != std::string::npos) return fmt::format("[{}]:{}", state_->host, state_->port);
  return fmt::format("{}:{}", state_->host, state_->port);
}

void ApiServer::Attach(Scheduler* scheduler, const Tokenizer* tokenizer, ChatTemplate chat, ServedModel model) {
  std::lock_guard lock(state_->mutex);
  state_->tokenizer = tokenizer;
  state_->chat = std::move(chat);
  state_->model = std::move(model);
  state_->scheduler = scheduler;
}

void ApiServer::SetDraining() { state_->draining = true; }

std::string ApiServer::HandleForTesting(const std::string& raw) { return state_->server->ProcessForTesting(raw); }

void ApiServer::Stop(std::chrono::milliseconds grace) {
  if (!state_->thread.joinable()) return;
  // httplib abandons a chunked response mid-stream once the server stops (no error
  // event, no terminator), so first let the open streams write their last event.
  const auto until = std::chrono::steady_clock::now() + grace;
  while (state_->open_streams > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // httplib's stop() does nothing before its loop has begun: ask until it has ended.
  while (!state_->listening_ended) {
    state_->server->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  state_->thread.join();
}

}  // namespace tandem::rt
