#include "harness/launch/process_end.hpp"

#include <cstring>

#include <sys/wait.h>

#include <fmt/format.h>

namespace tandem::harness {

ProcessEnd ProcessEnd::FromWaitStatus(int status) {
  ProcessEnd end;
  if (WIFSIGNALED(status)) {
    end.signal = WTERMSIG(status);
    end.core_dumped = WCOREDUMP(status);
  } else if (WIFEXITED(status)) {
    end.code = WEXITSTATUS(status);
  }
  return end;
}

std::string DescribeSignal(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);  // "KILL"; null for a number no signal has
  return abbrev == nullptr ? fmt::format("signal {}", signal) : fmt::format("signal {} (SIG{})", signal, abbrev);
}

std::string ProcessEnd::Describe() const {
  if (!killed()) return fmt::format("exited with code {}", code);
  return fmt::format("was killed by {}{}", DescribeSignal(signal), core_dumped ? ", core dumped" : "");
}

}  // namespace tandem::harness
