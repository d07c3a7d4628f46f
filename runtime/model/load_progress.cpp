#include "runtime/model/load_progress.hpp"

#include <fmt/format.h>

namespace tandem::rt {

const char* ToString(LoadProgress::Phase phase) {
  switch (phase) {
    case LoadProgress::Phase::kRevision:
      return "revision";
    case LoadProgress::Phase::kExperts:
      return "experts";
    case LoadProgress::Phase::kUpload:
      return "upload";
  }
  return "?";
}

std::string Describe(const LoadProgress& p) {
  const char* what = p.phase == LoadProgress::Phase::kRevision  ? "hashing the checkpoint for its revision"
                     : p.phase == LoadProgress::Phase::kExperts ? "loading its slices"
                                                                : "copying its slices to the GPU";
  const double percent = p.bytes_total == 0 ? 100.0 : 100.0 * static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total);
  return fmt::format("{}: {:.2f} of {:.2f} GB ({:.0f}%){}", what, static_cast<double>(p.bytes_done) / 1e9,
                     static_cast<double>(p.bytes_total) / 1e9, percent, p.file.empty() ? "" : ", reading " + p.file);
}

}  // namespace tandem::rt
