#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace tandem::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  bool timed_out = false;
};

// Runs `program` with `args`, stdin closed, capturing stdout and stderr. The
// child is always reaped: on timeout it is killed and `timed_out` is set.
CommandResult RunCommand(const std::string& program, const std::vector<std::string>& args,
                         std::chrono::seconds timeout = std::chrono::seconds(60));

}  // namespace tandem::testing
