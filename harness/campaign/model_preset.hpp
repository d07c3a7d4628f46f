#pragma once

#include <filesystem>
#include <string_view>

// The model presets a campaign names instead of a path: synthetic ones (random weights
// that tandem-rt init-model writes, for size and speed tests) and trained ones (a real
// language model committed under models/, for content checks, agreement and acceptance).
namespace tandem::harness {

bool IsTrainedPreset(std::string_view name);  // mini

// A trained preset's checkpoint: $TANDEM_MODELS_DIR/<name> when that variable is set,
// else models/<name>/checkpoint in the source tree this harness was built from. Throws
// InputError naming where it looked when there is no checkpoint (config.json) there.
std::filesystem::path TrainedPresetDir(std::string_view name);

}  // namespace tandem::harness
