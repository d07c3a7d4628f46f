#include "harness/launch/host.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "common/input_error.hpp"
#include "harness/launch/process_end.hpp"
#include "harness/launch/shell.hpp"

namespace tandem::harness {

namespace {

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string ReadText(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::unique_ptr<Host> Host::Local(const HostSpec& spec) {
  std::unique_ptr<Host> host(new Host(spec));
  const char* home = std::getenv("HOME");
  host->home_ = home != nullptr ? home : "/root";
  return host;
}

std::vector<std::string> Host::SshBase() const {
  std::vector<std::string> argv = {"ssh",
                                   "-o",
                                   "BatchMode=yes",
                                   "-o",
                                   "ConnectTimeout=10",
                                   "-o",
                                   "ServerAliveInterval=5",
                                   "-o",
                                   "ServerAliveCountMax=3",
                                   "-o",
                                   "LogLevel=ERROR",
                                   "-o",
                                   "ControlPath=" + socket_.string()};
  if (spec_.port > 0) argv.insert(argv.end(), {"-p", std::to_string(spec_.port)});
  if (!spec_.identity_file.empty()) argv.insert(argv.end(), {"-i", spec_.identity_file});
  argv.insert(argv.end(), spec_.ssh_options.begin(), spec_.ssh_options.end());
  return argv;
}

std::unique_ptr<Host> Host::Connect(const HostSpec& spec, const std::filesystem::path& control_dir, std::chrono::seconds timeout) {
  if (spec.local()) return Local(spec);
  std::unique_ptr<Host> host(new Host(spec));
  std::error_code ec;
  std::filesystem::create_directories(control_dir, ec);
  host->socket_ = control_dir / (spec.name + ".sock");
  std::filesystem::remove(host->socket_, ec);
  const std::filesystem::path log = control_dir / (spec.name + "-ssh.log");
  std::filesystem::remove(log, ec);
  std::vector<std::string> master = host->SshBase();
  master.insert(master.end(), {"-M", "-N", "-o", "ControlMaster=yes", "-o", "ControlPersist=no", spec.ssh});
  host->master_ = std::make_unique<ManagedProcess>(master, std::map<std::string, std::string>{}, log);
  // Ready when the master answers on its socket; it exits at once when ssh cannot
  // connect or authenticate, and its log says why.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::vector<std::string> check = host->SshBase();
    check.insert(check.end(), {"-O", "check", spec.ssh});
    if (std::filesystem::exists(host->socket_) && RunCommand(check, std::chrono::seconds(10)).code == 0) break;
    if (!host->master_->running()) {
      std::string said = Trimmed(ReadText(log));
      if (said.empty()) said = "ssh " + (host->master_->End() ? host->master_->End()->Describe() : std::string("ended"));
      throw InputError(fmt::format("{}: cannot connect: {}", host->Describe(), said));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw InputError(fmt::format("{}: no SSH connection within {} s", host->Describe(), timeout.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  try {
    host->home_ = Trimmed(host->Check("reading $HOME", "printf '%s' \"$HOME\"", std::chrono::seconds(30)));
  } catch (const std::runtime_error& e) {
    throw InputError(e.what());
  }
  if (host->home_.empty() || host->home_.front() != '/') {
    throw InputError(fmt::format("{}: $HOME is '{}', not an absolute path", host->Describe(), host->home_));
  }
  return host;
}

Host::~Host() {
  if (master_) {
    std::vector<std::string> exit = SshBase();
    exit.insert(exit.end(), {"-O", "exit", spec_.ssh});
    try {
      RunCommand(exit, std::chrono::seconds(5));
    } catch (const std::exception&) {
    }
    master_->Terminate(std::chrono::milliseconds(2000));
    std::error_code ec;
    std::filesystem::remove(socket_, ec);
  }
}

std::string Host::Describe() const {
  return local() ? fmt::format("host {} (this machine)", name()) : fmt::format("host {} (ssh {})", name(), spec_.ssh);
}

std::vector<std::string> Host::Command(const std::string& script) const {
  if (local()) return {"/bin/sh", "-c", script};
  std::vector<std::string> argv = SshBase();
  // The remote login shell gets the script as one word list; `exec sh -c` makes it POSIX
  // sh whatever the account's shell is.
  argv.insert(argv.end(), {"-o", "ControlMaster=no", spec_.ssh, "--", "exec /bin/sh -c " + ShellQuote(script)});
  return argv;
}

CommandResult Host::Run(const std::string& script, std::chrono::milliseconds timeout, const std::filesystem::path& input) const {
  CommandResult r = RunCommand(Command(script), timeout, input);
  // ssh's own failure (the connection, not the script) is exit code 255.
  if (!local() && r.code == 255 && r.err.find("Connection") != std::string::npos) r.err = "the SSH connection failed: " + r.err;
  return r;
}

std::string Host::Check(const std::string& what, const std::string& script, std::chrono::milliseconds timeout,
                        const std::filesystem::path& input) const {
  const CommandResult r = Run(script, timeout, input);
  if (r.timed_out) throw std::runtime_error(fmt::format("{}: {}: no answer within {} s", Describe(), what, timeout.count() / 1000));
  if (r.code != 0) {
    const std::string how = r.signal != 0 ? "killed by " + DescribeSignal(r.signal) : fmt::format("exit code {}", r.code);
    throw std::runtime_error(fmt::format("{}: {} failed ({}): {}", Describe(), what, how, Trimmed(r.err.substr(0, 2000))));
  }
  return r.out;
}

}  // namespace tandem::harness
