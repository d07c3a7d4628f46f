#include "harness/commands/session_logs.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace tandem::harness {

std::filesystem::path SessionLogDir(const std::filesystem::path& store, int order_index) {
  const std::filesystem::path absolute = std::filesystem::absolute(store).lexically_normal();
  return absolute.parent_path() / (absolute.stem().string() + "-logs") / fmt::format("session-{}", order_index);
}

std::filesystem::path AttemptLogDir(const std::filesystem::path& store, int order_index, int attempt) {
  return SessionLogDir(store, order_index) / fmt::format("attempt-{}", attempt);
}

void WriteAttemptFailure(const std::filesystem::path& attempt_dir, const std::string& reason) {
  std::error_code ec;
  std::filesystem::create_directories(attempt_dir, ec);
  std::ofstream(attempt_dir / kAttemptFailureFile) << reason << '\n';
}

std::string ReadAttemptFailure(const std::filesystem::path& attempt_dir) {
  std::ifstream in(attempt_dir / kAttemptFailureFile);
  std::ostringstream text;
  text << in.rdbuf();
  std::string reason = text.str();
  while (!reason.empty() && reason.back() == '\n') reason.pop_back();
  return reason;
}

}  // namespace tandem::harness
