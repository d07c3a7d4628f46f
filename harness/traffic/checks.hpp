#pragma once

#include "harness/campaign/corpus.hpp"
#include "harness/traffic/sse_client.hpp"
#include "store/store.hpp"

namespace tandem::rt {
class Tokenizer;
}

// Sample checks. Integrity checks decide whether a sample is a timing at all:
//   stream_complete  — HTTP 200, [DONE], usage, a finish event, no in-stream error;
//   usage_consistent — completion_tokens ≥ 1, ≥ the text chunks streamed, ≤ max_tokens,
//                      and = max_tokens when the finish reason is "length";
//   cache_bound      — a nonced request reports at most `cache_bound` cached tokens.
// Content checks judge the output: non_empty, counting, json_fields, regex (from the
// corpus), and greedy_match across sessions (added after the run).
namespace tandem::harness {

struct CheckContext {
  int max_tokens = 0;
  int cache_bound = -1;  // < 0: not checked (e.g. retained-context children)
  const rt::Tokenizer* tokenizer = nullptr;
};

// Fills the sample's outcome fields from `response`, runs every check, and sets
// checks_json, valid and passed.
void ApplyChecks(store::SampleRow& sample, const StreamedCompletion& response, const CorpusCase& corpus_case, const CheckContext& context);

// One more check on a sample ApplyChecks has filled: it joins checks_json and `passed`; an
// integrity check (the sample is no timing without it) also decides `valid`.
void AddCheck(store::SampleRow& sample, const std::string& name, bool ok, bool integrity);
// A remark that fails nothing (flags_json), e.g. why a sample is not scored.
void AddFlag(store::SampleRow& sample, const std::string& name, const nlohmann::json& value);

// A content check on its own (used by ApplyChecks and tests).
bool RunContentCheck(const ContentCheck& check, const std::string& content, int count);

}  // namespace tandem::harness
