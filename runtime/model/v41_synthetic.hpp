#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "runtime/model/v41_config.hpp"

namespace tandem::rt {

// Synthetic DeepSeek V4.1 checkpoints in the official layout, for tests: "v41-tiny" (the
// reference's small test model: six layers, one of each block type, Engram on two, one
// DSpark stage) and "v41-small" (eight layers, every block type, two DSpark stages).
// Throws ModelError for other names.
V41Config V41Preset(const std::string& name);
bool IsV41Preset(const std::string& name);

struct V41SyntheticReport {
  V41Config config;
  std::uint64_t weight_bytes = 0;
  std::size_t tensors = 0;
  std::string tokenizer;  // one line: what the tokenizer is
};

// Writes config.json (architectures, model_type, text_config), inference/config.json (the
// reference's ModelArgs) and model.safetensors with every tensor V41Tensors names, in
// its published dtype: FP8 layers quantized from draws of variance 1/fan_in with a
// power-of-two scale per 32×32 block, FP4 experts likewise per 32 inputs, residual
// outputs scaled by 1/sqrt(2·layers). Bit-identical for the same preset and seed; each
// tensor from its own stream (seeded_stream.hpp).
// Also writes tokenizer.json and tokenizer_config.json (with its chat template): the
// DeepSeek-V3 tokenizer in `tokenizer_source` cut to the preset's vocabulary as
// DeriveSyntheticTokenizer cuts it, and engram.json: the Engram constants of the reference's
// small test tokenizer (WriteStubEngramConstants), as the reference computes them.
V41SyntheticReport WriteV41SyntheticCheckpoint(const std::string& preset, std::uint64_t seed, const std::filesystem::path& out_dir,
                                               const std::filesystem::path& tokenizer_source);
V41SyntheticReport WriteV41SyntheticCheckpoint(const std::string& preset, std::uint64_t seed, const std::filesystem::path& out_dir);

}  // namespace tandem::rt
