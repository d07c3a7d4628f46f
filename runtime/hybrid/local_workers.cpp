#include "runtime/hybrid/local_workers.hpp"

#include <future>
#include <stdexcept>

#include <boost/process.hpp>
#include <fmt/format.h>

namespace tandem::rt {

namespace bp = boost::process;

struct LocalWorkers::Child {
  bp::ipstream out;
  bp::child process;
};

namespace {

std::filesystem::path SelfExecutable() { return std::filesystem::read_symlink("/proc/self/exe"); }

}  // namespace

LocalWorkers::LocalWorkers(const std::filesystem::path& model, int workers, bool peer, int threads_each, std::filesystem::path tandem_rt,
                           std::vector<std::string> extra_args, std::chrono::milliseconds start_timeout) {
  const std::filesystem::path self = tandem_rt.empty() ? SelfExecutable() : tandem_rt;
  auto spawn = [&](const std::string& role) {
    auto child = std::make_unique<Child>();
    std::vector<std::string> args = {
        "expert", "--listen", "127.0.0.1:0", "--model", model.string(), "--threads", std::to_string(threads_each), "--role", role};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    child->process = bp::child(bp::exe = self.string(), bp::args = args, bp::std_in.close(), bp::std_out > child->out);
    // The first line says where it listens; a reader thread makes the wait bounded.
    auto line = std::async(std::launch::async, [&out = child->out] {
      std::string l;
      std::getline(out, l);
      return l;
    });
    if (line.wait_for(start_timeout) != std::future_status::ready) {
      child->process.terminate();  // closes the pipe, which ends the reader
      line.wait();
      throw std::runtime_error(fmt::format("a spawned expert {} did not start within {} ms", role, start_timeout.count()));
    }
    const std::string text = line.get();
    const auto at = text.rfind(' ');
    if (text.find("listening on ") == std::string::npos || at == std::string::npos) {
      throw std::runtime_error(fmt::format("a spawned expert {} failed to start (said: '{}')", role, text));
    }
    std::string address = text.substr(at + 1);
    children_.push_back(std::move(child));
    return address;
  };
  try {
    if (peer) peer_ = spawn("peer");
    for (int i = 0; i < workers; ++i) workers_.push_back(spawn("worker"));
  } catch (...) {
    for (auto& c : children_) {
      std::error_code ec;
      c->process.terminate(ec);
    }
    throw;
  }
}

LocalWorkers::~LocalWorkers() {
  for (auto& c : children_) {
    std::error_code ec;
    if (c->process.running(ec)) c->process.terminate(ec);  // SIGKILL, then reaped
    c->process.wait(ec);
  }
}

}  // namespace tandem::rt
