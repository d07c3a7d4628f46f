#include "runtime/model/checkpoint.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "runtime/kernels/quantized_matrix.hpp"
#include "runtime/kernels/weight_memory.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/shard_index.hpp"

namespace tandem::rt {

namespace {

constexpr std::int64_t kFp8Block = WeightMatrix::kFp8Block;  // DeepSeek-V3's weight_scale_inv block size

}  // namespace

struct Checkpoint::Copies {
  std::mutex mutex;
  std::map<std::string, std::weak_ptr<const void>, std::less<>> by_tensor;
};

Checkpoint Checkpoint::Open(const std::filesystem::path& dir, WeightPlacement placement) {
  Checkpoint ckpt;
  ckpt.dir_ = dir;
  ckpt.placement_ = placement;
  ckpt.copies_ = std::make_shared<Copies>();
  if (!std::filesystem::is_directory(dir)) throw ModelError(fmt::format("{}: not a checkpoint directory", dir.string()));
  ckpt.config_ = LoadModelConfig(dir);

  const ShardIndex index = ReadShardIndex(dir);
  const std::vector<std::string>& file_names = index.files;
  const std::map<std::string, std::string>& weight_map = index.weight_map;

  for (std::size_t f = 0; f < file_names.size(); ++f) {
    const auto path = dir / file_names[f];
    auto mapping = std::make_shared<MappedFile>(path);
    SafetensorsHeader header = ParseSafetensorsHeader(mapping->bytes(), path.string());
    for (auto& [name, info] : header.tensors) {
      if (!weight_map.empty()) {
        const auto it = weight_map.find(name);
        if (it == weight_map.end() || it->second != file_names[f]) continue;  // the index assigns it elsewhere
      }
      if (ckpt.tensors_.contains(name)) {
        throw ModelError(fmt::format("{}: tensor '{}' appears in more than one file", path.string(), name));
      }
      ckpt.tensors_.emplace(name, Entry{f, std::move(info)});
    }
    ckpt.metadata_.insert(header.metadata.begin(), header.metadata.end());
    ckpt.files_.push_back({std::move(mapping), header.data_offset});
  }
  for (const auto& [tensor, file] : weight_map) {
    if (!ckpt.tensors_.contains(tensor)) {
      throw ModelError(fmt::format("{}: tensor '{}' is listed in model.safetensors.index.json but missing from the file",
                                   (dir / file).string(), tensor));
    }
  }
  return ckpt;
}

const Checkpoint::Entry& Checkpoint::Find(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    throw ModelError(fmt::format("{}: tensor '{}' is missing from the checkpoint", dir_.string(), name));
  }
  return it->second;
}

const TensorInfo& Checkpoint::Info(std::string_view name) const { return Find(name).info; }

std::string Checkpoint::FileOf(std::string_view name) const { return files_[Find(name).file].mapping->path().filename().string(); }

std::vector<std::string> Checkpoint::TensorNames() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : tensors_) names.push_back(name);
  return names;
}

std::string Checkpoint::Where(const Entry& entry, std::string_view name) const {
  return fmt::format("{}: tensor '{}'", files_[entry.file].mapping->path().string(), name);
}

const std::byte* Checkpoint::DataOf(const Entry& entry) const {
  const File& f = files_[entry.file];
  return f.mapping->bytes().data() + f.data_offset + entry.info.begin;
}

void Checkpoint::ReleaseData(const Entry& entry) const {
  const File& f = files_[entry.file];
  f.mapping->Release(f.data_offset + entry.info.begin, entry.info.end - entry.info.begin);
}

