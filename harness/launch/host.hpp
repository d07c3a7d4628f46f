#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "harness/campaign/campaign.hpp"
#include "harness/launch/managed_process.hpp"

namespace tandem::harness {

// A machine a campaign runs processes on: the harness's own ("local": commands run through
// /bin/sh here), or one reached with OpenSSH through one master connection for the whole
// campaign (ControlMaster; the master dies with the harness). Every command has a timeout,
// and an SSH connection that drops ends the commands on it (keep-alives every 5 s) instead
// of hanging them. Scripts are POSIX sh; a remote host needs sh, coreutils, util-linux
// (setsid, taskset) and /proc, which every Linux distribution has.
class Host {
 public:
  static std::unique_ptr<Host> Local(const HostSpec& spec);
  // Opens the master connection (its socket in `control_dir`, a short path), checks that
  // the host runs commands, and reads its $HOME. Throws InputError "host NAME (ssh DEST):
  // REASON", with what ssh said.
  static std::unique_ptr<Host> Connect(const HostSpec& spec, const std::filesystem::path& control_dir, std::chrono::seconds timeout);
  ~Host();  // closes the master connection
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  const HostSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  bool local() const { return spec_.local(); }
  // Where processes on this host are reached (workers listen there).
  const std::string& address() const { return spec_.address; }
  // $HOME there: images are cached under $HOME/.cache/tandem.
  const std::string& home() const { return home_; }
  // "host dodo (ssh root@10.0.0.3)", for messages.
  std::string Describe() const;

  // Runs `script` with sh on the host, stdin from `input` (a local file) or nothing.
  CommandResult Run(const std::string& script, std::chrono::milliseconds timeout, const std::filesystem::path& input = {}) const;
  // Run, returning stdout; throws std::runtime_error naming the host, `what`, the exit code
  // and stderr unless the script exits 0.
  std::string Check(const std::string& what, const std::string& script, std::chrono::milliseconds timeout,
                    const std::filesystem::path& input = {}) const;
  // The argv that runs `script` on the host from the harness's machine, for a process that
  // outlives one call (a session's worker).
  std::vector<std::string> Command(const std::string& script) const;

 private:
  explicit Host(HostSpec spec) : spec_(std::move(spec)) {}
  std::vector<std::string> SshBase() const;

  HostSpec spec_;
  std::string home_;
  std::filesystem::path socket_;
  std::unique_ptr<ManagedProcess> master_;
};

}  // namespace tandem::harness
