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

// Where Checkpoint::Matrix leaves the F32, BF16 and F8_E4M3 weights the kernels
// read as stored.
enum class WeightPlacement {
  // Copied into weight memory (kernels/weight_memory.hpp: 2 MiB pages where the
  // kernel grants them); the copied range's file pages leave the process. Decode
  // streams every weight each step, and from 4 KiB pages (a file mapping unless
  // the page cache holds large folios) it ran up to 23% slower on one thread and 7–11%
  // on two (docs/performance.md, "Weight placement: copied or mapped pages").
  kCopied,
  // Read where the file is mapped: nothing copied, pages shared with other
  // processes mapping the file, but at the page cache's page size. Opt-in
  // (--map-weights, --device cuda): the process then reads the file for as long as
  // it runs, and a file truncated or rewritten in place under it kills it with
  // SIGBUS at the next read (replace a checkpoint by renaming a new file over it).
  kMapped,
};

// An HF-layout checkpoint directory: config.json plus model.safetensors, or shards
// listed in model.safetensors.index.json. Files are memory-mapped; a matrix the
// kernels read as stored (F32, BF16; F8_E4M3 with its 128×128 `weight_scale_inv`
// grid as fp32 beside) is placed as WeightPlacement says; F16 is converted to fp32;
// group-quantized `X.qweight` + `X.qscales` are copied into a QuantizedMatrix.
// Has / Info / TensorNames see the tensors as stored (so `X.qweight`, not `X.weight`).
class Checkpoint {
 public:
  // throws ModelError
  static Checkpoint Open(const std::filesystem::path& dir, WeightPlacement placement = WeightPlacement::kCopied);

  const std::filesystem::path& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }

  bool Has(std::string_view name) const { return tensors_.contains(name); }
  const TensorInfo& Info(std::string_view name) const;
  // The file a tensor is stored in (its name, without the directory).
  std::string FileOf(std::string_view name) const;
  std::vector<std::string> TensorNames() const;
  // Written by WriteSyntheticCheckpoint: its safetensors metadata names the preset.
  bool synthetic() const { return metadata_.contains("tandem_preset"); }

  // A 2-D tensor of exactly [rows × cols]; a missing tensor or another shape is a
  // ModelError naming the file and tensor. When `X.weight` is absent but
  // `X.qweight` + `X.qscales` are there (a `tandem-rt quantize` checkpoint), the
  // matrix is kQuantized: qweight I8 [rows, cols] (int8) or U8 [rows, cols/2] (int4,
  // two's-complement nibbles, low nibble = even column), qscales F32
  // [rows, cols/group]; the group is cols / qscales' columns and must match
  // config.json's `tandem_quantization` when it has one. The values are copied.
  WeightMatrix Matrix(std::string_view name, std::int64_t rows, std::int64_t cols) const;
  // The same, placed as asked: kMapped to read a matrix once where it is mapped
  // and keep only what is made of it (a slice, a quantized copy). Thread-safe.
  WeightMatrix Matrix(std::string_view name, std::int64_t rows, std::int64_t cols, WeightPlacement placement) const;
  WeightPlacement placement() const { return placement_; }
  // A 1-D tensor of exactly n elements, as fp32 (a copy).
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
  // Drops this process's pages of a tensor it has copied (MappedFile::Release).
  void ReleaseData(const Entry& entry) const;
  WeightMatrix QuantizedMatrixOf(const std::string& base, std::int64_t rows, std::int64_t cols) const;  // X of X.weight
  const Entry& Find(std::string_view name) const;
  std::string Where(const Entry& entry, std::string_view name) const;

  std::filesystem::path dir_;
  WeightPlacement placement_ = WeightPlacement::kCopied;
  ModelConfig config_;
  std::vector<File> files_;
  std::map<std::string, Entry, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;  // `__metadata__` of the weight files (the first file wins a key)
  // Copies made by Matrix, by tensor, while any matrix holds them: engines over one
  // checkpoint (a target and its replica drafter) share them as they would share
  // the mapping.
  struct Copies;
  std::shared_ptr<Copies> copies_;
};

}  // namespace tandem::rt