WeightMatrix Checkpoint::QuantizedMatrixOf(const std::string& base, std::int64_t rows, std::int64_t cols) const {
  const std::string values_name = base + ".qweight", scales_name = base + ".qscales";
  if (!Has(values_name) || !Has(scales_name)) {
    const std::string& present = Has(values_name) ? values_name : scales_name;
    throw ModelError(
        fmt::format("{}: quantized weight without '{}'", Where(Find(present), present), Has(values_name) ? scales_name : values_name));
  }
  const Entry& v = Find(values_name);
  const Entry& s = Find(scales_name);
  QuantFormat format;
  std::vector<std::int64_t> values_shape;
  if (v.info.dtype == DType::kI8) {
    format = QuantFormat::kInt8;
    values_shape = {rows, cols};
  } else if (v.info.dtype == DType::kU8) {
    format = QuantFormat::kInt4;
    if (cols % 2 != 0)
      throw ModelError(fmt::format("{}: int4 needs an even number of columns, the config implies {}", Where(v, values_name), cols));
    values_shape = {rows, cols / 2};
  } else {
    throw ModelError(fmt::format("{}: dtype {}; a quantized weight is I8 (int8) or U8 (int4, two values per byte)", Where(v, values_name),
                                 DTypeName(v.info.dtype)));
  }
  if (v.info.shape != values_shape) {
    throw ModelError(fmt::format("{}: shape [{}] but the config implies [{}] ({} of a [{}, {}] matrix)", Where(v, values_name),
                                 fmt::join(v.info.shape, ", "), fmt::join(values_shape, ", "), ToString(format), rows, cols));
  }
  if (s.info.dtype != DType::kF32) {
    throw ModelError(fmt::format("{}: dtype {}; quantization scales are F32", Where(s, scales_name), DTypeName(s.info.dtype)));
  }
  if (s.info.shape.size() != 2 || s.info.shape[0] != rows || s.info.shape[1] <= 0 || cols % s.info.shape[1] != 0) {
    throw ModelError(fmt::format("{}: shape [{}] is not [{}, {} / group] for a whole number of groups per row", Where(s, scales_name),
                                 fmt::join(s.info.shape, ", "), rows, cols));
  }
  const std::int64_t group = cols / s.info.shape[1];
  if (group % 32 != 0) {
    throw ModelError(fmt::format("{}: group size {} (from [{}] scales of {} columns) is not a multiple of 32, the kernels' input block",
                                 Where(s, scales_name), group, fmt::join(s.info.shape, ", "), cols));
  }
  if (config_.quantization && (config_.quantization->format != format || config_.quantization->group_size != group)) {
    throw ModelError(fmt::format("{}: {} with group {}, but config.json's tandem_quantization says {} with group {}", Where(v, values_name),
                                 ToString(format), group, ToString(config_.quantization->format), config_.quantization->group_size));
  }
  const auto* values = reinterpret_cast<const std::uint8_t*>(DataOf(v));
  std::vector<float> scales(static_cast<std::size_t>(s.info.elements()));  // copied: the mapping need not align floats
  std::memcpy(scales.data(), DataOf(s), scales.size() * sizeof(float));
  auto q = std::make_shared<QuantizedMatrix>(QuantizedMatrix::FromRowMajor(
      format, rows, cols, static_cast<int>(group), std::span(values, static_cast<std::size_t>(v.info.end - v.info.begin)), scales));
  ReleaseData(v);
  ReleaseData(s);
  return WeightMatrix::FromQuantized(std::move(q));
}

WeightMatrix Checkpoint::Matrix(std::string_view name, std::int64_t rows, std::int64_t cols) const {
  return Matrix(name, rows, cols, placement_);
}

