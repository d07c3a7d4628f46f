#pragma once

// A real `tandem-rt serve` on the tiny preset for end-to-end tests, with its expert
// workers, on loopback ports chosen at run time.
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "tests/support/child_process.hpp"

namespace tandem::testing {

struct Worker {
  std::unique_ptr<ChildProcess> process;
  std::string address;
};

Worker StartWorker();

// A server on the tiny preset (or `model`); `workers` real expert workers unless 0.
// `flags` are appended to `tandem-rt serve`'s command line.
class Server {
 public:
  explicit Server(int workers, std::vector<std::string> flags = {}, const std::filesystem::path& model = {});

  httplib::Client Client() const;
  std::string address() const { return address_; }  // host:port
  std::string Log() const;
  nlohmann::json Stats() const;
  ChildProcess& process() { return *process_; }
  std::vector<Worker>& workers() { return workers_; }

 private:
  std::vector<Worker> workers_;
  std::unique_ptr<ChildProcess> process_;
  std::string address_;
  std::filesystem::path log_;
};

// The text of a non-streamed chat completion.
std::string Text(const nlohmann::json& completion);

// POSTs `body`; {0, null} when no response came.
std::pair<int, nlohmann::json> Post(Server& server, const std::string& path, const std::string& body, const httplib::Headers& headers = {});

}  // namespace tandem::testing
