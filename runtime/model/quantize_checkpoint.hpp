#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "runtime/kernels/quantized_matrix.hpp"

namespace tandem::rt {

struct QuantizeCheckpointReport {
  int quantized_matrices = 0;         // routed expert matrices written as X.qweight + X.qscales
  int copied_tensors = 0;             // every other tensor, byte for byte
  std::uint64_t expert_bytes_in = 0;  // the routed experts as stored in the input (with fp8 block scales)
  std::uint64_t expert_bytes_out = 0;
  std::uint64_t weight_bytes_out = 0;     // data bytes of all output weight files
  std::vector<std::string> weight_files;  // written, in input order
  std::vector<std::string> copied_files;  // other files of the input directory, copied
  std::vector<std::string> skipped;       // subdirectories of the input, not copied
};

// Writes `out`: the checkpoint `in` with its routed experts
// (model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight, the MTP layer's too)
// — and with `shared_experts` its shared experts (mlp.shared_experts.*) — group-quantized by QuantizedMatrix::Quantize and stored as
// X.qweight (I8 [rows, cols] for int8; U8 [rows, cols/2] for int4, two's-complement nibbles, low nibble = even column) + X.qscales (F32
// [rows, cols/group]); their fp8 `X.weight_scale_inv` are dropped. Every other tensor is copied unchanged, one output weight file per input
// file under the same name (the index rewritten when there is one), each file's safetensors metadata kept. config.json gains
// `"tandem_quantization": {"format", "group_size", "tensors": "routed_experts"}`;
// the other top-level files (tokenizer, generation config, ...) are copied,
// subdirectories are not. Tensors are streamed one at a time. Everything is written
// into a temporary directory next to `out`, renamed to `out` at the end and removed
// on failure.
//
// Throws std::invalid_argument for bad options (a group that is not a positive
// multiple of 32, or does not divide an expert's columns; an `out` that exists and is not
// an empty directory) and ModelError for an unusable input (not a checkpoint,
// already quantized, no routed experts). `progress` gets one line per weight file.
QuantizeCheckpointReport QuantizeCheckpoint(const std::filesystem::path& in, const std::filesystem::path& out, QuantFormat format,
                                            int group, bool shared_experts = false,
                                            const std::function<void(const std::string&)>& progress = {});

}  // namespace tandem::rt
