#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace tandem::rt {

// How far a process is in loading what it serves, reported while it loads: an expert
// worker sends it to its coordinator during the handshake, so that a load of hundreds
// of gigabytes is told from a stalled one.
struct LoadProgress {
  // In the order a worker goes through them.
  enum class Phase {
    kRevision,  // hashing the checkpoint's files for its revision (once; then cached)
    kExperts,   // reading the slices it holds from the checkpoint
    kUpload,    // copying them to the GPU
  };
  Phase phase = Phase::kExperts;
  std::uint64_t bytes_done = 0;
  std::uint64_t bytes_total = 0;
  std::string file;  // the checkpoint file being read; empty while uploading
};

using LoadProgressFn = std::function<void(const LoadProgress&)>;

const char* ToString(LoadProgress::Phase phase);
// "loading its slices: 1.21 of 2.80 GB (43%), reading model-00002-of-00004.safetensors".
std::string Describe(const LoadProgress& progress);

}  // namespace tandem::rt
