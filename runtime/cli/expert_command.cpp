#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "runtime/cli/commands.hpp"
#include "runtime/hybrid/expert_worker.hpp"
#include "runtime/hybrid/worker_token.hpp"
#include "runtime/kernels/cuda/cuda_device.hpp"

namespace tandem::rt::cli {

namespace {

// $TANDEM_DEBUG_LOAD_DELAY_MS (ExpertWorkerOptions::debug_load_delay): a whole number of
// milliseconds up to a minute, or unset.
std::chrono::milliseconds DebugLoadDelay() {
  const char* value = std::getenv("TANDEM_DEBUG_LOAD_DELAY_MS");
  if (value == nullptr || *value == '\0') return std::chrono::milliseconds(0);
  char* end = nullptr;
  errno = 0;
  const long ms = std::strtol(value, &end, 10);
  if (errno != 0 || *end != '\0' || ms < 0 || ms > 60000 || !std::isdigit(static_cast<unsigned char>(*value))) {
    throw CLI::ValidationError("TANDEM_DEBUG_LOAD_DELAY_MS",
                               fmt::format("'{}' is not a whole number of milliseconds from 0 to 60000", value));
  }
  return std::chrono::milliseconds(ms);
}

// Async-signal-safe: write(2) and _exit(2) only.
void ExitOnSignal(int signal) {
  static constexpr char kTerm[] = "tandem-rt expert: SIGTERM received; exiting\n";
  static constexpr char kInt[] = "tandem-rt expert: SIGINT received; exiting\n";
  [[maybe_unused]] const auto written =
      signal == SIGTERM ? ::write(STDERR_FILENO, kTerm, sizeof kTerm - 1) : ::write(STDERR_FILENO, kInt, sizeof kInt - 1);
  ::_exit(0);
}

}  // namespace

void AddExpertCommand(CLI::App& app) {
  auto opt = std::make_shared<ExpertWorkerOptions>();
  auto frame_timeout_ms = std::make_shared<int>(30000);
  auto model = std::make_shared<std::string>();
  auto device = std::make_shared<std::string>("cpu");
  auto emulated_rtt_us = std::make_shared<int>(0);
  auto token_file = std::make_shared<std::string>();
  auto handshake_timeout_s = std::make_shared<int>(10);
  auto idle_timeout_s = std::make_shared<int>(0);
  CLI::App* cmd = app.add_subcommand("expert", "Serve routed experts (or a coordinator's TP2 half, --role peer) over TCP");
  cmd->add_option("--listen", opt->listen, "HOST:PORT to listen on; port 0 picks a free one (printed on stdout)")->required();
  cmd->add_option("--model", *model, "Checkpoint directory (opened at the coordinator's handshake)")->required();
  cmd->add_option("--threads", opt->threads, "Threads (0: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("--role", opt->role, "worker (routed experts) or peer (second coordinator rank)")
      ->check(CLI::IsMember({"worker", "peer"}))
      ->capture_default_str();
  cmd->add_option("--frame-timeout-ms", *frame_timeout_ms, "A frame that has started must finish within this")
      ->check(CLI::Range(1, 3600000));
  cmd->add_option("--device", *device, "Where the experts are computed: cpu, or cuda (a CUDA build with a GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--worker-token-file", *token_file,
                  "File whose first line is the token coordinators must prove (default: $TANDEM_WORKER_TOKEN): at least 16 "
                  "random characters (openssl rand -hex 32); must not be readable by group or others");
  cmd->add_flag("--allow-unauthenticated", opt->allow_unauthenticated,
                "Without a token, serve anyone who connects also on a non-loopback --listen address");
  cmd->add_option("--handshake-timeout-s", *handshake_timeout_s,
                  "A connection must complete its handshake (prove the token) within this, else it is closed")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--idle-timeout-s", *idle_timeout_s,
                  "Close a coordinator's session after this long without a request (0: never; a serving coordinator may be idle "
                  "for hours, and TCP keep-alive notices one whose host is gone)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  cmd->add_flag("--transport-only", opt->transport_only,
                "Benchmarking aid: hold no weights, answer every request with zeros (measures the transport alone)");
  cmd->add_flag("--map-weights", opt->map_weights,
                "Read the slices where the checkpoint's files are mapped instead of copying them onto 2 MiB pages "
                "(whole experts only: a tp slice is always copied)");
  cmd->add_option("--emulated-rtt-us", *emulated_rtt_us,
                  "Benchmarking aid: handle each layer request this many microseconds after it arrives, as a network link's "
                  "round trip would (loopback stands in for a slower network)")
      ->check(CLI::Range(0, 1000000));
  cmd->callback([opt, model, frame_timeout_ms, device, emulated_rtt_us, token_file, handshake_timeout_s, idle_timeout_s] {
    opt->token = LoadWorkerToken(*token_file);
    opt->handshake_timeout = std::chrono::seconds(*handshake_timeout_s);
    opt->idle_timeout = std::chrono::seconds(*idle_timeout_s);
    opt->emulated_rtt = std::chrono::microseconds(*emulated_rtt_us);
    opt->model = *model;
    opt->device = ParseDevice(*device);
    if (opt->device == Device::kCuda) RequireCudaDevice();  // fail at start, not at the first handshake
    opt->frame_timeout = std::chrono::milliseconds(*frame_timeout_ms);
    opt->debug_load_delay = DebugLoadDelay();
    // SIGTERM / SIGINT end the worker at once (it keeps nothing worth flushing), also as
    // a container's PID 1, where a signal without a handler would be ignored. A handler,
    // with both unblocked, rather than a sigwait thread with both blocked: a launcher's
    // mask is inherited through exec, and one that blocked them (as serve does) must not
    // leave a worker that ignores `kill -TERM`; nothing here blocks signals.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
    struct sigaction action {};
    action.sa_handler = ExitOnSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
    ExpertWorker worker(*opt);
    fmt::print("tandem-rt expert: listening on {}\n", worker.address());
    std::fflush(stdout);
    worker.Run();
  });
}

}  // namespace tandem::rt::cli
