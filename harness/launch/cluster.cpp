#include "harness/launch/cluster.hpp"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/input_error.hpp"
#include "common/sha256.hpp"
#include "harness/launch/shell.hpp"

namespace tandem::harness {

namespace {

using std::chrono::seconds;

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  const auto first = text.find_first_not_of(" \n");
  return first == std::string::npos ? "" : text.substr(first);
}

// A step of the preparation on a host: a failure is bad input (exit 2), naming the host.
std::string Step(const Host& host, const std::string& what, const std::string& script, seconds timeout,
                 const std::filesystem::path& input = {}) {
  try {
    return host.Check(what, script, timeout, input);
  } catch (const std::runtime_error& e) {
    throw InputError(e.what());
  }
}

bool Launched(const ResolvedArm& arm) { return arm.coordinator.launched() && arm.worker.launched(); }

// The control directories of earlier runs that were killed (SIGKILL gives a run no
// chance to remove its own): `tandem-ssh-<pid>` whose process is gone. Their masters
// died with the run; only dead sockets and ssh's logs are left.
void RemoveStaleControlDirs(const std::filesystem::path& parent) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    constexpr std::string_view kPrefix = "tandem-ssh-";
    if (!name.starts_with(kPrefix) || name.size() == kPrefix.size() || name.size() > kPrefix.size() + 9) continue;
    const std::string digits = name.substr(kPrefix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    const auto pid = static_cast<pid_t>(std::stol(digits));
    if (pid <= 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    std::filesystem::remove_all(entry.path(), ignored);
  }
}

// The hosts a role of an arm runs on in the campaign's layouts.
std::set<std::string> HostsOf(const Campaign& c, Role role) {
  std::set<std::string> out;
  for (const LayoutSpec& l : c.layouts) {
    if (role == Role::kCoordinator) {
      out.insert(l.coordinator_host);
    } else {
      for (int w = 0; w < l.workers; ++w) out.insert(WorkerHost(l, w));
      if (l.coordinator_ranks == 2) out.insert(PeerHost(l));
    }
  }
  return out;
}

// podman prints image IDs without the algorithm; docker with it.
std::string NormalisedImageId(const std::string& id) { return id.rfind("sha256:", 0) == 0 ? id : "sha256:" + id; }

// On the harness's own machine too, a campaign runs a content-addressed copy of each
// executable, taken when it starts: the file it was given (often a build directory's
// output) may be rebuilt while sessions run, and a session must run what was hashed.
PlacedImage PlaceLocalExecutable(const Host& host, const RoleImage& image, bool check_only, std::ostream& log) {
  PlacedImage p;
  p.host = host.name();
  p.id = image.id;
  const std::filesystem::path dir = std::filesystem::path(host.home()) / ".cache" / "tandem" / "images" / image.id;
  const std::filesystem::path copy = dir / image.executable.filename();
  p.executable = copy.string();
  std::error_code ec;
  const bool present = std::filesystem::exists(copy, ec) && FileSha256(copy) == image.id;
  if (present) return p;
  if (check_only) {
    log << fmt::format("{}: {} will be copied to {}\n", host.Describe(), image.executable.string(), p.executable);
    return p;
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  const std::filesystem::path partial = dir / fmt::format("{}.partial.{}", image.executable.filename().string(), ::getpid());
  std::filesystem::copy_file(image.executable, partial, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) throw InputError(fmt::format("cannot copy {} to {}: {}", image.executable.string(), partial.string(), ec.message()));
  const std::string copied = FileSha256(partial);
  if (copied != image.id) {
    std::filesystem::remove(partial, ec);
    throw InputError(
        fmt::format("{} changed while the campaign started (sha256 {} when hashed, {} when copied): wait for the build "
                    "that writes it to finish, then start again",
                    image.executable.string(), image.id.substr(0, 16), copied.substr(0, 16)));
  }
  std::filesystem::permissions(partial,
                               std::filesystem::perms::owner_all | std::filesystem::perms::group_read | std::filesystem::perms::group_exec |
                                   std::filesystem::perms::others_read | std::filesystem::perms::others_exec,
                               ec);
  std::filesystem::rename(partial, copy, ec);
  if (ec) throw InputError(fmt::format("cannot move {} to {}: {}", partial.string(), copy.string(), ec.message()));
  log << fmt::format("{}: {} (sha256 {}) copied to {}\n", host.Describe(), image.executable.string(), image.id.substr(0, 16), p.executable);
  return p;
}

// The content-addressed copy of a local executable on another host, verified there.
PlacedImage PlaceExecutable(const Host& host, const RoleImage& image, bool check_only, std::ostream& log) {
  if (host.local()) return PlaceLocalExecutable(host, image, check_only, log);
  PlacedImage p;
  p.host = host.name();
  const std::string dir = fmt::format("{}/.cache/tandem/images/{}", host.home(), image.id);
  p.executable = dir + "/" + image.executable.filename().string();
  const std::string file = ShellQuote(p.executable);
  const std::string sum = fmt::format("sha256sum {} | cut -d' ' -f1", file);
  std::string there =
      Trimmed(Step(host, "looking for " + p.executable, fmt::format("if [ -x {0} ]; then {1}; fi", file, sum), seconds(120)));
  if (there.empty() && check_only) {
    log << fmt::format("{}: {} will be copied to {}\n", host.Describe(), image.executable.string(), p.executable);
    p.id = image.id;
    return p;
  }
  if (there != image.id) {
    log << fmt::format("{}: copying {} (sha256 {}) to {}\n", host.Describe(), image.executable.string(), image.id.substr(0, 16),
                       p.executable);
    there = Trimmed(Step(host, "copying " + image.executable.filename().string(),
                         fmt::format("mkdir -p {0} && cat > {1}.partial.$$ && chmod 755 {1}.partial.$$ && mv -f {1}.partial.$$ {1} && {2}",
                                     ShellQuote(dir), file, sum),
                         seconds(600), image.executable));
  }
  if (there != image.id) {
    throw InputError(fmt::format("{}: the copy of {} has sha256 {} there, not {}", host.Describe(), image.executable.string(),
                                 there.empty() ? "(none)" : there, image.id));
  }
  p.id = there;
  // It must run there: a missing shared library shows now, not in the first session.
  Step(host, fmt::format("running {} --version", p.executable), fmt::format("{} --version", file), seconds(60));
  return p;
}

// A container image on a host: pulled as the arm says, its ID read there.
PlacedImage PlaceContainer(const Host& host, const RoleImage& image, bool check_only, std::ostream& log) {
  PlacedImage p;
  p.host = host.name();
  p.image = image.image;
  const std::string engine = ShellQuote(image.engine);
  const std::string name = ShellQuote(image.image);
  const std::string inspect = fmt::format("{} image inspect --format '{{{{.Id}}}}' {} 2>/dev/null", engine, name);
  auto read_id = [&] { return Trimmed(host.Run(inspect, seconds(120)).out); };
  Step(host, image.engine + " version", fmt::format("{} version >/dev/null", engine), seconds(60));
  std::string id = image.pull == "always" ? std::string() : read_id();
  if (id.empty() && image.pull != "never") {
    if (check_only) {
      log << fmt::format("{}: {} will be pulled ({} pull)\n", host.Describe(), image.image, image.engine);
      return p;
    }
    log << fmt::format("{}: {} pull {}\n", host.Describe(), image.engine, image.image);
    Step(host, fmt::format("{} pull {}", image.engine, image.image), fmt::format("{} pull {} >/dev/null", engine, name), seconds(3600));
    id = read_id();
  }
  if (id.empty()) {
    throw InputError(fmt::format("{}: {} has no image {}{}", host.Describe(), image.engine, image.image,
                                 image.pull == "never" ? " (pull: never; load or build it there first)" : " after pulling it"));
  }
  p.id = NormalisedImageId(id);
  return p;
}

}  // namespace

std::string_view ToString(Role role) { return role == Role::kCoordinator ? "coordinator" : "worker"; }

std::vector<std::string> HostsUsed(const Campaign& c) {
  std::vector<std::string> out = {"local"};
  auto add = [&](const std::string& h) {
    if (std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  };
  for (const LayoutSpec& l : c.layouts) {
    add(l.coordinator_host);
    for (int w = 0; w < l.workers; ++w) add(WorkerHost(l, w));
    if (l.coordinator_ranks == 2) add(PeerHost(l));
  }
  return out;
}

Cluster::~Cluster() {
  hosts_.clear();  // each master connection ends, its socket removed
  std::error_code ec;
  // What ssh said is in the messages that needed it; nothing of a campaign stays in /tmp.
  if (!control_dir_.empty()) std::filesystem::remove_all(control_dir_, ec);
}

namespace {

// What a copy of the model must hold: every file of it, by sha256 (as sha256sum prints them).
struct ModelManifest {
  std::vector<std::string> files;
  std::string sums;
};

ModelManifest ManifestOf(const std::filesystem::path& model) {
  ModelManifest m;
  if (!std::filesystem::exists(model / "config.json")) return m;
  for (const auto& entry : std::filesystem::directory_iterator(model)) {
    const std::string file = entry.path().filename().string();
    if (!entry.is_regular_file() || file.front() == '.') continue;  // .tandem-revision.json is a cache
    m.files.push_back(file);
  }
  std::sort(m.files.begin(), m.files.end());
  for (const std::string& f : m.files) m.sums += FileSha256(model / f) + "  " + f + "\n";
  return m;
}

// A path model must already be on the host.
void RequireModelPath(const Host& host, const std::filesystem::path& path) {
  const std::string present = fmt::format("test -f {}/config.json && echo yes", ShellQuote(path.string()));
  if (Trimmed(host.Run(present, seconds(60)).out) != "yes") {
    throw InputError(
        fmt::format("{}: the model directory {} is not there (no config.json); copy the checkpoint to the same path on every host",
                    host.Describe(), path.string()));
  }
}

// The preset as one tar file under `dir`, for the hosts that need a copy.
std::string PackModel(const std::filesystem::path& model, const ModelManifest& manifest, const std::filesystem::path& dir) {
  const std::string archive = (dir / "model.tar").string();
  std::vector<std::string> tar = {"tar", "-C", model.string(), "-cf", archive};
  tar.insert(tar.end(), manifest.files.begin(), manifest.files.end());
  const CommandResult r = RunCommand(tar, seconds(600));
  if (r.code != 0) throw InputError(fmt::format("cannot pack the model {} for the other hosts: {}", model.string(), r.err));
  return archive;
}

// Unpacks beside `dir` and moves into place only once every file's sha256 matches.
void CopyModel(const Host& host, const std::string& archive, const std::string& dir, const ModelManifest& manifest) {
  const std::string copied = Step(host, "copying the model",
                                  fmt::format("rm -rf {0}.partial && mkdir -p {0}.partial && tar -C {0}.partial -xf - && cd {0}.partial "
                                              "&& sha256sum {1} && rm -rf {0} && mv {0}.partial {0}",
                                              ShellQuote(dir), ShellJoin(manifest.files)),
                                  seconds(1800), archive);
  if (copied != manifest.sums) {
    throw InputError(fmt::format("{}: the model copied to {} does not match the harness's: {}", host.Describe(), dir, copied));
  }
}

}  // namespace

std::unique_ptr<Cluster> Cluster::Prepare(const Campaign& c, std::vector<ResolvedArm>& arms, const std::filesystem::path& model,
                                          const std::string& model_revision, bool check_only, std::ostream& log) {
  std::unique_ptr<Cluster> cluster(new Cluster());
  // A short path: a control socket's path must fit in 108 bytes.
  cluster->control_dir_ = std::filesystem::path("/tmp") / fmt::format("tandem-ssh-{}", ::getpid());
  RemoveStaleControlDirs(cluster->control_dir_.parent_path());
  for (const std::string& name : HostsUsed(c)) {
    const HostSpec& spec = c.Host(name);
    if (!spec.local()) log << fmt::format("connecting to host {} (ssh {})...\n", name, spec.ssh);
    cluster->hosts_[name] = Host::Connect(spec, cluster->control_dir_, seconds(30));
  }
  cluster->PlaceImages(c, arms, check_only, log);
  cluster->PlaceModel(c, model, model_revision, check_only, log);
  return cluster;
}

void Cluster::PlaceImages(const Campaign& c, std::vector<ResolvedArm>& arms, bool check_only, std::ostream& log) {
  for (ResolvedArm& arm : arms) {
    if (!Launched(arm) || !arm.built) continue;
    for (const Role role : {Role::kCoordinator, Role::kWorker}) PlaceImages(c, arm, role, check_only, log);
  }
}

void Cluster::PlaceImages(const Campaign& c, ResolvedArm& arm, Role role, bool check_only, std::ostream& log) {
  RoleImage& image = role == Role::kCoordinator ? arm.coordinator : arm.worker;
  std::map<std::string, std::vector<std::string>> hosts_by_id;
  for (const std::string& name : HostsOf(c, role)) {
    const Host& host = *hosts_.at(name);
    PlacedImage p = image.container() ? PlaceContainer(host, image, check_only, log) : PlaceExecutable(host, image, check_only, log);
    p.arm = arm.spec.label;
    p.role = role;
    if (!p.id.empty()) hosts_by_id[p.id].push_back(name);
    images_.push_back(std::move(p));
  }
  if (hosts_by_id.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [id, hosts] : hosts_by_id) parts.push_back(fmt::format("{} on {}", id, fmt::join(hosts, ", ")));
    throw InputError(fmt::format("arm '{}': the {} image {} differs between hosts: {}; every host must run the same image", arm.spec.label,
                                 ToString(role), image.image, fmt::join(parts, "; ")));
  }
  if (image.container() && !hosts_by_id.empty()) image.id = hosts_by_id.begin()->first;
}

// A path must be on every host already; a preset (synthetic, or the small trained one) is
// copied from the harness's machine, named by its revision and verified file by file.
void Cluster::PlaceModel(const Campaign& c, const std::filesystem::path& model, const std::string& model_revision, bool check_only,
                         std::ostream& log) {
  // A trained preset is one checkpoint; a synthetic one is named by its seed too.
  const bool trained = !c.model.trained.empty();
  const std::string preset =
      trained ? fmt::format("{} preset", c.model.preset) : fmt::format("{} preset, seed {}", c.model.preset, c.model.seed);
  const std::string stem = trained ? c.model.preset : fmt::format("{}-seed{}", c.model.preset, c.model.seed);
  std::optional<ModelManifest> manifest;  // read once, for the first host that needs a preset
  std::string archive;                    // packed once, for the first host that needs a copy
  for (const auto& [name, host] : hosts_) {
    if (host->local()) {
      model_dirs_[name] = model.string();
      continue;
    }
    if (!c.model.path.empty()) {
      model_dirs_[name] = c.model.path.string();
      RequireModelPath(*host, c.model.path);
      continue;
    }
    const std::string dir = fmt::format("{}/.cache/tandem/models/{}-{}", host->home(), stem,
                                        model_revision.empty() ? "unwritten" : model_revision.substr(0, 16));
    model_dirs_[name] = dir;
    if (!manifest) manifest = ManifestOf(model);
    const std::string verify = fmt::format("cd {} && sha256sum {}", ShellQuote(dir), ShellJoin(manifest->files));
    if (!manifest->files.empty() && host->Run(verify, seconds(300)).out == manifest->sums) continue;
    if (check_only || manifest->files.empty()) {
      log << fmt::format("{}: the model ({}) will be copied to {}\n", host->Describe(), preset, dir);
      continue;
    }
    if (archive.empty()) archive = PackModel(model, *manifest, control_dir_);
    log << fmt::format("{}: copying the model ({}) to {}\n", host->Describe(), preset, dir);
    CopyModel(*host, archive, dir, *manifest);
  }
  if (!archive.empty()) {
    std::error_code ec;
    std::filesystem::remove(archive, ec);
  }
}

const Host& Cluster::host(const std::string& name) const {
  const auto it = hosts_.find(name);
  if (it == hosts_.end()) throw std::out_of_range("no connected host " + name);
  return *it->second;
}

const std::string& Cluster::model_dir(const std::string& host) const { return model_dirs_.at(host); }

const PlacedImage& Cluster::image(const std::string& arm, Role role, const std::string& host) const {
  for (const PlacedImage& p : images_) {
    if (p.arm == arm && p.role == role && p.host == host) return p;
  }
  throw std::out_of_range(fmt::format("arm {}: no {} image placed on host {}", arm, ToString(role), host));
}

std::vector<const Host*> Cluster::hosts() const {
  std::vector<const Host*> out = {hosts_.at("local").get()};
  for (const auto& [name, host] : hosts_) {
    if (name != "local") out.push_back(host.get());
  }
  return out;
}

}  // namespace tandem::harness
