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

const std::filesystem::path& TinyCheckpoint() {
  static const std::filesystem::path dir = [] {
    const auto d = TempDir("tiny");
    rt::WriteSyntheticCheckpoint(rt::FindPreset("tiny"), 1, d, d / "no-tokenizer-source");
    return d;
  }();
  return dir;
}

const std::filesystem::path& SmallCheckpoint() {
  static const std::filesystem::path dir = [] {
    const auto d = TempDir("small");
    rt::WriteSyntheticCheckpoint(rt::FindPreset("small"), 1, d, d / "no-tokenizer-source");
    return d;
  }();
  return dir;
}

}  // namespace tandem::testing
