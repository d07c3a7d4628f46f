#pragma once

#include <algorithm>
#include <chrono>
#include <system_error>
#include <thread>

#include <signal.h>

namespace tandem {

// Waits up to `timeout` for a Boost.Process child to end; true when it has (it is then
// reaped, its exit code available). Polls instead of child::wait_for, which in Boost
// 1.74 can sleep through its whole timeout when the child ended before the wait began
// (its SIGCHLD was already taken).
template <typename Child, typename Rep, typename Period>
bool WaitForExit(Child& child, std::chrono::duration<Rep, Period> timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::error_code ec;
    if (!child.running(ec)) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(deadline - now, std::chrono::milliseconds(10)));
  }
}

// Kills a Boost.Process child (SIGKILL) and reaps it. Not child::terminate: in Boost
// 1.74 it reaps only a child already gone when it looks (waitpid with WNOHANG right
// after the signal), then marks the child terminated, so that wait() does nothing and
// the process stays a zombie until this one exits.
template <typename Child>
void KillAndReap(Child& child) {
  if (!child.valid()) return;
  std::error_code ec;
  if (!child.running(ec)) return;  // it had ended: running() reaped it
  ::kill(child.id(), SIGKILL);
  child.wait(ec);  // a killed process ends: SIGKILL cannot be caught or ignored
}

}  // namespace tandem
