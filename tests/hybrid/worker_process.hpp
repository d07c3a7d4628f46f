#pragma once

// A real `tandem-rt expert` on a loopback port chosen at run time, for the hybrid tests.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/child_process.hpp"

namespace tandem::testing {

struct WorkerProcess {
  std::unique_ptr<ChildProcess> process;
  std::string address;        // host:port it listens on
  std::filesystem::path log;  // its stderr
};

// Starts `tandem-rt expert --listen 127.0.0.1:0 --model MODEL --threads 1 --role ROLE
// EXTRA...` with this process's environment; throws unless it says where it listens.
WorkerProcess StartWorker(const std::filesystem::path& model, const std::string& role = "worker", std::vector<std::string> extra = {});

// The line of `tandem-rt`'s stderr that says why it failed ("tandem-rt: error: ..."), or "".
std::string ErrorLine(const std::string& err);

// A private (0600) file holding `token` on its first line, for --worker-token-file.
std::filesystem::path WriteTokenFile(const std::string& token);

}  // namespace tandem::testing
