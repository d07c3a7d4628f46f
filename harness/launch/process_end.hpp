#pragma once

#include <string>

namespace tandem::harness {

// How a process ended: it exited with a code, or a signal killed it. Messages say which
// (a process killed by SIGKILL did not "exit with code 9").
struct ProcessEnd {
  int code = 0;    // the exit code, when signal is 0
  int signal = 0;  // the signal that killed it; 0 when it exited
  bool core_dumped = false;

  // From a wait status (waitpid's).
  static ProcessEnd FromWaitStatus(int status);
  bool killed() const { return signal != 0; }
  // "exited with code 3", "was killed by signal 9 (SIGKILL)", "… (SIGSEGV), core dumped".
  std::string Describe() const;
};

// "signal 9 (SIGKILL)".
std::string DescribeSignal(int signal);

}  // namespace tandem::harness