WeightMatrix Checkpoint::Matrix(std::string_view name, std::int64_t rows, std::int64_t cols, WeightPlacement placement) const {
  if (!Has(name) && name.ends_with(".weight")) {
    const std::string base(name.substr(0, name.size() - std::string_view(".weight").size()));
    if (Has(base + ".qweight") || Has(base + ".qscales")) return QuantizedMatrixOf(base, rows, cols);
  }
  const Entry& e = Find(name);
  if (e.info.shape != std::vector<std::int64_t>{rows, cols}) {
    throw ModelError(
        fmt::format("{}: shape [{}] but the config implies [{}, {}]", Where(e, name), fmt::join(e.info.shape, ", "), rows, cols));
  }
  const std::byte* data = DataOf(e);
  const std::int64_t n = rows * cols;
  // The values as stored, for the kernels: a view of the mapping where asked and
  // possible, else in weight memory (the copy another matrix of this tensor holds,
  // if any), the file's pages of them leaving this process.
  const auto place = [&](WeightMatrix& out, bool can_view) {
    if (placement == WeightPlacement::kMapped && can_view) {
      out.owner = files_[e.file].mapping;
      out.data = data;
      return;
    }
    const std::lock_guard lock(copies_->mutex);
    std::weak_ptr<const void>& held = copies_->by_tensor[std::string(name)];
    out.owner = held.lock();
    if (out.owner == nullptr) {
      out.owner = CopyToWeightMemory(data, static_cast<std::size_t>(e.info.end - e.info.begin));
      held = out.owner;
      ReleaseData(e);
    }
    out.data = out.owner.get();
  };
  WeightMatrix m;
  m.rows = rows;
  m.cols = cols;
  switch (e.info.dtype) {
    case DType::kF32:
    case DType::kBF16: {
      m.type = e.info.dtype == DType::kF32 ? WeightMatrix::Type::kF32 : WeightMatrix::Type::kBF16;
      place(m, reinterpret_cast<std::uintptr_t>(data) % m.element_size() == 0);  // a view only of aligned values
      return m;
    }
    case DType::kF16: {  // widened into weight memory, whatever the placement
      const std::shared_ptr<void> memory = NewWeightMemory(static_cast<std::size_t>(n) * sizeof(float));
      auto* values = static_cast<float*>(memory.get());
      for (std::int64_t i = 0; i < n; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, data + 2 * i, 2);
        values[i] = F16ToF32(bits);
      }
      ReleaseData(e);
      return WeightMatrix::OwnedF32(rows, cols, std::shared_ptr<const float[]>(memory, values));
    }
    case DType::kF8E4M3: {
      const std::string scale_name = std::string(name) + "_scale_inv";
      const std::int64_t block_rows = (rows + kFp8Block - 1) / kFp8Block;
      const std::int64_t block_cols = (cols + kFp8Block - 1) / kFp8Block;
      if (!Has(scale_name)) throw ModelError(fmt::format("{}: F8_E4M3 weight without '{}'", Where(e, name), scale_name));
      // The kernels read the e4m3 bytes as stored; the small scale grid is copied
      // to fp32 whatever its stored type.
      const WeightMatrix scales = Matrix(scale_name, block_rows, block_cols, WeightPlacement::kMapped);
      auto grid = std::make_shared<std::vector<float>>(static_cast<std::size_t>(block_rows * block_cols));
      for (std::int64_t r = 0; r < block_rows; ++r) {
        for (std::int64_t c = 0; c < block_cols; ++c) (*grid)[static_cast<std::size_t>(r * block_cols + c)] = scales.At(r, c);
      }
      m.type = WeightMatrix::Type::kF8E4M3;
      place(m, true);
      m.block_scales = grid->data();
      m.scale_cols = block_cols;
      m.block_scales_owner = std::move(grid);
      return m;
    }
    default:
      throw ModelError(fmt::format("{}: dtype {} is not a floating-point weight type", Where(e, name), DTypeName(e.info.dtype)));
  }
}

std::vector<float> Checkpoint::Vector(std::string_view name, std::int64_t n) const {
  const Entry& e = Find(name);
  if (e.info.shape != std::vector<std::int64_t>{n}) {
    throw ModelError(fmt::format("{}: shape [{}] but the config implies [{}]", Where(e, name), fmt::join(e.info.shape, ", "), n));
  }
  std::vector<float> out(static_cast<std::size_t>(n));
  const std::byte* data = DataOf(e);
  for (std::int64_t i = 0; i < n; ++i) {
    switch (e.info.dtype) {
      case DType::kF32:
        std::memcpy(&out[i], data + 4 * i, 4);
        break;
      case DType::kBF16: {
        std::uint16_t bits;
        std::memcpy(&bits, data + 2 * i, 2);
        out[i] = Bf16ToF32(bits);
        break;
      }
      case DType::kF16: {
        std::uint16_t bits;
        std::memcpy(&bits, data + 2 * i, 2);
        out[i] = F16ToF32(bits);
        break;
      }
      default:
        throw ModelError(fmt::format("{}: dtype {} is not supported for a vector", Where(e, name), DTypeName(e.info.dtype)));
    }
  }
  return out;
}

}  // namespace tandem::rt
