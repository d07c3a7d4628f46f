#pragma once

#include <filesystem>
#include <string>

#include "harness/campaign/campaign.hpp"

namespace tandem::harness {

// An arm made concrete: the executables it runs (built first for a git source), its
// runtime revision and the identity of its images.
struct ResolvedArm {
  ArmSpec spec;
  std::filesystem::path coordinator;  // binary / git
  std::filesystem::path worker;
  std::string revision;           // git commit (+ "-dirty"), or what the binary says, or declared
  std::string coordinator_image;  // sha256 of the executable; empty when none
  std::string worker_image;
  bool built = true;  // false: a git arm not built yet (dry run)

  std::string LaunchJson() const;  // how it is launched, for the store
};

struct ResolveOptions {
  bool build = true;                  // false (dry run): resolve revisions, build nothing
  std::filesystem::path build_cache;  // where git arms are checked out and built
  std::chrono::seconds build_timeout{3600};
};

// Throws InputError naming the arm: a missing executable, an unknown git ref, a
// failing build (with the end of its log).
ResolvedArm ResolveArm(const ArmSpec& arm, const ResolveOptions& options);

}  // namespace tandem::harness
