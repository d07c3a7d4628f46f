#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace tandem::rt {

// Which files of a checkpoint directory hold its weights: the shards listed in
// model.safetensors.index.json (in first-listed order, with the tensor → file map),
// or the single model.safetensors. Throws ModelError when there is neither, or when
// the index is malformed or names a file outside the directory.
struct ShardIndex {
  std::vector<std::string> files;
  std::map<std::string, std::string> weight_map;  // empty for a single file
};

ShardIndex ReadShardIndex(const std::filesystem::path& dir);

}  // namespace tandem::rt
