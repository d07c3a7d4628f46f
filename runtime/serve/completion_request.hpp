#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/grammar/json_schema.hpp"
#include "runtime/model/chat_template.hpp"
#include "runtime/model/tokenizer.hpp"
#include "runtime/sampling/sampler.hpp"

namespace tandem::rt {

enum class Endpoint { kChatCompletions, kCompletions };

// A POST /v1/chat/completions or /v1/completions body, validated.
struct CompletionRequest {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string model;                   // empty when the client sent none
  std::vector<ChatMessage> messages;   // chat
  std::string prompt_text;             // completions, text form
  std::vector<TokenId> prompt_tokens;  // completions, token-id form
  bool prompt_is_tokens = false;
  int max_tokens = 0;  // 0: as many as the context allows
  SamplingParams sampling;
  bool seeded = false;  // whether the client chose the seed
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool ignore_eos = false;  // extension (as vLLM's): generate past end-of-sequence, for fixed-length benchmarks
  // response_format json_object / json_schema: what the output must match; null: text.
  std::shared_ptr<const JsonGrammar> grammar;
  // thinking {type: enabled} or reasoning_effort low|medium|high: the chat template
  // opens the think block and the reply streams its reasoning as reasoning_content.
  bool thinking = false;
};

// Parses and checks a request body. Throws ApiError (400) naming the field: a
// malformed body, a wrong type, a value out of range, or a feature this server
// does not implement (n > 1, penalties, logit_bias, tools, logprobs, a schema feature
// constrained decoding cannot enforce). Compiled schemas are cached, so a schema sent
// with every request is compiled once. Unknown fields are ignored, as OpenAI does.
CompletionRequest ParseCompletionRequest(std::string_view body, Endpoint endpoint, int vocab_size);

}  // namespace tandem::rt
