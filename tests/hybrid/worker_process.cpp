#include "tests/hybrid/worker_process.hpp"

#include <stdexcept>

#include "tests/runtime/eval_run.hpp"
#include "tests/runtime/tiny_model.hpp"

namespace tandem::testing {

using namespace std::chrono_literals;

WorkerProcess StartWorker(const std::filesystem::path& model, const std::string& role, std::vector<std::string> extra) {
  WorkerProcess w;
  w.log = TempDir("worker") / "stderr.log";
  std::vector<std::string> argv = {"expert", "--listen", "127.0.0.1:0", "--model", model.string(), "--threads", "1", "--role", role};
  argv.insert(argv.end(), extra.begin(), extra.end());
  w.process = std::make_unique<ChildProcess>(TANDEM_RT_BIN, argv, w.log.string());
  const auto line = w.process->ReadLine(20s);
  if (!line || line->find("listening on ") == std::string::npos)
    throw std::runtime_error("worker did not start: " + line.value_or("(nothing)"));
  w.address = line->substr(line->rfind(' ') + 1);
  return w;
}

std::string ErrorLine(const std::string& err) {
  const auto at = err.find("tandem-rt: error: ");
  return at == std::string::npos ? "" : err.substr(at, err.find('\n', at) - at);
}

std::filesystem::path WriteTokenFile(const std::string& token) {
  const auto path = TempDir("token") / "worker-token";
  WriteFile(path, token + "\n");
  std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return path;
}

}  // namespace tandem::testing
