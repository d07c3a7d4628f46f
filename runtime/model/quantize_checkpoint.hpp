#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "runtime/kernels/quantized_matrix.hpp"
#include "runtime/model/model_config.hpp"

namespace tandem::rt {

struct QuantizeCheckpointReport {
  int quantized_matrices = 0;            // written as X.qweight + X.qscales
  int copied_tensors = 0;                // every other tensor, byte for byte
  std::uint64_t quantized_bytes_in = 0;  // the quantized matrices as stored in the input (with fp8 block scales)
  std::uint64_t quantized_bytes_out = 0;
  std::uint64_t weight_bytes_out = 0;         // data bytes of all output weight files
  std::vector<std::string> weight_files;      // written, in input order
  std::vector<std::string> copied_files;      // other files of the input directory, copied
  std::vector<std::string> skipped;           // subdirectories of the input, not copied
  std::vector<std::string> left_unquantized;  // selected non-expert matrices whose rows are not whole groups
};

// Writes `out`: the checkpoint `in` with the matrices `what.tensors` selects
// group-quantized by QuantizedMatrix::Quantize (`what.format`, `what.group_size`):
// - kRoutedExperts: model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight (the MTP
//   layer's too);
// - kExperts: and the shared experts (mlp.shared_experts.*);
// - kLinear: and every other linear layer — attention's q_a/q_b (or q), kv_a and o
//   projections, dense MLPs, the MTP layer's eh_proj and head, lm_head — but not
//   kv_b_proj (attention reads it per head, column by column) nor the router's gate;
// - `what.embedding`: and the token embeddings (model.embed_tokens, the MTP layer's).
// Stored as X.qweight (I8 [rows, cols] for int8; U8 [rows, cols/2] for int4,
// two's-complement nibbles, low nibble = even column) + X.qscales (F32 [rows,
// cols/group]); their fp8 `X.weight_scale_inv` are dropped. A selected non-expert
// matrix whose columns are not whole groups is copied as stored (listed in the report);
// for an expert that is an error. Every other tensor is copied unchanged, one output
// weight file per input file under the same name (the index rewritten when there is
// one), each file's safetensors metadata kept. config.json gains
// `"tandem_quantization"` (QuantizationJson(what)); the other top-level files
// (tokenizer, generation config, ...) are copied, subdirectories are not. Tensors are
// streamed one at a time. Everything is written into a temporary directory next to
// `out`, renamed to `out` at the end and removed on failure.
//
// Throws std::invalid_argument for bad options (a group that is not a positive
// multiple of 32, or does not divide an expert's columns; an `out` that exists and is not
// an empty directory) and ModelError for an unusable input (not a checkpoint,
// already quantized, no routed experts). `progress` gets one line per weight file.
QuantizeCheckpointReport QuantizeCheckpoint(const std::filesystem::path& in, const std::filesystem::path& out,
                                            const CheckpointQuantization& what,
                                            const std::function<void(const std::string&)>& progress = {});

}  // namespace tandem::rt
