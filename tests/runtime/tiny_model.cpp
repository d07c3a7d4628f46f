#include "tests/runtime/tiny_model.hpp"

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/model/synthetic_checkpoint.hpp"

namespace tandem::testing {

namespace {

std::vector<std::filesystem::path>& Cleanup() {
  static std::vector<std::filesystem::path> dirs;
  static const bool registered = [] {
    std::atexit([] {
      std::error_code ec;
      for (const auto& d : Cleanup()) std::filesystem::remove_all(d, ec);
    });
    return true;
  }();
  (void)registered;
  return dirs;
}

}  // namespace

std::filesystem::path TempDir(const char* tag) {
  std::string pattern = (std::filesystem::temp_directory_path() / (std::string("tandem-") + tag + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
  Cleanup().emplace_back(pattern);
  return pattern;
}

namespace {

// A synthetic checkpoint of `preset` (seed 1, no tokenizer source) in a new temp dir.
std::filesystem::path WritePreset(const char* preset) {
  const auto d = TempDir(preset);
  rt::WriteSyntheticCheckpoint(rt::FindPreset(preset), 1, d, d / "no-tokenizer-source");
  return d;
}

}  // namespace

const std::filesystem::path& TinyCheckpoint() {
  static const std::filesystem::path dir = WritePreset("tiny");
  return dir;
}

const std::filesystem::path& SmallCheckpoint() {
  static const std::filesystem::path dir = WritePreset("small");
  return dir;
}

const std::filesystem::path& MiniCheckpoint() {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path d = std::filesystem::path(TANDEM_SOURCE_DIR) / "models" / "mini" / "checkpoint";
    if (!std::filesystem::exists(d / "model.safetensors")) {
      throw std::runtime_error("the trained mini checkpoint is not at " + d.string() + " (it is committed there: models/README.md)");
    }
    return d;
  }();
  return dir;
}

}  // namespace tandem::testing
