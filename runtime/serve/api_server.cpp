#include "runtime/serve/api_server.hpp"

#include <atomic>
#include <ctime>
#include <mutex>
#include <optional>
#include <thread>

#include <httplib.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/serve/api_error.hpp"
#include "runtime/serve/completion_request.hpp"
#include "runtime/serve/listen_backlog.hpp"
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

}  // namespace

struct ApiServer::State {
  ApiServerOptions options;
  httplib::Server server;
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

  Scheduler* Ready() {
    std::lock_guard lock(mutex);
    return scheduler;
  }

  bool Authorized(const httplib::Request& req, httplib::Response& res) {
    if (options.api_key.empty()) return true;
    if (req.get_header_value("Authorization") == "Bearer " + options.api_key) return true;
    SendError(res, ApiError(401,
                            req.has_header("Authorization") ? "the API key is not valid"
                                                            : "an API key is required: "
                                                              "'Authorization: Bearer KEY'",
                            "authentication_error", "invalid_api_key"));
    return false;
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
    res.set_content(s->StatsJson(), "application/json");
  }

  void Completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
};

void ApiServer::State::Completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  Scheduler* scheduler_ptr = Ready();
  if (scheduler_ptr == nullptr) return SendError(res, ApiError(503, "the model is still loading", "server_error", "loading"));
  Scheduler& sched = *scheduler_ptr;
  CompletionRequest request;
  Submission submission;
  try {
    request = ParseCompletionRequest(req.body, endpoint, model.vocab_size);
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
      throw ApiError::BadRequest(
          fmt::format("'max_tokens' is {}, the server allows at most {}", request.max_tokens, model.max_output_tokens), "max_tokens");
    }
    const int max_new = request.max_tokens > 0 ? request.max_tokens : std::min(model.max_output_tokens, model.max_context - prompt);
    if (prompt + max_new > model.max_context || max_new < 1) {
      throw ApiError(400,
                     fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceeds the context of {} tokens", prompt,
                                 std::max(max_new, 1), model.max_context),
                     "invalid_request_error", "context_length_exceeded", "messages");
    }
    submission.max_new_tokens = max_new;
    submission.sampling = request.sampling;
    submission.stop = request.stop;
    submission.ignore_eos = request.ignore_eos;
    submission.grammar = request.grammar;
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
  // Wait for a slot: the status line depends on it.
  std::optional<StreamEvent> first;
  while (!(first = stream->Pop(std::chrono::milliseconds(500)))) {
  }
  if (first->kind == StreamEvent::Kind::kFailed) {
    return SendError(res, ApiError(first->status, first->text, first->error_type), first->retry_after_s);
  }

  const std::string id = fmt::format("{}-{}", endpoint == Endpoint::kChatCompletions ? "chatcmpl" : "cmpl", next_id++);
  const std::int64_t created = std::time(nullptr);
  const bool chat_endpoint = endpoint == Endpoint::kChatCompletions;
  const std::string object = chat_endpoint ? "chat.completion" : "text_completion";
  auto chunk = [=, this](const json& delta_or_text, const json& finish_reason) {
    json choice = {{"index", 0}, {"finish_reason", finish_reason}};
    if (chat_endpoint) {
      choice["delta"] = delta_or_text;
    } else {
      choice["text"] = delta_or_text;
      choice["logprobs"] = nullptr;
    }
    return json{{"id", id},
                {"object", chat_endpoint ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", options.served_model},
                {"choices", json::array({choice})}};
  };

  if (!request.stream) {
    std::string text, reasoning;
    for (;;) {
      std::optional<StreamEvent> e = stream->Pop(std::chrono::milliseconds(1000));
      if (!e) continue;
      if (e->kind == StreamEvent::Kind::kDelta) {
        (e->reasoning ? reasoning : text) += e->text;
      } else if (e->kind == StreamEvent::Kind::kFailed) {
        return SendError(res, ApiError(e->status, e->text, e->error_type));
      } else if (e->kind == StreamEvent::Kind::kFinished) {
        json choice = {{"index", 0}, {"finish_reason", e->finish_reason}};
        if (chat_endpoint) {
          choice["message"] = {{"role", "assistant"}, {"content", text}};
          if (request.thinking) choice["message"]["reasoning_content"] = reasoning;
        } else {
          choice["text"] = text;
          choice["logprobs"] = nullptr;
        }
        res.set_content(Dump(json{{"id", id},
                                  {"object", object},
                                  {"created", created},
                                  {"model", options.served_model},
                                  {"choices", json::array({choice})},
                                  {"usage", UsageJson(e->usage)}}),
                        "application/json");
        return;
      }
    }
  }

  const bool include_usage = request.include_usage;
  auto finished = std::make_shared<bool>(false);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [=, this, started = false](std::size_t, httplib::DataSink& sink) mutable {
        auto write = [&](const std::string& data) {
          if (!sink.write(data.data(), data.size())) {
            stream->Cancel();  // the client went away
            return false;
          }
          return true;
        };
        if (!started) {
          started = true;
          if (chat_endpoint && !write(Sse(chunk({{"role", "assistant"}, {"content", ""}}, nullptr)))) return false;
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
                Sse(chunk(chat_endpoint ? json{{e->reasoning ? "reasoning_content" : "content", e->text}} : json(e->text), nullptr)));
          }
          if (e->kind == StreamEvent::Kind::kFinished) {
            if (!write(Sse(chunk(chat_endpoint ? json::object() : json(""), e->finish_reason)))) return false;
            if (include_usage) {
              const json usage = {{"id", id},
                                  {"object", chat_endpoint ? "chat.completion.chunk" : "text_completion"},
                                  {"created", created},
                                  {"model", options.served_model},
                                  {"choices", json::array()},
                                  {"usage", UsageJson(e->usage)}};
              if (!write(Sse(usage))) return false;
            }
            if (!write("data: [DONE]\n\n")) return false;
            *finished = true;
            sink.done();
            return true;
          }
          if (e->kind == StreamEvent::Kind::kFailed) {
            // No [DONE]: the stream is incomplete, and says why.
            write(Sse(ErrorJson(e->text, e->error_type, "", "")));
            *finished = true;
            sink.done();
            return true;
          }
        }
      },
      [stream, finished](bool) {
        if (!*finished) stream->Cancel();
      });
}

