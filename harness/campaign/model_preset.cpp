#include "harness/campaign/model_preset.hpp"

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "common/input_error.hpp"

namespace tandem::harness {

bool IsTrainedPreset(std::string_view name) { return name == "mini"; }

std::filesystem::path TrainedPresetDir(std::string_view name) {
  if (!IsTrainedPreset(name)) throw InputError(fmt::format("'{}' is not a trained model preset (mini)", name));
  std::filesystem::path dir;
  std::string where;
  if (const char* models = std::getenv("TANDEM_MODELS_DIR"); models != nullptr && *models != '\0') {
    dir = std::filesystem::path(models) / name;
    where = "TANDEM_MODELS_DIR";
  } else {
    // The committed checkpoint of the tree this harness was built from (models/README.md).
    dir = std::filesystem::path(TANDEM_SOURCE_DIR) / "models" / name / "checkpoint";
    where = "the source tree the harness was built from";
  }
  std::error_code ec;
  if (!std::filesystem::exists(dir / "config.json", ec) || !std::filesystem::exists(dir / "model.safetensors", ec)) {
    throw InputError(
        fmt::format("the {} preset's checkpoint is not at {} ({}): config.json or model.safetensors is missing; "
                    "set TANDEM_MODELS_DIR to a folder holding {}/, or give model: {{path: ...}}",
                    name, dir.string(), where, name));
  }
  return dir;
}

}  // namespace tandem::harness
