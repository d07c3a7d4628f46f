#include "runtime/serve/completion_request.hpp"

#include <cmath>
#include <map>
#include <mutex>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/model/json_bounds.hpp"
#include "runtime/serve/api_error.hpp"
#include "runtime/serve/request_limits.hpp"

namespace tandem::rt {

namespace {

using json = nlohmann::ordered_json;  // keeps a response_format schema's property order

const json* Find(const json& body, const char* key) {
  const auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double Number(const json& body, const char* key, double fallback, double min, double max) {
  const json* v = Find(body, key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) throw ApiError::BadRequest(fmt::format("'{}' must be a number", key), key);
  const double x = v->get<double>();
  if (!(x >= min && x <= max)) throw ApiError::BadRequest(fmt::format("'{}' must be in [{}, {}], got {}", key, min, max, v->dump()), key);
  return x;
}

std::int64_t Integer(const json& body, const char* key, std::int64_t fallback, std::int64_t min, std::int64_t max) {
  const json* v = Find(body, key);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) throw ApiError::BadRequest(fmt::format("'{}' must be an integer, got {}", key, v->dump()), key);
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
    throw ApiError::BadRequest(fmt::format("'{}' must be in [{}, {}], got {}", key, min, max, v->dump()), key);
  }
  const auto x = v->get<std::int64_t>();
  if (x < min || x > max) throw ApiError::BadRequest(fmt::format("'{}' must be in [{}, {}], got {}", key, min, max, x), key);
  return x;
}

bool Bool(const json& body, const char* key, bool fallback) {
  const json* v = Find(body, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) throw ApiError::BadRequest(fmt::format("'{}' must be true or false", key), key);
  return v->get<bool>();
}

// OpenAI content is a string or a list of parts; only text parts carry meaning here.
std::string Content(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw ApiError::BadRequest(fmt::format("'{}' must be a string or a list of text parts", where), where);
  std::string text;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (part.is_object() && (part.value("type", json()) == "image_url" || part.value("type", json()) == "input_image" ||
                             part.value("type", json()) == "image")) {
      throw ApiError::BadRequest(
          fmt::format("'{}': image input is not supported: this server reads text only (no vision tower is loaded)", at), at);
    }
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") || !part["text"].is_string()) {
      throw ApiError::BadRequest(fmt::format("'{}' must be {{\"type\": \"text\", \"text\": ...}}", at), at);
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

void Unsupported(const json& body) {
  auto refuse = [](const char* key, const std::string& why) {
    throw ApiError(400, fmt::format("'{}' {}", key, why), "invalid_request_error", "unsupported_parameter", key);
  };
  if (Integer(body, "n", 1, 1, 1 << 20) != 1) refuse("n", "must be 1: one choice per request");
  for (const char* penalty : {"presence_penalty", "frequency_penalty", "repetition_penalty"}) {
    if (Number(body, penalty, 0.0, -1e9, 1e9) != 0.0) refuse(penalty, "is not supported (only 0)");
  }
  if (const json* v = Find(body, "logit_bias"); v != nullptr && !(v->is_object() && v->empty())) refuse("logit_bias", "is not supported");
  // Tool and function calling and log-probabilities are not served: a request that asks
  // for them hears so, whichever of their fields it uses (a field left as its "off" value passes).
  const auto off = [&](const char* key, auto&& is_off) {
    const json* v = Find(body, key);
    return v == nullptr || v->is_null() || is_off(*v);
  };
  const auto empty_list = [](const json& v) { return v.is_array() && v.empty(); };
  const auto none = [](const json& v) { return v.is_string() && v.get<std::string>() == "none"; };
  if (!off("tools", empty_list)) refuse("tools", "are not supported");
  if (!off("functions", empty_list)) refuse("functions", "are not supported");
  if (!off("tool_choice", none)) refuse("tool_choice", "is not supported (no tools are; only \"none\")");
  if (!off("function_call", none)) refuse("function_call", "is not supported (no functions are; only \"none\")");
  if (!off("logprobs", [](const json& v) { return v.is_boolean() && !v.get<bool>(); })) refuse("logprobs", "is not supported");
  if (!off("top_logprobs", [](const json& v) { return v.is_number_integer() && v.get<std::int64_t>() == 0; })) {
    refuse("top_logprobs", "is not supported (logprobs are not)");
  }
}

// The compiled grammars of recent schemas, by their canonical text.
std::shared_ptr<const JsonGrammar> CachedGrammar(const json& schema) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const JsonGrammar>> cache;
  const std::string key = schema.dump();
  {
    std::lock_guard lock(mutex);
    if (const auto it = cache.find(key); it != cache.end()) return it->second;
  }
  auto grammar = JsonGrammar::Compile(schema);
  std::lock_guard lock(mutex);
  if (cache.size() >= 256) cache.clear();  // a crude bound: clients rarely use that many schemas
  cache.emplace(key, grammar);
  return grammar;
}

// thinking: {"type": "enabled" | "disabled"} (DeepSeek's API), or reasoning_effort:
// "low" | "medium" | "high" (OpenAI's; any of them enables thinking). Off by default.
bool Thinking(const json& body) {
  bool on = false;
  if (const json* t = Find(body, "thinking"); t != nullptr && !t->is_null()) {
    if (!t->is_object() || !t->contains("type") || !((*t)["type"] == "enabled" || (*t)["type"] == "disabled")) {
      throw ApiError::BadRequest("'thinking' must be {\"type\": \"enabled\"} or {\"type\": \"disabled\"}", "thinking");
    }
    on = (*t)["type"] == "enabled";
  }
  if (const json* e = Find(body, "reasoning_effort"); e != nullptr && !e->is_null()) {
    if (!e->is_string() || !(*e == "low" || *e == "medium" || *e == "high")) {
      throw ApiError::BadRequest("'reasoning_effort' must be low, medium or high", "reasoning_effort");
    }
    on = true;
  }
  return on;
}

// response_format: text | json_object | json_schema {json_schema: {name, schema, strict}}.
std::shared_ptr<const JsonGrammar> ResponseFormat(const json& body) {
  const json* v = Find(body, "response_format");
  if (v == nullptr || v->is_null()) return nullptr;
  const auto bad = [](const std::string& message, const char* param) {
    throw ApiError(400, message, "invalid_request_error", "invalid_response_format", param);
  };
  if (!v->is_object() || !v->contains("type") || !(*v)["type"].is_string()) {
    bad("'response_format' must be an object with a 'type'", "response_format");
  }
  const std::string type = (*v)["type"];
  if (type == "text") return nullptr;
  if (type == "json_object") return JsonGrammar::AnyObject();
  if (type != "json_schema")
    bad(fmt::format("'response_format.type' '{}' is not text, json_object or json_schema", type), "response_format.type");
  const json* spec = v->contains("json_schema") ? &(*v)["json_schema"] : nullptr;
  if (spec == nullptr || !spec->is_object() || !spec->contains("schema")) {
    bad("'response_format.json_schema' must be an object with a 'schema'", "response_format.json_schema");
  }
  try {
    return CachedGrammar((*spec)["schema"]);
  } catch (const SchemaError& e) {
    bad(fmt::format("'response_format.json_schema.schema': {}", e.what()), "response_format.json_schema.schema");
  }
  return nullptr;
}

// Parses a body within the limits of request_limits.hpp, checked in a first pass that
// builds nothing (linear), so an over-deep or over-wide body is refused before it is
// built: deeply nested values cost recursion when copied or destroyed, and
// ordered_json's objects are vectors, whose keys cost time linear in their count each.
json ParseBounded(std::string_view text) {
  const JsonBounds bounds{
      .max_depth = limits::kJsonDepth, .max_object_members = limits::kObjectMembers, .max_array_elements = limits::kArrayElements};
  if (const std::optional<JsonExcess> excess = FindJsonExcess(text, bounds)) {
    switch (excess->kind) {
      case JsonExcess::Kind::kDepth:
        throw ApiError(400, fmt::format("the body nests arrays and objects deeper than {} levels", excess->limit), "invalid_request_error",
                       "body_too_deep");
      case JsonExcess::Kind::kObjectMembers:
        throw ApiError(400, fmt::format("a JSON object in the body has more than {} keys", excess->limit), "invalid_request_error",
                       "body_too_complex");
      case JsonExcess::Kind::kArrayElements:
        throw ApiError(400, fmt::format("a JSON array in the body has more than {} elements", excess->limit), "invalid_request_error",
                       "body_too_complex");
    }
  }
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw ApiError(400, fmt::format("the body is not valid JSON: {}", e.what()), "invalid_request_error", "invalid_json");
  }
}

