#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <fmt/format.h>

#include "harness/commands/campaign_run.hpp"
#include "harness/launch/managed_process.hpp"

namespace tandem::harness {

namespace {

volatile std::sig_atomic_t g_interrupt = 0;
int g_interrupt_pipe[2] = {-1, -1};

extern "C" void OnInterrupt(int signal) {
  if (g_interrupt != 0) ::_exit(130);
  g_interrupt = signal;
  const char byte = 1;
  (void)!::write(g_interrupt_pipe[1], &byte, 1);
}

}  // namespace

InterruptWatch::InterruptWatch() {
  if (::pipe2(g_interrupt_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("cannot create a pipe for signals");
  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, &old_int_);
  ::sigaction(SIGTERM, &action, &old_term_);
  watcher_ = std::thread([this] {
    while (!stop_) {
      pollfd p{.fd = g_interrupt_pipe[0], .events = POLLIN, .revents = 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char byte;
      while (::read(g_interrupt_pipe[0], &byte, 1) > 0) {
      }
      fmt::print(stderr, "\ntandem: {} received: stopping the session, tearing it down (again to exit at once)\n",
                 g_interrupt == SIGTERM ? "SIGTERM" : "SIGINT");
      TerminateEveryProcessGroup();
    }
  });
}

InterruptWatch::~InterruptWatch() {
  stop_ = true;
  watcher_.join();
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::close(g_interrupt_pipe[0]);
  ::close(g_interrupt_pipe[1]);
}

bool InterruptWatch::interrupted() { return g_interrupt != 0; }
const char* InterruptWatch::signal_name() { return g_interrupt == SIGTERM ? "SIGTERM" : "SIGINT"; }

}  // namespace tandem::harness
