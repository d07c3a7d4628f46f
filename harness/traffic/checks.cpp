#include "harness/traffic/checks.hpp"

#include <cmath>
#include <cstdlib>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/sha256.hpp"
#include "runtime/model/tokenizer.hpp"

namespace tandem::harness {

namespace {

bool HasType(const nlohmann::json& v, JsonType type) {
  switch (type) {
    case JsonType::kString:
      return v.is_string();
    case JsonType::kInteger:
      return v.is_number_integer();
    case JsonType::kNumber:
      return v.is_number();
    case JsonType::kBoolean:
      return v.is_boolean();
    case JsonType::kArray:
      return v.is_array();
    case JsonType::kObject:
      return v.is_object();
    case JsonType::kNull:
      return v.is_null();
  }
  return false;
}

// The first JSON object in `text`: the whole text, or a fenced or embedded {...}.
std::optional<nlohmann::json> FindJsonObject(const std::string& text) {
  auto whole = nlohmann::json::parse(text, nullptr, false);
  if (!whole.is_discarded() && whole.is_object()) return whole;
  for (std::size_t start = text.find('{'); start != std::string::npos; start = text.find('{', start + 1)) {
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = start; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string) {
        if (c == '\\')
          ++i;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        auto j = nlohmann::json::parse(text.substr(start, i - start + 1), nullptr, false);
        if (!j.is_discarded() && j.is_object()) return j;
        break;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

bool RunContentCheck(const ContentCheck& check, const std::string& content, int count) {
  switch (check.kind) {
    case ContentCheck::Kind::kNonEmpty:
      return content.find_first_not_of(" \t\r\n") != std::string::npos;
    case ContentCheck::Kind::kRegex:
      return std::regex_search(content, std::regex(check.pattern));
    case ContentCheck::Kind::kCounting: {
      // Exactly the numbers 1, 2, ..., count in order, separated only by whitespace: the
      // prompt says "nothing else", so a model that counts on past count fails.
      std::size_t pos = 0;
      for (int n = 1; n <= count; ++n) {
        pos = content.find_first_not_of(" \t\r\n", pos);
        const std::string want = std::to_string(n);
        if (pos == std::string::npos || content.compare(pos, want.size(), want) != 0) return false;
        pos += want.size();
        if (pos < content.size() && std::isdigit(static_cast<unsigned char>(content[pos]))) return false;
      }
      return content.find_first_not_of(" \t\r\n", pos) == std::string::npos;
    }
    case ContentCheck::Kind::kJsonFields: {
      const auto object = FindJsonObject(content);
      if (!object) return false;
      for (const std::string& key : check.keys) {
        if (!object->contains(key)) return false;
      }
      for (const auto& [key, expected] : check.values) {
        if (!object->contains(key) || (*object)[key] != nlohmann::json::parse(expected)) return false;
      }
      for (const auto& [key, type] : check.types) {
        if (!object->contains(key)) return false;
        const nlohmann::json& v = (*object)[key];
        if (!HasType(v, type)) return false;
      }
      return true;
    }
  }
  return false;
}

void ApplyChecks(store::SampleRow& s, const StreamedCompletion& r, const CorpusCase& c, const CheckContext& ctx) {
  s.status = r.status;
  s.error = r.error;
  s.t_start = r.t_start;
  s.t_first_output = r.t_first_output;
  s.t_first_content = r.t_first_content;
  s.t_finish = r.t_finish;
  s.prompt_tokens = r.prompt_tokens;
  s.completion_tokens = r.completion_tokens;
  s.cached_tokens = r.cached_tokens;
  s.chunks = r.chunks;
  s.gaps_json = nlohmann::json(r.output_gaps).dump();
  s.content = r.content;
  s.reasoning = r.reasoning;
  s.content_sha256 = Sha256Hex(r.content + '\x1e' + r.reasoning);
  s.finish_reason = r.finish_reason;
  if (ctx.tokenizer != nullptr) {
    s.tokenizer_tokens = static_cast<int>(ctx.tokenizer->Encode(r.reasoning + r.content).size());
  }

  nlohmann::json checks = nlohmann::json::object();
  checks["stream_complete"] = r.complete();
  checks["usage_consistent"] = r.complete() && r.completion_tokens >= 1 && r.completion_tokens >= r.chunks &&
                               r.completion_tokens <= ctx.max_tokens &&
                               (r.finish_reason != "length" || r.completion_tokens == ctx.max_tokens);
  if (ctx.cache_bound >= 0) checks["cache_bound"] = r.cached_tokens <= ctx.cache_bound;
  bool valid = true;
  for (const auto& [name, ok] : checks.items()) valid = valid && ok.get<bool>();
  for (const ContentCheck& check : c.checks) {
    const char* name = check.kind == ContentCheck::Kind::kNonEmpty   ? "non_empty"
                       : check.kind == ContentCheck::Kind::kRegex    ? "regex"
                       : check.kind == ContentCheck::Kind::kCounting ? "counting"
                                                                     : "json_fields";
    const bool ok = RunContentCheck(check, r.content, c.count);
    checks[name] = checks.contains(name) ? checks[name].get<bool>() && ok : ok;
  }
  bool passed = true;
  for (const auto& [name, ok] : checks.items()) passed = passed && ok.get<bool>();
  s.checks_json = checks.dump();
  // Token counts: the server's usage against the streamed chunks and our tokenizer.
  // Re-encoding decoded text may merge tokens and drops a stop token, so only a gap
  // beyond 1 + 10% is flagged; it fails nothing, it asks for a look.
  nlohmann::json flags = nlohmann::json::object();
  if (ctx.tokenizer != nullptr && r.complete()) {
    const int gap = std::abs(s.tokenizer_tokens - r.completion_tokens);
    if (gap > 1 + r.completion_tokens / 10) {
      flags["token_count_mismatch"] = {{"usage", r.completion_tokens}, {"tokenizer", s.tokenizer_tokens}, {"chunks", r.chunks}};
    }
  }
  s.flags_json = flags.dump();
  s.valid = valid;
  s.passed = passed;
}

void AddCheck(store::SampleRow& s, const std::string& name, bool ok, bool integrity) {
  nlohmann::json checks = nlohmann::json::parse(s.checks_json, nullptr, false);
  if (!checks.is_object()) checks = nlohmann::json::object();
  checks[name] = ok;
  s.checks_json = checks.dump();
  s.passed = s.passed && ok;
  if (integrity) s.valid = s.valid && ok;
}

void AddFlag(store::SampleRow& s, const std::string& name, const nlohmann::json& value) {
  nlohmann::json flags = nlohmann::json::parse(s.flags_json, nullptr, false);
  if (!flags.is_object()) flags = nlohmann::json::object();
  flags[name] = value;
  s.flags_json = flags.dump();
}

}  // namespace tandem::harness
