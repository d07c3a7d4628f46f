#include "runtime/model/v41_checkpoint.hpp"

#include <cstring>

#include <fmt/format.h>

#include "runtime/model/model_error.hpp"
#include "runtime/model/shard_index.hpp"
#include "runtime/model/v41_tensors.hpp"
#include "runtime/numeric/dtype.hpp"

namespace tandem::rt {

V41Checkpoint V41Checkpoint::Open(const std::filesystem::path& dir) {
  V41Checkpoint ckpt;
  ckpt.dir_ = dir;
  ckpt.config_ = std::make_shared<V41Config>(LoadV41Config(dir));
  CheckV41Checkpoint(dir, *ckpt.config_);
  ckpt.engram_ = LoadEngramConstants(dir, *ckpt.config_);
  for (const std::string& file : ReadShardIndex(dir).files) {
    auto mapping = std::make_shared<MappedFile>(dir / file);
    const SafetensorsHeader header = ParseSafetensorsHeader(mapping->bytes(), (dir / file).string());
    for (const auto& [name, info] : header.tensors) ckpt.tensors_.emplace(name, Entry{ckpt.files_.size(), info});
    ckpt.files_.push_back(std::move(mapping));
    ckpt.data_offsets_.push_back(header.data_offset);
  }
  return ckpt;
}

const V41Checkpoint::Entry& V41Checkpoint::Find(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw ModelError(fmt::format("{}: no tensor '{}'", dir_.string(), name));
  return it->second;
}

const TensorInfo& V41Checkpoint::Info(std::string_view name) const { return Find(name).info; }

std::span<const std::uint8_t> V41Checkpoint::Bytes(std::string_view name) const {
  const Entry& e = Find(name);
  const std::byte* base = files_[e.file]->bytes().data() + data_offsets_[e.file] + e.info.begin;
  return {reinterpret_cast<const std::uint8_t*>(base), static_cast<std::size_t>(e.info.end - e.info.begin)};
}

std::vector<float> V41Checkpoint::Vector(std::string_view name, std::int64_t n) const {
  const TensorInfo& info = Info(name);
  if (info.elements() != n || (info.dtype != DType::kF32 && info.dtype != DType::kBF16)) {
    throw ModelError(fmt::format("{}: tensor '{}' is not {} F32 or BF16 values", dir_.string(), name, n));
  }
  const std::span<const std::uint8_t> bytes = Bytes(name);
  std::vector<float> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    if (info.dtype == DType::kF32) {
      std::memcpy(&out[static_cast<std::size_t>(i)], bytes.data() + 4 * i, 4);
    } else {
      std::uint16_t b = 0;
      std::memcpy(&b, bytes.data() + 2 * i, 2);
      out[static_cast<std::size_t>(i)] = Bf16ToF32(b);
    }
  }
  return out;
}

}  // namespace tandem::rt
