#include "harness/launch/arm.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"
#include "common/redact.hpp"
#include "common/sha256.hpp"
#include "harness/launch/managed_process.hpp"

namespace tandem::harness {

namespace {

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Tail(const std::filesystem::path& log, int lines) {
  const std::string text = ReadFile(log);
  std::size_t pos = text.size();
  for (int i = 0; i <= lines && pos > 0; ++i) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return text.substr(pos + 1);
}

// Runs a command and returns its trimmed stdout (through a temporary log).
std::string Capture(const std::vector<std::string>& argv, const std::filesystem::path& scratch, int* code) {
  const auto log = scratch / fmt::format("capture-{}.log", ::getpid());
  std::filesystem::remove(log);
  *code = RunToCompletion(argv, log, std::chrono::seconds(60));
  std::string out = ReadFile(log);
  std::filesystem::remove(log);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// What a binary says its revision is: `tandem-rt --version` prints it.
std::string BinaryRevision(const std::filesystem::path& exe, const std::filesystem::path& scratch) {
  int code = 0;
  const std::string out = Capture({exe.string(), "--version"}, scratch, &code);
  if (code != 0 || out.empty() || out.size() > 80) return "";
  return out.substr(out.rfind(' ') + 1);
}

}  // namespace

std::string ResolvedArm::LaunchJson() const {
  // Secrets (common/redact.hpp) are replaced: this is stored, and the report prints it.
  nlohmann::json j = {{"kind", std::string(ToString(spec.kind))},
                      {"coordinator", coordinator.executable.string()},
                      {"worker", worker.executable.string()},
                      {"repository", spec.repository},
                      {"ref", spec.ref},
                      {"cmake_flags", RedactArgs(spec.cmake_flags)},
                      {"command", RedactShellCommand(spec.coordinator_command)},
                      {"worker_command", RedactShellCommand(spec.worker_command)},
                      {"base_url", spec.base_url},
                      {"options", RedactArgs(coordinator.options)},
                      {"worker_options", RedactArgs(worker.options)},
                      {"env", RedactEnv(coordinator.env)}};
  if (!spec.api_key_env.empty()) j["api_key_env"] = spec.api_key_env;  // the variable's name, never its value
  if (coordinator.container() || worker.container()) {
    j["engine"] = coordinator.container() ? coordinator.engine : worker.engine;
    j["coordinator_image"] = coordinator.image;
    j["worker_image"] = worker.image;
    j["run_args"] = RedactArgs(coordinator.container() ? coordinator.run_args : worker.run_args);
    j["pull"] = coordinator.container() ? coordinator.pull : worker.pull;
  }
  if (spec.kind == ArmKind::kMixed) {
    j["coordinator_from"] = spec.coordinator_from;
    j["worker_from"] = spec.worker_from;
    if (worker.env != coordinator.env) j["worker_env"] = RedactEnv(worker.env);
  }
  return j.dump();
}

std::string ReadApiKey(const ArmSpec& arm) {
  if (arm.api_key_env.empty()) return "";
  const char* value = std::getenv(arm.api_key_env.c_str());
  if (value == nullptr || *value == '\0') {
    throw InputError(
        fmt::format("arm '{}': api_key_env: the environment variable {} is {}; export it with the API key of the arm's server (the harness "
                    "sends it as 'Authorization: Bearer KEY')",
                    arm.label, arm.api_key_env, value == nullptr ? "not set" : "empty"));
  }
  return value;
}

namespace {

// Runs one step of a git arm's checkout or build into `log`; a failure names the step and shows the log's end.
class BuildStep {
 public:
  BuildStep(const ArmSpec& arm, const std::string& commit, std::filesystem::path log, std::chrono::seconds timeout)
      : arm_(arm), commit_(commit), log_(std::move(log)), timeout_(timeout) {}

  void operator()(const std::vector<std::string>& argv, const char* what) const {
    if (RunToCompletion(argv, log_, timeout_) != 0) {
      throw InputError(fmt::format("arm '{}': {} failed for {} at {}; the end of {}:\n{}", arm_.label, what, arm_.repository,
                                   commit_.substr(0, 12), log_.string(), Tail(log_, 20)));
    }
  }

