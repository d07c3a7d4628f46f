#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/model/chat_template.hpp"
#include "runtime/model/tokenizer.hpp"
#include "runtime/sampling/sampler.hpp"

namespace tandem::rt {

enum class Endpoint { kChatCompletions, kCompletions };

// A POST /v1/chat/completions or /v1/completions body, validated.
struct CompletionRequest {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string model;                  // empty when the client sent none
  std::vector<ChatMessage> messages;  // chat
  std::string prompt_text;            // completions, text form
  std::vector<TokenId> prompt_tokens; // completions, token-id form
  bool prompt_is_tokens = false;
  int max_tokens = 0;  // 0: as many as the context allows
  SamplingParams sampling;
  bool seeded = false;  // whether the client chose the seed
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool ignore_eos = false;  // extension (as vLLM's): generate past end-of-sequence, for fixed-length benchmarks
};

// Parses and checks a request body. Throws ApiError (400) naming the field: a
// malformed body, a wrong type, a value out of range, or a feature this server
// does not implement (n > 1, penalties, logit_bias, tools, non-text response_format,
// logprobs). Unknown fields are ignored, as OpenAI does.
CompletionRequest ParseCompletionRequest(std::string_view body, Endpoint endpoint, int vocab_size);

}  // namespace tandem::rt
