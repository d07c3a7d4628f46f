#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "runtime/model/model_config.hpp"

namespace tandem::rt {

struct SyntheticPreset {
  std::string name;
  ModelConfig config;  // vocab_size is set from the tokenizer
  int tokenizer_merges = 0;
};

// "tiny" (tests, < 10 MB) or "small" (demo). Throws ModelError for other names.
SyntheticPreset FindPreset(const std::string& name);

struct SyntheticCheckpointReport {
  ModelConfig config;
  std::uint64_t weight_bytes = 0;
  std::string tokenizer;  // how the tokenizer was made (one line)
};

// Writes a complete HF-layout checkpoint into `out_dir` (created if needed):
// config.json, model.safetensors (bf16; F32 router correction bias) with one MTP
// layer, tokenizer.json and tokenizer_config.json. Bit-identical for the same
// preset, seed and tokenizer source. Each tensor is drawn from its own stream,
// seeded by (seed, tensor name), uniform with variance 1/fan_in, residual outputs
// scaled by 1/sqrt(2·layers), so activations stay O(1) through all layers.
SyntheticCheckpointReport WriteSyntheticCheckpoint(const SyntheticPreset& preset, std::uint64_t seed, const std::filesystem::path& out_dir,
                                                   const std::filesystem::path& tokenizer_source);

}  // namespace tandem::rt
