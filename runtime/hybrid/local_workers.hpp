#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tandem::rt {

// Expert workers (and a peer) started on loopback, on ports the system picks, for a
// one-command hybrid run (`--spawn-workers N`) and for benchmarks. Each is
// `<tandem_rt> expert --listen 127.0.0.1:0 ...`; the destructor kills and reaps them.
// They start with no signal blocked or ignored, and the kernel kills them when the
// thread that built this object ends (build it on the main thread), so they never
// outlive a coordinator that was SIGKILLed.
class LocalWorkers {
 public:
  // `tandem_rt`: the executable to run; empty means this process's own (/proc/self/exe).
  // `token`: the worker token the children hold, handed over in their environment
  // (TANDEM_WORKER_TOKEN), never on their command line; none: they hold none (the
  // variable is removed from their environment) and warn that anyone local may connect.
  LocalWorkers(const std::filesystem::path& model, int workers, bool peer, int threads_each, std::filesystem::path tandem_rt = {},
               std::vector<std::string> extra_args = {}, std::chrono::milliseconds start_timeout = std::chrono::seconds(30),
               const std::optional<std::string>& token = std::nullopt);
  ~LocalWorkers();
  LocalWorkers(const LocalWorkers&) = delete;
  LocalWorkers& operator=(const LocalWorkers&) = delete;

  const std::vector<std::string>& worker_addresses() const { return workers_; }
  const std::string& peer_address() const { return peer_; }
  // Reaps the children that have ended and says how each did ("the spawned expert
  // worker 127.0.0.1:P (pid N) was killed by signal 9 (SIGKILL)"; "; "-separated);
  // empty while every one runs.
  std::string Ended();

 private:
  struct Child;
  std::vector<std::unique_ptr<Child>> children_;
  std::vector<std::string> workers_;
  std::string peer_;
};

}  // namespace tandem::rt
