#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace tandem::rt {

// The serving process's own startup, as /v1/stats reports it under "startup": seconds from
// the process's start (the kernel's record of it, so the time before main counts) to each
// phase it marks, and the bytes of weights it opened. A launcher measures from outside; this
// says where inside the time went (opening the checkpoint, connecting workers, warming up).
class StartupTimeline {
 public:
  StartupTimeline();
  void Mark(const std::string& phase);
  // The checkpoint's weight files (*.safetensors) and their bytes.
  void SetWeights(const std::filesystem::path& checkpoint_dir);
  // {"phases": [[name, seconds], …], "weight_files": N, "weight_bytes": B}
  std::string Json() const;

 private:
  std::chrono::steady_clock::time_point constructed_;
  double since_process_start_ = 0;  // at construction
  std::vector<std::pair<std::string, double>> phases_;
  int weight_files_ = 0;
  std::uint64_t weight_bytes_ = 0;
};

}  // namespace tandem::rt
