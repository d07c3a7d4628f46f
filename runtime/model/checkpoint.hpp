#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/kernels/weight_matrix.hpp"
#include "runtime/model/mapped_file.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/safetensors.hpp"

namespace tandem::rt {

// An HF-layout checkpoint directory: config.json plus model.safetensors, or shards
// listed in model.safetensors.index.json. Files are memory-mapped; tensors are
// returned as views where the kernels can read them directly (F32, BF16; F8_E4M3
// with its 128×128 `weight_scale_inv` grid copied beside), converted to fp32 (F16),
// or copied into a QuantizedMatrix (group-quantized `X.qweight` + `X.qscales`).
// Has / Info / TensorNames see the tensors as stored (so `X.qweight`, not `X.weight`).
class Checkpoint {
 public:
  static Checkpoint Open(const std::filesystem::path& dir);  // throws ModelError

  const std::filesystem::path& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }

  bool Has(std::string_view name) const { return tensors_.contains(name); }
  const TensorInfo& Info(std::string_view name) const;
  std::vector<std::string> TensorNames() const;
  // Written by WriteSyntheticCheckpoint: its safetensors metadata names the preset.
  bool synthetic() const { return metadata_.contains("tandem_preset"); }
  // The weight files, in the order they were listed.
  std::vector<std::filesystem::path> WeightFiles() const;

  // A 2-D tensor of exactly [rows × cols]; a missing tensor or another shape is a
  // ModelError naming the file and tensor. When `X.weight` is absent but
  // `X.qweight` + `X.qscales` are there (a `tandem-rt quantize` checkpoint), the
  // matrix is kQuantized: qweight I8 [rows, cols] (int8) or U8 [rows, cols/2] (int4,
  // two's-complement nibbles, low nibble = even column), qscales F32
  // [rows, cols/group]; the group is cols / qscales' columns and must match
  // config.json's `tandem_quantization` when it has one. The values are copied.
  WeightMatrix Matrix(std::string_view name, std::int64_t rows, std::int64_t cols) const;
  // A 1-D tensor of exactly n elements, as fp32.
  std::vector<float> Vector(std::string_view name, std::int64_t n) const;

 private:
  struct Entry {
    std::size_t file = 0;
    TensorInfo info;
  };
  struct File {
    std::shared_ptr<MappedFile> mapping;
    std::uint64_t data_offset = 0;
  };

  const std::byte* DataOf(const Entry& entry) const;
  WeightMatrix QuantizedMatrixOf(const std::string& base, std::int64_t rows, std::int64_t cols) const;  // X of X.weight
  const Entry& Find(std::string_view name) const;
  std::string Where(const Entry& entry, std::string_view name) const;

  std::filesystem::path dir_;
  ModelConfig config_;
  std::vector<File> files_;
  std::map<std::string, Entry, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;  // `__metadata__` of the weight files (the first file wins a key)
};

}  // namespace tandem::rt