// messages: a non-empty list of {role, content}; "developer" is OpenAI's newer name for system.
void ReadMessages(const json& body, CompletionRequest& r) {
  const json* messages = Find(body, "messages");
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    throw ApiError::BadRequest("'messages' must be a non-empty list", "messages");
  }
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string at = fmt::format("messages[{}]", i);
    if (!m.is_object()) throw ApiError::BadRequest(fmt::format("'{}' must be an object", at), at);
    const json* role = Find(m, "role");
    if (role == nullptr || !role->is_string()) throw ApiError::BadRequest(fmt::format("'{}.role' must be a string", at), at + ".role");
    const std::string name = role->get<std::string>();
    if (name != "system" && name != "user" && name != "assistant" && name != "developer") {
      throw ApiError::BadRequest(fmt::format("'{}.role' '{}' is not system, user or assistant", at, name), at + ".role");
    }
    const json* content = Find(m, "content");
    if (content == nullptr) throw ApiError::BadRequest(fmt::format("'{}.content' is missing", at), at + ".content");
    r.messages.push_back({name == "developer" ? "system" : name, Content(*content, at + ".content")});
  }
}

// prompt: a string, a list of one string, or a list of token ids.
void ReadPrompt(const json& body, int vocab_size, CompletionRequest& r) {
  const json* prompt = Find(body, "prompt");
  if (prompt == nullptr) throw ApiError::BadRequest("'prompt' is missing", "prompt");
  if (prompt->is_string()) {
    r.prompt_text = prompt->get<std::string>();
  } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
    r.prompt_text = (*prompt)[0].get<std::string>();
  } else if (prompt->is_array() && !prompt->empty()) {
    r.prompt_is_tokens = true;
    for (std::size_t i = 0; i < prompt->size(); ++i) {
      const json& t = (*prompt)[i];
      if (!t.is_number_integer() || t.get<std::int64_t>() < 0 || t.get<std::int64_t>() >= vocab_size) {
        throw ApiError::BadRequest(fmt::format("'prompt[{}]' must be a token id in [0, {})", i, vocab_size), "prompt");
      }
      r.prompt_tokens.push_back(static_cast<TokenId>(t.get<std::int64_t>()));
    }
  } else {
    throw ApiError::BadRequest("'prompt' must be a string or a non-empty list of token ids", "prompt");
  }
}

