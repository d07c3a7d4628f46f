#include "runtime/serve/startup_timeline.hpp"

#include <ctime>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

namespace tandem::rt {

namespace {

// Seconds since this process started: the boot clock now, less the start time /proc records
// (in clock ticks since boot). 0 where /proc cannot be read.
double SecondsSinceProcessStart() {
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i != 22) continue;
    timespec now{};
    if (::clock_gettime(CLOCK_BOOTTIME, &now) != 0) return 0;
    const double started = std::stod(field) / static_cast<double>(::sysconf(_SC_CLK_TCK));
    const double since = static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec) - started;
    return since > 0 ? since : 0;
  }
  return 0;
}

}  // namespace

StartupTimeline::StartupTimeline() : constructed_(std::chrono::steady_clock::now()), since_process_start_(SecondsSinceProcessStart()) {}

void StartupTimeline::Mark(const std::string& phase) {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - constructed_).count();
  phases_.emplace_back(phase, since_process_start_ + s);
}

void StartupTimeline::SetWeights(const std::filesystem::path& checkpoint_dir) {
  std::error_code ec;
  weight_files_ = 0;
  weight_bytes_ = 0;
  for (const auto& entry : std::filesystem::directory_iterator(checkpoint_dir, ec)) {
    if (!entry.is_regular_file(ec) || entry.path().extension() != ".safetensors") continue;
    ++weight_files_;
    weight_bytes_ += entry.file_size(ec);
  }
}

std::string StartupTimeline::Json() const {
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& [name, seconds] : phases_) phases.push_back({name, seconds});
  return nlohmann::json{{"phases", phases}, {"weight_files", weight_files_}, {"weight_bytes", weight_bytes_}}.dump();
}

}  // namespace tandem::rt