 private:
  const ArmSpec& arm_;
  const std::string& commit_;
  std::filesystem::path log_;
  std::chrono::seconds timeout_;
};

// A local repository lends a worktree (no copy of its objects); a URL is cloned.
void CheckOut(const ArmSpec& arm, const std::string& commit, const std::filesystem::path& source, const BuildStep& step) {
  if (std::filesystem::exists(source / "CMakeLists.txt")) return;
  std::error_code ec;
  std::filesystem::remove_all(source, ec);
  if (arm.repository.find("://") == std::string::npos) {
    step({"git", "-C", arm.repository, "worktree", "prune"}, "git worktree prune");
    step({"git", "-C", arm.repository, "worktree", "add", "--detach", source.string(), commit}, "git worktree add");
  } else {
    step({"git", "clone", "--no-checkout", arm.repository, source.string()}, "git clone");
    step({"git", "-C", source.string(), "checkout", "--detach", commit}, "git checkout");
  }
}

void Build(const ArmSpec& arm, const std::filesystem::path& source, const std::filesystem::path& build, const BuildStep& step) {
  std::vector<std::string> configure = {"cmake",
                                        "-S",
                                        source.string(),
                                        "-B",
                                        build.string(),
                                        "-G",
                                        "Ninja",
                                        "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                                        "-DTANDEM_TESTS=OFF",
                                        "-DTANDEM_BENCH=OFF"};
  configure.insert(configure.end(), arm.cmake_flags.begin(), arm.cmake_flags.end());
  step(configure, "cmake configure");
  step({"cmake", "--build", build.string(), "--target", "tandem-rt"}, "the build");
}

// git: resolve the ref, check the commit out into the cache and build it there (once per commit and flags).
void ResolveGitArm(const ArmSpec& arm, const ResolveOptions& options, ResolvedArm& r) {
  const std::filesystem::path scratch = options.build_cache;
  int code = 0;
  const std::string commit = Capture({"git", "-C", arm.repository, "rev-parse", "--verify", arm.ref + "^{commit}"}, scratch, &code);
  if (code != 0 || commit.size() != 40) {
    throw InputError(fmt::format("arm '{}': git cannot resolve ref '{}' in {}: {}", arm.label, arm.ref, arm.repository, commit));
  }
  r.revision = commit;
  std::string flags_key;
  for (const std::string& f : arm.cmake_flags) flags_key += f + '\n';
  const std::string tag = fmt::format("{}-{}", commit.substr(0, 12), Sha256Hex(flags_key).substr(0, 16));
  const std::filesystem::path source = options.build_cache / ("src-" + commit.substr(0, 12));
  const std::filesystem::path build = options.build_cache / ("build-" + tag);
  r.coordinator.executable = r.worker.executable = build / "bin" / "tandem-rt";
  if (!std::filesystem::exists(r.coordinator.executable)) {
    if (!options.build) {
      r.built = false;
      return;
    }
    const std::filesystem::path log = options.build_cache / ("build-" + tag + ".log");
    std::error_code ec;
    std::filesystem::remove(log, ec);
    const BuildStep step(arm, commit, log, options.build_timeout);
    CheckOut(arm, commit, source, step);
    Build(arm, source, build, step);
    if (!std::filesystem::exists(r.coordinator.executable)) {
      throw InputError(
          fmt::format("arm '{}': the build of {} produced no {}", arm.label, commit.substr(0, 12), r.coordinator.executable.string()));
    }
  }
  r.coordinator.id = r.worker.id = FileSha256(r.coordinator.executable);
}

std::string DeclaredOrUnknown(const ArmSpec& arm) { return arm.declared_revision.empty() ? "unknown" : arm.declared_revision; }

}  // namespace

ResolvedArm ResolveArm(const ArmSpec& arm, const ResolveOptions& options) {
  ResolvedArm r;
  r.spec = arm;
  r.api_key = ReadApiKey(arm);
  r.coordinator.options = arm.options;
  r.worker.options = arm.worker_options;
  r.coordinator.env = r.worker.env = arm.env;
  std::error_code ec;
  std::filesystem::create_directories(options.build_cache, ec);
  switch (arm.kind) {
    case ArmKind::kBinary:
      r.coordinator.executable = arm.coordinator;
      r.worker.executable = arm.worker;
      r.coordinator.id = FileSha256(r.coordinator.executable);
      r.worker.id = FileSha256(r.worker.executable);
      r.revision = !arm.declared_revision.empty() ? arm.declared_revision : BinaryRevision(r.coordinator.executable, options.build_cache);
      if (r.revision.empty()) r.revision = "unknown";
      return r;
    case ArmKind::kContainer:
      for (RoleImage* role : {&r.coordinator, &r.worker}) {
        role->engine = arm.engine;
        role->run_args = arm.run_args;
        role->pull = arm.pull;
      }
      r.coordinator.image = arm.coordinator_image;
      r.worker.image = arm.worker_image;
      // The image ids are read on every host that runs them (launch/host_images).
      r.revision = DeclaredOrUnknown(arm);
      return r;
    case ArmKind::kCommand:
    case ArmKind::kExternal:
      r.revision = DeclaredOrUnknown(arm);
      return r;
    case ArmKind::kMixed:
      throw InputError(fmt::format("arm '{}' is mixed: compose it from its sides", arm.label));
    case ArmKind::kGit:
      ResolveGitArm(arm, options, r);
      return r;
  }
  return r;
}

ResolvedArm ComposeMixedArm(const ArmSpec& mixed, const ResolvedArm& coordinator_side, const ResolvedArm& worker_side) {
  ResolvedArm r;
  r.spec = mixed;
  r.coordinator = coordinator_side.coordinator;
  r.worker = worker_side.worker;
  if (!mixed.options.empty()) r.coordinator.options = mixed.options;
  if (!mixed.worker_options.empty()) r.worker.options = mixed.worker_options;
  if (!mixed.env.empty()) r.coordinator.env = r.worker.env = mixed.env;
  if (mixed.api_key_env.empty()) {
    r.spec.api_key_env = coordinator_side.spec.api_key_env;
    r.api_key = coordinator_side.api_key;
  } else {
    r.api_key = ReadApiKey(mixed);
  }
  r.built = coordinator_side.built && worker_side.built;
  r.revision = !mixed.declared_revision.empty()
                   ? mixed.declared_revision
                   : fmt::format("coordinator {} + workers {}", coordinator_side.revision, worker_side.revision);
  return r;
}

}  // namespace tandem::harness
