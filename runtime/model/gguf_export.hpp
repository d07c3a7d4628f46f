#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "runtime/model/gguf_writer.hpp"

namespace tandem::rt {

struct GgufExportOptions {
  // The type of the weight matrices; the router's gate and every 1-D tensor (norms,
  // correction biases) stay F32, as llama.cpp's converter keeps them. A matrix whose
  // rows are not whole 32-value blocks is written F32 when a block type is asked for.
  GgmlType matrix_type = GgmlType::kBF16;
  // tokenizer.ggml.pre: the pre-tokenizer llama.cpp applies ("deepseek-v3" is the
  // DeepSeek-V3 tokenizer's, which the synthetic and trained checkpoints use).
  std::string tokenizer_pre = "deepseek-v3";
};

struct GgufExportReport {
  int tensors = 0;
  std::uint64_t data_bytes = 0;
  std::vector<std::string> skipped;  // what the GGUF does not hold (the MTP layers)
};

// Writes `in` (an HF DeepseekV3ForCausalLM / DeepseekV2ForCausalLM checkpoint:
// bf16, f16, f32, fp8 with block scales, or a `tandem-rt quantize` output) as one GGUF
// file for llama.cpp-family runtimes: architecture `deepseek2`, their tensor names
// (the routed experts of a layer stacked into one 3-D tensor each), the model's
// hyperparameters and its BPE tokenizer. Values are read as fp32 and encoded in the
// asked type. The MTP layers are left out (llama.cpp's converter skips them too).
// Throws ModelError for an input it cannot write (naming the file, key or tensor) and
// std::invalid_argument for an `out` that exists.
GgufExportReport ExportGguf(const std::filesystem::path& in, const std::filesystem::path& out, const GgufExportOptions& options,
                            const std::function<void(const std::string&)>& progress = {});

}  // namespace tandem::rt
