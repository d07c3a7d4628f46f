#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "runtime/model/safetensors.hpp"

namespace tandem::rt {

struct V41Config;

// One tensor of a DeepSeek V4.1 checkpoint as published: its official name (the
// reference's module path), dtype and shape. FP8 linear layers are `X.weight` (F8_E4M3,
// [out × in]) with `X.scale` (F8_E8M0, one per 32×32 block); FP4 routed experts are
// `X.weight` (I8: two E2M1 values a byte, the even one low) with `X.scale` (F8_E8M0, one
// per 32 inputs); norms, the gate, the compressor and the indexer's plain projections,
// embeddings and head BF16; hyper-connection, sink and gate-bias parameters F32.
struct V41Tensor {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<std::int64_t> shape;
};

// Every tensor the configuration implies, the DSpark stages' (mtp.*) included, in a
// fixed order (global, then layer by layer, then the stages).
std::vector<V41Tensor> V41Tensors(const V41Config& config);

// Tensors a checkpoint may hold beyond those, unused here: the vision tower's, the
// gate's image-token bias, the DSpark stages' copies of the embedding and head.
bool IsIgnoredV41Tensor(const std::string& name);

// What a V4.1 checkpoint directory holds, checked against the configuration: every
// tensor present with its dtype and shape, none unknown. Throws ModelError naming the
// file and tensor (missing, wrong dtype or shape, not a V4.1 tensor).
struct V41Contents {
  std::uint64_t bytes = 0;
  std::map<std::string, std::int64_t> parameters_by_dtype;  // values (an I8 FP4 tensor counts two a byte), scales apart
  std::size_t tensors = 0;
  std::size_t ignored = 0;
};
V41Contents CheckV41Checkpoint(const std::filesystem::path& dir, const V41Config& config);

}  // namespace tandem::rt
