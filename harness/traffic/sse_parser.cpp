#include "harness/traffic/sse_parser.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tandem::harness {

namespace {

using nlohmann::json;

// A non-negative token count that fits an int, or nullopt-like -1 for anything else.
int Count(const json& object, const char* key) {
  if (!object.contains(key)) return 0;
  const json& v = object[key];
  if (!v.is_number_integer() && !v.is_number_unsigned()) return -1;
  const auto n = v.get<long long>();
  return n < 0 || n > std::numeric_limits<int>::max() ? -1 : static_cast<int>(n);
}

const std::string* Text(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_string()) return nullptr;
  return object[key].get_ptr<const std::string*>();
}

}  // namespace

void SseCompletionParser::Feed(std::string_view bytes, double now) {
  buffer_.append(bytes);
  for (;;) {
    const std::size_t lf = buffer_.find("\n\n"), crlf = buffer_.find("\r\n\r\n");
    if (lf == std::string::npos && crlf == std::string::npos) break;
    const bool is_crlf = crlf != std::string::npos && (lf == std::string::npos || crlf < lf);
    const std::size_t end = is_crlf ? crlf : lf;
    const std::string event = buffer_.substr(0, end);
    buffer_.erase(0, end + (is_crlf ? 4 : 2));
    Event(event, now);
  }
}

void SseCompletionParser::Event(std::string_view event, double now) {
  std::string data;
  bool has_data = false;
  std::size_t start = 0;
  while (start <= event.size()) {
    std::size_t end = event.find('\n', start);
    if (end == std::string_view::npos) end = event.size();
    std::string_view line = event.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    start = end + 1;
    if (line.empty() || line.front() == ':') continue;  // a comment (keep-alive)
    if (line.rfind("data:", 0) == 0) {
      line.remove_prefix(5);
      if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      if (has_data) data += '\n';
      data.append(line);
      has_data = true;
    } else if (line.rfind("event:", 0) != 0 && line.rfind("id:", 0) != 0 && line.rfind("retry:", 0) != 0) {
      non_event_.append(line.substr(0, std::min<std::size_t>(line.size(), 1000)));  // not SSE: an error body
    }
  }
  if (has_data) Data(data, now);
}

void SseCompletionParser::Data(const std::string& payload, double now) {
  if (payload == "[DONE]") {
    out_.done = true;
    return;
  }
  const json j = json::parse(payload, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    out_.error = fmt::format("malformed event: {}", payload.substr(0, 200));
    return;
  }
  if (j.contains("error")) {
    const std::string* message = Text(j["error"], "message");
    out_.error = message != nullptr ? *message : j["error"].dump().substr(0, 300);
    return;
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const json& u = j["usage"];
    const int prompt = Count(u, "prompt_tokens"), completion = Count(u, "completion_tokens");
    int cached = 0, miss = -1;
    bool has_cached = false;
    if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object() &&
        u["prompt_tokens_details"].contains("cached_tokens")) {
      cached = Count(u["prompt_tokens_details"], "cached_tokens");
      has_cached = true;
    } else if (u.contains("prompt_cache_hit_tokens")) {
      cached = Count(u, "prompt_cache_hit_tokens");
      has_cached = true;
    }
    if (u.contains("prompt_cache_miss_tokens")) miss = Count(u, "prompt_cache_miss_tokens");
    if (prompt < 0 || completion < 0 || cached < 0 || (u.contains("prompt_cache_miss_tokens") && miss < 0)) {
      out_.error = fmt::format("usage with an invalid token count: {}", u.dump().substr(0, 200));
      return;
    }
    out_.has_usage = true;
    out_.prompt_tokens = prompt;
    out_.completion_tokens = completion;
    out_.cached_tokens = cached;
    out_.has_cached_usage = has_cached;
    out_.cache_miss_tokens = miss;
  }
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
  const json& choice = j["choices"][0];
  if (!choice.is_object()) return;
  if (choice.contains("delta") && choice["delta"].is_object()) {
    const json& delta = choice["delta"];
    const std::string* content = Text(delta, "content");
    const std::string* reasoning = Text(delta, "reasoning_content");
    const bool has_content = content != nullptr && !content->empty();
    const bool has_reasoning = reasoning != nullptr && !reasoning->empty();
    if (has_content || has_reasoning) {
      ++out_.chunks;
      if (out_.t_first_output == 0) {
        out_.t_first_output = now;
      } else if (out_.output_gaps.size() < StreamedCompletion::kMaxGaps) {
        out_.output_gaps.push_back(now - last_output_);
      }
      last_output_ = now;
    }
    if (has_content) {
      if (out_.t_first_content == 0) out_.t_first_content = now;
      out_.content += *content;
    }
    if (has_reasoning) out_.reasoning += *reasoning;
  }
  if (const std::string* finish = Text(choice, "finish_reason")) {
    out_.finish_reason = *finish;
    out_.t_finish = now;
  }
}

}  // namespace tandem::harness
