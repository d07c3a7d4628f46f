#include "bench/bench_model.hpp"

#include <cstdlib>

#include <unistd.h>

#include <fmt/format.h>

#include "runtime/model/quantize_checkpoint.hpp"
#include "runtime/model/synthetic_checkpoint.hpp"
#include "runtime/model/synthetic_tokenizer.hpp"

namespace tandem::bench {

const std::filesystem::path& BenchModel() {
  static const std::filesystem::path* model = [] {
    if (const char* dir = std::getenv("TANDEM_BENCH_MODEL"); dir != nullptr && *dir != '\0') return new std::filesystem::path(dir);
    // Never destroyed: the exit handler that removes the directory still needs it.
    auto* d = new std::filesystem::path(std::filesystem::temp_directory_path() / fmt::format("tandem-bench-small-{}", ::getpid()));
    rt::WriteSyntheticCheckpoint(rt::FindPreset("small"), 1, *d, rt::DefaultTokenizerSource());
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(*model, ec);
    });
    return d;
  }();
  return *model;
}

const std::filesystem::path& BenchModelQuantized(rt::QuantFormat format, bool all_experts) {
  static const std::filesystem::path* models[4] = {};
  const std::filesystem::path*& model = models[(format == rt::QuantFormat::kInt8 ? 0 : 1) + (all_experts ? 2 : 0)];
  if (model == nullptr) {
    const std::filesystem::path& source = BenchModel();
    auto* d = new std::filesystem::path(
        std::filesystem::temp_directory_path() /
        fmt::format("tandem-bench-{}-{}{}-{}", source.filename().string(), rt::ToString(format), all_experts ? "-all" : "", ::getpid()));
    std::filesystem::remove_all(*d);
    rt::CheckpointQuantization what;
    what.format = format;
    what.tensors = all_experts ? rt::QuantizedTensors::kExperts : rt::QuantizedTensors::kRoutedExperts;
    rt::QuantizeCheckpoint(source, *d, what);
    model = d;
    std::atexit([] {
      for (const std::filesystem::path* m : models) {
        std::error_code ec;
        if (m != nullptr) std::filesystem::remove_all(*m, ec);
      }
    });
  }
  return *model;
}

}  // namespace tandem::bench
