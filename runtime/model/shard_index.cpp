#include "runtime/model/shard_index.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/model/model_error.hpp"
#include "runtime/model/text_file.hpp"

namespace tandem::rt {

ShardIndex ReadShardIndex(const std::filesystem::path& dir) {
  ShardIndex index;
  const auto path = dir / "model.safetensors.index.json";
  if (!std::filesystem::exists(path)) {
    if (!std::filesystem::exists(dir / "model.safetensors")) {
      throw ModelError(fmt::format("{}: has neither model.safetensors nor model.safetensors.index.json", dir.string()));
    }
    index.files = {"model.safetensors"};
    return index;
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(ReadTextFile(path));
  } catch (const nlohmann::json::exception& e) {
    throw ModelError(fmt::format("{}: not valid JSON: {}", path.string(), e.what()));
  }
  const auto map = doc.find("weight_map");
  if (map == doc.end() || !map->is_object()) throw ModelError(fmt::format("{}: 'weight_map' is missing", path.string()));
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string()) throw ModelError(fmt::format("{}: weight_map['{}'] is not a file name", path.string(), tensor));
    const std::string name = file.get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name == "..") {
      throw ModelError(fmt::format("{}: weight_map['{}'] = '{}' is not a file in the checkpoint directory", path.string(), tensor, name));
    }
    if (std::find(index.files.begin(), index.files.end(), name) == index.files.end()) index.files.push_back(name);
    index.weight_map[tensor] = name;
  }
  return index;
}

}  // namespace tandem::rt
