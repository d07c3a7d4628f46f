#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "harness/campaign/campaign.hpp"

namespace tandem::harness {

// What one role of an arm (its coordinator, or its workers) runs: an executable, or a
// container image, with the role's own arguments and environment.
struct RoleImage {
  std::filesystem::path executable;   // binary and git arms: on the harness's machine
  std::string engine;                 // container: docker | podman
  std::string image;                  // container: the image as named (ds/coord:v13)
  std::vector<std::string> run_args;  // container: extra `engine run` arguments
  std::string pull = "never";         // container: never | missing | always
  // sha256 of the executable, or the container image's ID as every host reads it
  // (sha256:…; filled once the hosts agree); empty for command and external arms.
  std::string id;
  std::vector<std::string> options;  // extra arguments of this role's command
  std::map<std::string, std::string> env;

  bool container() const { return !engine.empty(); }
  bool launched() const { return container() || !executable.empty(); }  // by Tandem, on some host
};

// An arm made concrete: what each role runs (built first for a git source), its runtime
// revision and the identity of its images.
struct ResolvedArm {
  ArmSpec spec;
  RoleImage coordinator;
  RoleImage worker;
  std::string revision;  // git commit (+ "-dirty"), or what the binary says, or declared
  bool built = true;     // false: a git arm not built yet (dry run)
  std::string api_key;   // from the environment variable spec.api_key_env; never stored or printed

  std::string LaunchJson() const;  // how it is launched, for the store
};

struct ResolveOptions {
  bool build = true;                  // false (dry run): resolve revisions, build nothing
  std::filesystem::path build_cache;  // where git arms are checked out and built
  std::chrono::seconds build_timeout{3600};
};

// The API key an arm's server wants, read from the environment variable its
// `api_key_env` names ("" without one). Throws InputError naming the arm and the variable
// when it is not set or empty.
std::string ReadApiKey(const ArmSpec& arm);

// Throws InputError naming the arm: a missing executable, an unknown git ref, a
// failing build (with the end of its log), an API key variable that is not set. Not for
// mixed arms (ComposeMixedArm).
ResolvedArm ResolveArm(const ArmSpec& arm, const ResolveOptions& options);

// A mixed arm from its two resolved sides: the coordinator of one, the workers of the
// other (options and environment from the mixed arm when it gives them, else each side's;
// the API key the mixed arm's, else the coordinator side's, whose server it is).
ResolvedArm ComposeMixedArm(const ArmSpec& mixed, const ResolvedArm& coordinator_side, const ResolvedArm& worker_side);

}  // namespace tandem::harness