ApiServer::ApiServer(ApiServerOptions options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = std::move(options);
  const auto colon = s.options.listen.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error(fmt::format("--listen '{}' is not HOST:PORT", s.options.listen));
  s.host = s.options.listen.substr(0, colon);
  const int wanted = std::atoi(s.options.listen.c_str() + colon + 1);
  const int threads = s.options.threads;
  s.server.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
  s.server.set_read_timeout(s.options.io_timeout);
  s.server.set_write_timeout(s.options.io_timeout);
  s.server.set_payload_max_length(16u << 20);
  s.server.set_keep_alive_max_count(1000);

  s.server.Get("/health", [this](const httplib::Request&, httplib::Response& res) { state_->Health(res); });
  s.server.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (state_->Authorized(req, res)) state_->Models(res);
  });
  s.server.Get("/v1/stats", [this](const httplib::Request& req, httplib::Response& res) {
    if (state_->Authorized(req, res)) state_->Stats(res);
  });
  s.server.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    if (state_->Authorized(req, res)) state_->Completion(req, res, Endpoint::kChatCompletions);
  });
  s.server.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    if (state_->Authorized(req, res)) state_->Completion(req, res, Endpoint::kCompletions);
  });
  s.server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler already wrote an OpenAI-shaped error
    const std::string message = res.status == 404   ? fmt::format("no route {} {}", req.method, req.path)
                                : res.status == 413 ? "the request body is too large"
                                                    : fmt::format("HTTP {}", res.status);
    res.set_content(Dump(ErrorJson(message, "invalid_request_error", "", "")), "application/json");
  });
  s.server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
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

  const rt::ListenBacklog backlog(s.server);
  if (wanted == 0) {
    s.port = s.server.bind_to_any_port(s.host);
  } else {
    s.port = s.server.bind_to_port(s.host, wanted) ? wanted : -1;
  }
  if (s.port <= 0) throw std::runtime_error(fmt::format("--listen {}: cannot bind", s.options.listen));
  // Every client of a concurrency-C batch connects at once; room for all of them and the queue.
  backlog.Widen(std::max(1024, 4 * threads));
  s.thread = std::thread([this] { state_->server.listen_after_bind(); });
}

ApiServer::~ApiServer() { Stop(); }

std::string ApiServer::address() const { return fmt::format("{}:{}", state_->host, state_->port); }

void ApiServer::Attach(Scheduler* scheduler, const Tokenizer* tokenizer, ChatTemplate chat, ServedModel model) {
  std::lock_guard lock(state_->mutex);
  state_->tokenizer = tokenizer;
  state_->chat = std::move(chat);
  state_->model = std::move(model);
  state_->scheduler = scheduler;
}

void ApiServer::SetDraining() { state_->draining = true; }

void ApiServer::Stop() {
  if (state_->thread.joinable()) {
    state_->server.stop();
    state_->thread.join();
  }
}

}  // namespace tandem::rt
