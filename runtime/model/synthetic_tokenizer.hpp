#pragma once

#include <filesystem>
#include <string>

namespace tandem::rt {

struct SyntheticTokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
  int vocab_size = 0;
  bool byte_level_fallback = false;  // true when the DeepSeek-V3 tokenizer was not available
  std::string description;           // one line for logs
};

// The tokenizer of a synthetic checkpoint, derived from the DeepSeek-V3 tokenizer
// in `source_dir` (tokenizer.json + tokenizer_config.json, committed in
// models/tokenizers/deepseek-v3 and installed by scripts/setup into
// <cache>/tokenizers/deepseek-v3): the 256 byte tokens, the tokens made by the
// first `merges` merges, and the named added tokens (BOS, EOS, pad, the chat and
// tool markers, plus <think> and </think>), renumbered densely in their original
// order. Deterministic for the same source and `merges`. Without the source it
// falls back to a pure byte-level vocabulary and says so in `description`.
SyntheticTokenizerFiles DeriveSyntheticTokenizer(const std::filesystem::path& source_dir, int merges);

std::filesystem::path DefaultTokenizerSource();

}  // namespace tandem::rt