// The sampler's settings; without a seed, a random one (and the request is not `seeded`).
void ReadSampling(const json& body, CompletionRequest& r) {
  r.sampling.temperature = static_cast<float>(Number(body, "temperature", 1.0, 0.0, 2.0));
  r.sampling.top_p = static_cast<float>(Number(body, "top_p", 1.0, 1e-9, 1.0));
  r.sampling.top_k = static_cast<int>(Integer(body, "top_k", 0, 0, 1 << 30));
  r.sampling.min_p = static_cast<float>(Number(body, "min_p", 0.0, 0.0, 1.0));
  if (const json* seed = Find(body, "seed")) {
    if (!seed->is_number_integer()) throw ApiError::BadRequest("'seed' must be an integer", "seed");
    r.sampling.seed = seed->is_number_unsigned() ? seed->get<std::uint64_t>() : static_cast<std::uint64_t>(seed->get<std::int64_t>());
    r.seeded = true;
  } else {
    r.sampling.seed = std::random_device{}() * 0x100000000ull + std::random_device{}();
  }
}

// stop: a string or a list of up to 4 non-empty strings.
std::vector<std::string> StopStrings(const json& body) {
  std::vector<std::string> out;
  const json* stop = Find(body, "stop");
  if (stop == nullptr) return out;
  if (stop->is_string()) {
    out.push_back(stop->get<std::string>());
  } else if (stop->is_array() && stop->size() <= 4) {
    for (const json& s : *stop) {
      if (!s.is_string()) throw ApiError::BadRequest("'stop' must be a string or a list of up to 4 strings", "stop");
      out.push_back(s.get<std::string>());
    }
  } else {
    throw ApiError::BadRequest("'stop' must be a string or a list of up to 4 strings", "stop");
  }
  for (const std::string& s : out) {
    if (s.empty()) throw ApiError::BadRequest("'stop' strings must not be empty", "stop");
  }
  return out;
}

void ReadRequest(const json& body, Endpoint endpoint, int vocab_size, CompletionRequest& r) {
  Unsupported(body);
  if (const json* model = Find(body, "model")) {
    if (!model->is_string()) throw ApiError::BadRequest("'model' must be a string", "model");
    r.model = model->get<std::string>();
  }
  if (endpoint == Endpoint::kChatCompletions) {
    ReadMessages(body, r);
  } else {
    ReadPrompt(body, vocab_size, r);
  }
  const std::int64_t max_completion = Integer(body, "max_completion_tokens", 0, 1, 1 << 30);
  r.max_tokens = static_cast<int>(Integer(body, "max_tokens", max_completion, 1, 1 << 30));
  ReadSampling(body, r);
  r.stop = StopStrings(body);
  r.stream = Bool(body, "stream", false);
  r.ignore_eos = Bool(body, "ignore_eos", false);
  r.grammar = ResponseFormat(body);
  r.thinking = Thinking(body);
  if (const json* options = Find(body, "stream_options")) {
    if (!options->is_object()) throw ApiError::BadRequest("'stream_options' must be an object", "stream_options");
    r.include_usage = Bool(*options, "include_usage", false);
  }
}

}  // namespace

CompletionRequest ParseCompletionRequest(std::string_view text, Endpoint endpoint, int vocab_size) {
  if (text.size() > limits::kBodyBytes) {
    throw ApiError(413, fmt::format("the request body is {} bytes; the limit is {}", text.size(), limits::kBodyBytes),
                   "invalid_request_error", "body_too_large");
  }
  const json body = ParseBounded(text);
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object", "invalid_request_error", "invalid_json");
  CompletionRequest r;
  r.endpoint = endpoint;
  try {
    ReadRequest(body, endpoint, vocab_size, r);
  } catch (const json::exception& e) {
    throw ApiError(400, fmt::format("malformed request: {}", e.what()), "invalid_request_error", "invalid_value");
  }
  return r;
}

}  // namespace tandem::rt
