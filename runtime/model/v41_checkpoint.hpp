#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/model/engram_constants.hpp"
#include "runtime/model/mapped_file.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/model/v41_config.hpp"

namespace tandem::rt {

// A DeepSeek V4.1 checkpoint directory opened for computing: its configuration, its
// Engram constants (engram.json), and every tensor checked against the configuration
// (CheckV41Checkpoint) and mapped, its bytes as stored. Throws ModelError naming the
// file and what is wrong.
class V41Checkpoint {
 public:
  static V41Checkpoint Open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  const V41Config& config() const { return *config_; }
  const EngramConstants& engram() const { return engram_; }

  bool Has(std::string_view name) const { return tensors_.contains(name); }
  const TensorInfo& Info(std::string_view name) const;
  // The stored bytes of a tensor (valid while this checkpoint lives).
  std::span<const std::uint8_t> Bytes(std::string_view name) const;
  // A 1-D F32 or BF16 tensor of `n` elements as fp32 (a copy); ModelError otherwise.
  std::vector<float> Vector(std::string_view name, std::int64_t n) const;

 private:
  struct Entry {
    std::size_t file = 0;
    TensorInfo info;
  };
  const Entry& Find(std::string_view name) const;

  std::filesystem::path dir_;
  std::shared_ptr<V41Config> config_;  // stable address: Routers keep a reference to its MoE view
  EngramConstants engram_;
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::vector<std::uint64_t> data_offsets_;
  std::map<std::string, Entry, std::less<>> tensors_;
};

}  // namespace tandem::rt
