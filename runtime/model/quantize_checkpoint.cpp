#include "runtime/model/quantize_checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>

#include <sys/stat.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "runtime/model/checkpoint.hpp"
#include "runtime/model/mapped_file.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/model/shard_index.hpp"
#include "runtime/model/text_file.hpp"

namespace tandem::rt {

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kWeightSuffix = ".weight";
constexpr std::string_view kScaleInvSuffix = "_scale_inv";
constexpr const char* kIndexName = "model.safetensors.index.json";

// Consumes `prefix` from the front of `rest`.
bool Take(std::string_view& rest, std::string_view prefix) {
  if (!rest.starts_with(prefix)) return false;
  rest.remove_prefix(prefix.size());
  return true;
}

// Consumes one or more decimal digits.
bool TakeNumber(std::string_view& rest) {
  std::size_t n = 0;
  while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') ++n;
  rest.remove_prefix(n);
  return n > 0;
}

bool IsProjection(std::string_view rest) { return rest == "gate_proj.weight" || rest == "up_proj.weight" || rest == "down_proj.weight"; }

// model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight
bool IsRoutedExpert(std::string_view name) {
  return Take(name, "model.layers.") && TakeNumber(name) && Take(name, ".mlp.experts.") && TakeNumber(name) && Take(name, ".") &&
         IsProjection(name);
}

// model.layers.L.mlp.shared_experts.{gate,up,down}_proj.weight
bool IsSharedExpert(std::string_view name) {
  return Take(name, "model.layers.") && TakeNumber(name) && Take(name, ".mlp.shared_experts.") && IsProjection(name);
}

// model.layers.L.self_attn.{q_a_proj,q_b_proj,q_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj}.weight,
// model.layers.L.mlp.{gate,up,down}_proj.weight (a dense layer), the MTP layer's
// eh_proj and shared_head.head, and lm_head: the linear layers a "linear" checkpoint
// quantizes besides the experts. Not the router's gate (routing decisions are where
// precision matters most: llama.cpp's converter keeps it F32 too).
bool IsOtherLinear(std::string_view name) {
  if (name == "lm_head.weight") return true;
  if (!Take(name, "model.layers.") || !TakeNumber(name) || !Take(name, ".")) return false;
  if (Take(name, "self_attn.")) {
    return name == "q_a_proj.weight" || name == "q_b_proj.weight" || name == "q_proj.weight" || name == "kv_a_proj_with_mqa.weight" ||
           name == "kv_b_proj.weight" || name == "o_proj.weight";
  }
  if (Take(name, "mlp.")) return IsProjection(name);
  return name == "eh_proj.weight" || name == "shared_head.head.weight";
}

// model.embed_tokens.weight and the MTP layer's model.layers.L.embed_tokens.weight.
bool IsEmbedding(std::string_view name) {
  return name == "model.embed_tokens.weight" || (Take(name, "model.layers.") && TakeNumber(name) && name == ".embed_tokens.weight");
}

// "X" of "X.weight".
std::string Base(const std::string& weight_name) { return weight_name.substr(0, weight_name.size() - kWeightSuffix.size()); }

ordered_json ParseJson(const std::filesystem::path& path) {
  try {
    return ordered_json::parse(ReadTextFile(path));
  } catch (const nlohmann::json::exception& e) {
    throw ModelError(fmt::format("{}: not valid JSON: {}", path.string(), e.what()));
  }
}

// A fresh empty directory next to `out`, removed unless Release()d.
class TempDir {
 public:
  explicit TempDir(const std::filesystem::path& out) {
    const std::filesystem::path parent = out.parent_path().empty() ? std::filesystem::path(".") : out.parent_path();
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) throw ModelError(fmt::format("{}: cannot create: {}", parent.string(), ec.message()));
    std::string pattern = (parent / ("." + out.filename().string() + ".quantize-XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw ModelError(fmt::format("{}: cannot create a temporary directory next to --out: {}", pattern, std::strerror(errno)));
    }
    path_ = pattern;
    // mkdtemp makes it 0700; the checkpoint it becomes gets what a plain mkdir would.
    const mode_t mask = umask(0);
    umask(mask);
    std::filesystem::permissions(path_, static_cast<std::filesystem::perms>(0777 & ~mask), ec);
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  void Release() { path_.clear(); }

 private:
  std::filesystem::path path_;
};

struct Selected {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

}  // namespace

QuantizeCheckpointReport QuantizeCheckpoint(const std::filesystem::path& in_dir, const std::filesystem::path& out_arg,
                                            const CheckpointQuantization& what, const std::function<void(const std::string&)>& progress) {
  const QuantFormat format = what.format;
  const int group = what.group_size;
  // Options first: nothing is read or written for a bad flag.
  if (group <= 0 || group % 32 != 0) {
    throw std::invalid_argument(fmt::format("--group {} is not a positive multiple of 32, the kernels' input block", group));
  }
  std::filesystem::path out = out_arg;
  if (!out.has_filename()) out = out.parent_path();  // "dir/" → "dir"
  if (out.empty()) throw std::invalid_argument("--out must name a directory");
  std::error_code ec;
  if (std::filesystem::exists(out, ec)) {
    if (!std::filesystem::is_directory(out, ec) || !std::filesystem::is_empty(out, ec)) {
      throw std::invalid_argument(fmt::format("--out {}: already exists and is not an empty directory; give a new one", out.string()));
    }
  }

  const Checkpoint ckpt = Checkpoint::Open(in_dir, WeightPlacement::kMapped);
  const ModelConfig& config = ckpt.config();
  const auto config_path = in_dir / "config.json";
  if (config.quantization) {
    throw ModelError(
        fmt::format("{}: the checkpoint is already quantized (tandem_quantization: {}, group {}); quantize the "
                    "original checkpoint instead",
                    config_path.string(), ToString(config.quantization->format), config.quantization->group_size));
  }

  // Every matrix to quantize, checked before anything is written.
  std::map<std::string, Selected> selected;  // by X.weight
  QuantizeCheckpointReport report;
  int routed = 0;
  for (const std::string& name : ckpt.TensorNames()) {
    if (name.ends_with(".qweight") || name.ends_with(".qscales")) {
      throw ModelError(
          fmt::format("{}: tensor '{}' is already group-quantized; quantize the original checkpoint instead", in_dir.string(), name));
    }
    const bool expert = IsRoutedExpert(name) || (what.shared_experts() && IsSharedExpert(name));
    const bool other = (what.tensors == QuantizedTensors::kLinear && IsOtherLinear(name)) || (what.embedding && IsEmbedding(name));
    if (!expert && !other) continue;
    const TensorInfo& info = ckpt.Info(name);
    if (info.shape.size() != 2) {
      throw ModelError(
          fmt::format("{}: tensor '{}' has shape [{}]; a linear layer is a matrix", in_dir.string(), name, fmt::join(info.shape, ", ")));
    }
    const Selected t{info.shape[0], info.shape[1]};
    routed += IsRoutedExpert(name) ? 1 : 0;
    if (other && t.cols % group != 0) {
      report.left_unquantized.push_back(fmt::format("{} ({} columns)", name, t.cols));  // kept as stored
      continue;
    }
    if (t.cols % group != 0) {
      throw std::invalid_argument(
          fmt::format("--group {} does not divide the {} columns of '{}' (hidden_size {}, "
                      "moe_intermediate_size {}); choose a group that divides both",
                      group, t.cols, name, config.hidden_size, config.moe_intermediate_size));
    }
    selected.emplace(name, t);
  }
  if (routed == 0) {
    throw ModelError(
        fmt::format("{}: has no routed expert tensors (model.layers.L.mlp.experts.E.{{gate,up,down}}_proj.weight) "
                    "to quantize",
                    in_dir.string()));
  }

  // The new config.json, validated as a reader will see it.
  ordered_json config_json = ParseJson(config_path);
  config_json["tandem_quantization"] = ordered_json::parse(QuantizationJson(what));
  const std::string config_text = config_json.dump(2) + "\n";
  (void)ParseModelConfig(config_text, config_path.string() + " (with tandem_quantization)");

  TempDir tmp(out);
  const ShardIndex index = ReadShardIndex(in_dir);
  std::map<std::string, std::string> new_weight_map;

  // Quantized once per matrix: its .qscales and .qweight are neighbours in file order.
  // Files hold row-major values (the kernels' tile order is the loader's business).
  std::string cached_base;
  RowMajorQuantized cached;
  const auto quantized = [&](const std::string& base) -> const RowMajorQuantized& {
    if (base != cached_base) {
      const Selected& t = selected.at(base + std::string(kWeightSuffix));
      cached = QuantizedMatrix::QuantizeRowMajor(ckpt.Matrix(base + std::string(kWeightSuffix), t.rows, t.cols), format, group);
      cached_base = base;
    }
    return cached;
  };

  for (const std::string& file : index.files) {
    const auto path = in_dir / file;
    const MappedFile mapping(path);
    const SafetensorsHeader header = ParseSafetensorsHeader(mapping.bytes(), path.string());
    SafetensorsWriter writer;
    for (const auto& [key, value] : header.metadata) writer.SetMetadata(key, value);
    int quantized_here = 0, copied_here = 0;
    for (const auto& [name, info] : header.tensors) {
      if (!index.weight_map.empty()) {
        const auto it = index.weight_map.find(name);
        if (it == index.weight_map.end() || it->second != file) continue;  // the index assigns it elsewhere: not loaded
      }
      if (selected.contains(name)) {
        const Selected& t = selected.at(name);
        const std::string base = Base(name);
        writer.Add(base + ".qweight", format == QuantFormat::kInt8 ? DType::kI8 : DType::kU8,
                   {t.rows, format == QuantFormat::kInt8 ? t.cols : t.cols / 2});
        writer.Add(base + ".qscales", DType::kF32, {t.rows, t.cols / group});
        new_weight_map[base + ".qweight"] = file;
        new_weight_map[base + ".qscales"] = file;
        report.quantized_bytes_in += info.end - info.begin;
        ++quantized_here;
        continue;
      }
      if (name.ends_with(kScaleInvSuffix) && selected.contains(name.substr(0, name.size() - kScaleInvSuffix.size()))) {
        report.quantized_bytes_in += info.end - info.begin;  // a quantized matrix's fp8 block scales: replaced by its qscales
        continue;
      }
      writer.Add(name, info.dtype, info.shape);
      new_weight_map[name] = file;
      ++copied_here;
    }
    const std::byte* data = mapping.bytes().data() + header.data_offset;
    writer.Write(tmp.path() / file, [&](const std::string& name) -> std::span<const std::byte> {
      // The input has no .qweight / .qscales tensors (refused above): these are the experts'.
      const std::string base = name.substr(0, name.size() - std::string_view(".qweight").size());
      if (name.ends_with(".qweight")) return std::as_bytes(std::span<const std::uint8_t>(quantized(base).values));
      if (name.ends_with(".qscales")) return std::as_bytes(std::span<const float>(quantized(base).scales));
      const TensorInfo& info = header.tensors.find(name)->second;
      return {data + info.begin, static_cast<std::size_t>(info.end - info.begin)};
    });
    for (const auto& [name, size] : writer.Layout()) {
      if (name.ends_with(".qweight") || name.ends_with(".qscales")) report.quantized_bytes_out += size;
    }
    report.quantized_matrices += quantized_here;
    report.copied_tensors += copied_here;
    report.weight_bytes_out += writer.DataBytes();
    report.weight_files.push_back(file);
    if (progress) {
      progress(fmt::format("{}: {} matrices quantized, {} tensors copied, {:.1f} MB", file, quantized_here, copied_here,
                           static_cast<double>(writer.DataBytes()) / 1e6));
    }
  }

  const bool has_index = std::filesystem::exists(in_dir / kIndexName);
  if (has_index) {
    ordered_json index_json = ParseJson(in_dir / kIndexName);
    ordered_json map = ordered_json::object();
    for (const auto& [tensor, file] : new_weight_map) map[tensor] = file;
    index_json["weight_map"] = std::move(map);
    if (index_json.contains("metadata") && index_json["metadata"].is_object()) {
      index_json["metadata"]["total_size"] = report.weight_bytes_out;
    }
    WriteTextFile(tmp.path() / kIndexName, index_json.dump(2) + "\n");
  }
  WriteTextFile(tmp.path() / "config.json", config_text);

  // Everything else at the top level: tokenizer files, generation config, README, ...
  const std::set<std::string> written(index.files.begin(), index.files.end());
  for (const auto& entry : std::filesystem::directory_iterator(in_dir)) {
    const std::string name = entry.path().filename().string();
    if (std::filesystem::equivalent(entry.path(), tmp.path(), ec)) continue;  // --out inside --in
    if (written.contains(name) || name == "config.json" || (has_index && name == kIndexName) || name.starts_with(".tandem-revision.json")) {
      continue;
    }
    if (entry.is_directory()) {
      report.skipped.push_back(name + "/");
      continue;
    }
    if (!entry.is_regular_file()) continue;
    std::filesystem::copy_file(entry.path(), tmp.path() / name, ec);
    if (ec) throw ModelError(fmt::format("{}: cannot copy into {}: {}", entry.path().string(), tmp.path().string(), ec.message()));
    report.copied_files.push_back(name);
  }
  std::sort(report.copied_files.begin(), report.copied_files.end());
  std::sort(report.skipped.begin(), report.skipped.end());

  std::filesystem::rename(tmp.path(), out, ec);  // replaces an empty `out`
  if (ec) throw ModelError(fmt::format("{}: cannot rename {} to it: {}", out.string(), tmp.path().string(), ec.message()));
  tmp.Release();
  return report;
}

}  // namespace tandem::rt
