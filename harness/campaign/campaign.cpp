#include "harness/campaign/campaign.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "common/input_error.hpp"
#include "common/sha256.hpp"
#include "harness/campaign/corpus.hpp"
#include "harness/campaign/cpu_list.hpp"
#include "harness/campaign/model_preset.hpp"
#include "harness/campaign/yaml_reader.hpp"

namespace tandem::harness {

namespace {

using yaml::At;
using yaml::Map;
using yaml::OneOf;

std::filesystem::path Resolve(const std::filesystem::path& base, const std::string& path) {
  const std::filesystem::path p(path);
  return p.is_absolute() ? p : (base / p).lexically_normal();
}

// A word: letters, digits, '-', '_', '.' (names appear in file names and commands).
bool IsWord(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; });
}

// A shell variable name: letters, digits and '_', not starting with a digit.
bool IsEnvName(const std::string& s) {
  return !s.empty() && !std::isdigit(static_cast<unsigned char>(s.front())) &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// An arm's `source`: where its images come from, with the keys each kind uses.
void ReadSource(const At& source, const std::filesystem::path& base, ArmSpec& arm) {
  const Map src(source, {"kind", "coordinator", "worker", "repository", "ref", "cmake_flags", "command", "worker_command", "base_url",
                         "engine", "coordinator_image", "worker_image", "run_args", "pull"});
  const std::string kind = OneOf(src.Get("kind"), {"binary", "git", "command", "external", "container"});
  auto refuse = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys) {
      if (src.Has(k)) throw src.Get(k).Error(fmt::format("is not used by a '{}' source", kind));
    }
    if (kind != "container") {
      for (const char* k : {"engine", "coordinator_image", "worker_image", "run_args", "pull"}) {
        if (src.Has(k)) throw src.Get(k).Error(fmt::format("is not used by a '{}' source", kind));
      }
    }
  };
  if (kind == "binary") {
    arm.kind = ArmKind::kBinary;
    refuse({"repository", "ref", "cmake_flags", "command", "worker_command", "base_url"});
    arm.coordinator = Resolve(base, src.Get("coordinator").String());
    arm.worker = src.Has("worker") ? Resolve(base, src.Get("worker").String()) : arm.coordinator;
    for (const auto& [key, path] : {std::pair{"coordinator", arm.coordinator}, std::pair{"worker", arm.worker}}) {
      if (std::error_code ec; !std::filesystem::is_regular_file(path, ec)) {
        throw(src.Has(key) ? src.Get(key) : src.Get("coordinator"))
            .Error(fmt::format("{} does not exist (build it first?)", path.string()));
      }
    }
  } else if (kind == "git") {
    arm.kind = ArmKind::kGit;
    refuse({"coordinator", "worker", "command", "worker_command", "base_url"});
    arm.repository = src.Get("repository").String();
    if (arm.repository.find("://") == std::string::npos) arm.repository = Resolve(base, arm.repository).string();
    arm.ref = src.Get("ref").String();
    arm.cmake_flags = src.StringList("cmake_flags");
  } else if (kind == "command") {
    arm.kind = ArmKind::kCommand;
    refuse({"coordinator", "worker", "repository", "ref", "cmake_flags", "base_url"});
    arm.coordinator_command = src.Get("command").String();
    if (arm.coordinator_command.find("{port}") == std::string::npos) {
      throw src.Get("command").Error("must contain {port}: the harness picks the port");
    }
    arm.worker_command = src.String("worker_command", "");
  } else if (kind == "container") {
    arm.kind = ArmKind::kContainer;
    refuse({"coordinator", "worker", "repository", "ref", "cmake_flags", "command", "worker_command", "base_url"});
    arm.engine = OneOf(src.Get("engine"), {"docker", "podman"});
    arm.coordinator_image = src.Get("coordinator_image").String();
    arm.worker_image = src.String("worker_image", arm.coordinator_image);
    for (const char* key : {"coordinator_image", "worker_image"}) {
      if (!src.Has(key)) continue;
      const std::string image = src.Get(key).String();
      if (image.empty() || image.front() == '-' || image.find_first_of(" \t\n'\"") != std::string::npos) {
        throw src.Get(key).Error(fmt::format("'{}' is not an image name", image));
      }
    }
    arm.run_args = src.StringList("run_args");
    if (src.Has("pull")) arm.pull = OneOf(src.Get("pull"), {"never", "missing", "always"});
  } else {
    arm.kind = ArmKind::kExternal;
    refuse({"coordinator", "worker", "repository", "ref", "cmake_flags", "command", "worker_command"});
    arm.base_url = src.Get("base_url").String();
    if (arm.base_url.rfind("http://", 0) != 0) throw src.Get("base_url").Error("must start with http://");
  }
}

// An arm's `env`: NAME: value pairs exported to its processes.
void ReadEnv(const At& env, ArmSpec& arm) {
  if (!env.node().IsMap()) throw env.Error("must be a mapping NAME: value");
  for (const auto& kv : env.node()) {
    const std::string name = kv.first.Scalar();
    // A name goes into a shell's `export` on other hosts: only what a shell variable can be.
    if (!IsEnvName(name)) {
      throw env.Child(kv.first, name).Error("is not an environment variable name (letters, digits and _, not starting with a digit)");
    }
    if (name == "TANDEM_WORKER_TOKEN") {
      throw env.Child(kv.first, name).Error("is set by the harness, a fresh token for every session: leave it out");
    }
    arm.env[name] = env.Child(kv.second, name).String();
  }
}

ArmSpec ParseArm(const At& at, const std::filesystem::path& base) {
  const Map m(at, {"label", "source", "options", "worker_options", "env", "revision", "coordinator_from", "worker_from", "api_key_env"});
  ArmSpec arm;
  arm.label = m.Get("label").String();
  if (arm.label.empty() || arm.label.find_first_of(" \t,") != std::string::npos) throw m.Get("label").Error("must be a word");
  if (m.Has("coordinator_from") || m.Has("worker_from")) {
    // A mixed pair: the sides are checked once every arm is known.
    if (m.Has("source"))
      throw m.Get("source").Error("a mixed arm (coordinator_from / worker_from) takes its images from those arms, not a source");
    arm.kind = ArmKind::kMixed;
    arm.coordinator_from = m.Get("coordinator_from").String();
    arm.worker_from = m.Get("worker_from").String();
  }
  if (arm.kind != ArmKind::kMixed) ReadSource(m.Get("source"), base, arm);
  arm.options = m.StringList("options");
  arm.worker_options = m.StringList("worker_options");
  if (m.Has("env")) ReadEnv(m.Get("env"), arm);
  arm.declared_revision = m.String("revision", "");
  if (m.Has("api_key_env")) {
    arm.api_key_env = m.Get("api_key_env").String();
    if (!IsEnvName(arm.api_key_env)) {
      throw m.Get("api_key_env").Error(fmt::format("'{}' is not an environment variable name (letters, digits and _)", arm.api_key_env));
    }
  }
  return arm;
}

HostSpec ParseHost(const At& at) {
  const Map m(at, {"name", "ssh", "port", "identity_file", "ssh_options", "address"});
  HostSpec h;
  h.name = m.Get("name").String();
  if (!IsWord(h.name)) throw m.Get("name").Error("must be a word (letters, digits, -, _, .)");
  if (h.name == "local") throw m.Get("name").Error("'local' is the harness's own machine; name this host otherwise");
  h.ssh = m.Get("ssh").String();
  if (h.ssh.empty() || h.ssh.front() == '-' || h.ssh.find_first_of(" \t\n'\"") != std::string::npos) {
    throw m.Get("ssh").Error(fmt::format("'{}' is not user@host, host, or local", h.ssh));
  }
  h.port = m.Number<int>("port", 0, 1, 65535);
  if (m.Has("identity_file")) {
    h.identity_file = m.Get("identity_file").String();
    if (h.identity_file.rfind("~/", 0) == 0) {
      const char* home = std::getenv("HOME");
      h.identity_file = std::string(home != nullptr ? home : "") + h.identity_file.substr(1);
    }
  }
  h.ssh_options = m.StringList("ssh_options");
  const std::string ssh_host = h.ssh.substr(h.ssh.find('@') + 1);
  h.address = m.String("address", h.local() ? "127.0.0.1" : ssh_host);
  if (h.address.empty() || h.address.find_first_of(" \t\n/'\"") != std::string::npos) {
    throw m.Get("address").Error(fmt::format("'{}' is not a host name or IP address", h.address));
  }
  return h;
}

LayoutSpec ParseLayout(const At& at, const std::vector<HostSpec>& hosts) {
  const Map m(at, {"name", "workers", "expert_parallel", "local_expert_layers", "coordinator_ranks", "wire_dtype", "partial_dtype",
                   "coordinator_threads", "worker_threads", "emulated_rtt_us", "options", "coordinator_cpus", "worker_cpus",
                   "coordinator_host", "worker_hosts", "peer_host"});
  LayoutSpec l;
  l.name = m.Get("name").String();
  l.workers = m.Number<int>("workers", 0, 0, 64);
  auto host = [&](const At& name) {
    const std::string h = name.String();
    if (std::none_of(hosts.begin(), hosts.end(), [&](const HostSpec& k) { return k.name == h; })) {
      std::vector<std::string> names;
      for (const HostSpec& k : hosts) names.push_back(k.name);
      throw name.Error(fmt::format("'{}' is not a host of the campaign ({})", h, fmt::join(names, ", ")));
    }
    return h;
  };
  if (m.Has("coordinator_host")) l.coordinator_host = host(m.Get("coordinator_host"));
  if (m.Has("worker_hosts")) {
    const At list = m.Get("worker_hosts");
    if (!list.node().IsSequence() || list.node().size() == 0) throw list.Error("must be a non-empty list of host names, one per worker");
    for (std::size_t i = 0; i < list.node().size(); ++i) l.worker_hosts.push_back(host(list.Item(list.node()[i], i)));
    if (m.Has("workers") && l.workers != static_cast<int>(l.worker_hosts.size())) {
      throw m.Get("workers").Error(fmt::format("is {}, but worker_hosts names {} workers", l.workers, l.worker_hosts.size()));
    }
    if (l.worker_hosts.size() > 64) throw list.Error("names more than 64 workers");
    l.workers = static_cast<int>(l.worker_hosts.size());
  }
  if (m.Has("expert_parallel")) l.expert_parallel = OneOf(m.Get("expert_parallel"), {"tp", "ep"});
  l.local_expert_layers = m.Number<int>("local_expert_layers", 0, 0, 1 << 20);
  l.coordinator_ranks = m.Number<int>("coordinator_ranks", 1, 1, 2);
  if (m.Has("peer_host")) {
    if (l.coordinator_ranks != 2) throw m.Get("peer_host").Error("is only used with coordinator_ranks: 2");
    l.peer_host = host(m.Get("peer_host"));
  }
  if (m.Has("wire_dtype")) l.wire_dtype = OneOf(m.Get("wire_dtype"), {"bf16", "fp8"});
  if (m.Has("partial_dtype")) l.partial_dtype = OneOf(m.Get("partial_dtype"), {"f64", "f32", "bf16"});
  l.coordinator_threads = m.Number<int>("coordinator_threads", 0, 0, 1024);
  l.worker_threads = m.Number<int>("worker_threads", 1, 1, 1024);
  l.emulated_rtt_us = m.Number<int>("emulated_rtt_us", 0, 0, 1000000);
  if (l.emulated_rtt_us > 0 && l.workers == 0) throw m.Get("emulated_rtt_us").Error("needs expert workers (workers > 0)");
  l.options = m.StringList("options");
  l.coordinator_cpus = m.String("coordinator_cpus", "");
  l.worker_cpus = m.String("worker_cpus", "");
  for (const char* key : {"coordinator_cpus", "worker_cpus"}) {
    if (!m.Has(key)) continue;
    try {
      ParseCpuList(m.Get(key).String());
    } catch (const InputError& e) {
      throw m.Get(key).Error(e.what());
    }
  }
  return l;
}

// Where a flag of tandem-rt that the harness passes comes from, for a layout: the key
// that sets it, or "" when the harness sets it for every session; nullopt when the
// harness does not pass it (the arm's options may). A flag passed twice makes tandem-rt
// exit at once ("At Most 1 required but received 2").
std::optional<std::string> HarnessFlagSource(const std::string& flag, const LayoutSpec& l, bool worker) {
  const bool hybrid = l.workers > 0 || l.coordinator_ranks == 2;
  if (worker) {
    if (flag == "--listen" || flag == "--model" || flag == "--role") return "";
    if (flag == "--threads") return "worker_threads";
    if (flag == "--emulated-rtt-us" && l.emulated_rtt_us > 0) return "emulated_rtt_us";
    return std::nullopt;
  }
  if (flag == "--listen" || flag == "--model" || flag == "--served-model-name") return "";
  if (hybrid && flag == "--experts") return "workers";
  if (hybrid && flag == "--expert-parallel") return "expert_parallel";
  if (hybrid && flag == "--local-expert-layers") return "local_expert_layers";
  if (hybrid && flag == "--wire-dtype") return "wire_dtype";
  if (hybrid && flag == "--partial-dtype") return "partial_dtype";
  if (l.coordinator_ranks == 2 && (flag == "--coordinator-ranks" || flag == "--peer")) return "coordinator_ranks";
  if (l.coordinator_threads > 0 && flag == "--threads") return "coordinator_threads";
  return std::nullopt;
}

// Options the harness also passes are refused where they are written, naming the layout
// key that sets them (a coordinator given a flag twice exits at once, and the session's
// failure would only say it never started).
void CheckOptionsAgainstLayout(const At& list, const std::vector<std::string>& options, const LayoutSpec& l, std::size_t layout,
                               bool worker) {
  for (std::size_t k = 0; k < options.size(); ++k) {
    const std::string& option = options[k];
    if (option.rfind("--", 0) != 0) continue;
    const std::string flag = option.substr(0, option.find('='));
    const std::optional<std::string> source = HarnessFlagSource(flag, l, worker);
    if (!source) continue;
    const At at = list.node().IsSequence() ? list.Item(list.node()[k], k) : list;
    if (source->empty()) throw at.Error(fmt::format("'{}' is set by the harness for every session; leave it out", flag));
    throw at.Error(fmt::format("'{}' is set from layouts[{}] ('{}') key {}: set {} there instead of passing the flag", flag, layout, l.name,
                               *source, *source));
  }
}

SamplingSpec ParseSampling(const At& at) {
  SamplingSpec s;
  if (at.node().IsScalar()) {
    if (at.String() != "greedy") throw at.Error("must be 'greedy' or {temperature, top_p, seed}");
    return s;
  }
  const Map m(at, {"temperature", "top_p", "seed"});
  s.greedy = false;
  s.temperature = m.Number<double>("temperature", 1.0, 0.0, 2.0);
  s.top_p = m.Number<double>("top_p", 1.0, 1e-9, 1.0);
  s.seed = m.Number<std::uint64_t>("seed", 0, 0, UINT64_MAX);
  return s;
}

// `latency: [ttft, itl, tpot, e2e]` (the default for a measured battery, concurrency or mixed
// workload); `latency: []` scores none.
std::vector<store::FamilyMetric> ParseLatency(const Map& m, const WorkloadSpec& w) {
  const bool timed = w.kind != WorkloadKind::kRetainedContext && w.kind != WorkloadKind::kPrefill;
  if (!m.Has("latency")) {
    if (!timed || w.warmup) return {};
    return {store::FamilyMetric::kTtft, store::FamilyMetric::kItl, store::FamilyMetric::kTpot, store::FamilyMetric::kE2e};
  }
  const At list = m.Get("latency");
  if (!timed) throw list.Error(fmt::format("is not used by a {} workload", ToString(w.kind)));
  if (w.warmup) throw list.Error("is not used by a warmup workload (warmup is never scored)");
  if (!list.node().IsSequence()) throw list.Error("must be a list of ttft, itl, tpot, e2e (or [] for none)");
  std::vector<store::FamilyMetric> out;
  for (std::size_t i = 0; i < list.node().size(); ++i) {
    const At item = list.Item(list.node()[i], i);
    const store::FamilyMetric metric = store::ParseFamilyMetric(OneOf(item, {"ttft", "itl", "tpot", "e2e"}), item.path());
    if (std::find(out.begin(), out.end(), metric) != out.end()) throw item.Error("is listed twice");
    out.push_back(metric);
  }
  return out;
}

// Token counts of a prefill or retained-context workload: a list of sizes, each 0 (where
// `zero` allows it) or from `least` (what holds the prompt's fixed text and the chat template)
// to 1M.
std::vector<int> TokenCounts(const Map& m, const char* key, std::vector<int> fallback, int least, bool zero) {
  if (!m.Has(key)) return fallback;
  const At list = m.Get(key);
  const std::vector<int> out = list.NumberList<int>(0, 1 << 20);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] < least && !(zero && out[i] == 0)) {
      throw list.Item(list.node()[i], i)
          .Error(fmt::format("{} tokens cannot hold the prompt's own text and the chat template: use {}at least {}", out[i],
                             zero ? "0 or " : "", least));
    }
  }
  return out;
}

// The prompt source of a prefill or retained-context workload: a text file (relative to the
// campaign file), its sha256 stored so a report can say which text the prompts came from.
void ReadSource(const Map& m, const std::filesystem::path& base, WorkloadSpec& w) {
  w.source = Resolve(base, m.String("source", "context-source.txt"));
  std::error_code ec;
  if (!std::filesystem::is_regular_file(w.source, ec)) {
    throw(m.Has("source") ? m.Get("source") : m.at()).Error(fmt::format("the prompt source {} is not a file", w.source.string()));
  }
  w.source_sha256 = FileSha256(w.source);
}

// `kind: prefill` and `kind: retained_context`: their own keys.
void ReadContextKeys(const Map& m, const std::filesystem::path& base, WorkloadSpec& w) {
  if (w.kind == WorkloadKind::kPrefill) {
    w.bases = TokenCounts(m, "bases", {0, 1024}, 64, true);
    w.new_tokens = TokenCounts(m, "new_tokens", {128, 512}, 32, false);
    w.tries = m.Number<int>("tries", 3, 1, 100);
  } else {
    if (m.Has("children")) {
      throw m.Get("children").Error("is no longer used: every weighted case (or each of `cases`) is a child, `repeats` times");
    }
    w.contexts = TokenCounts(m, "contexts", {0, 1024}, 64, true);
    w.parent_max_tokens = m.Number<int>("parent_max_tokens", 256, 1, 1 << 20);
    if (m.Has("thinking")) {
      w.thinking.clear();
      const At list = m.Get("thinking");
      for (std::size_t i = 0; i < list.node().size(); ++i) {
        const At item = list.Item(list.node()[i], i);
        w.thinking.push_back(OneOf(item, {"off", "on"}));
        if (std::count(w.thinking.begin(), w.thinking.end(), w.thinking.back()) > 1) throw item.Error("is listed twice");
      }
      if (w.thinking.empty()) throw list.Error("must list off, on or both");
    }
  }
  ReadSource(m, base, w);
}

WorkloadSpec ParseWorkload(const At& at, bool warmup, std::size_t index, const std::filesystem::path& base) {
  const Map m(at, {"name", "kind", "cases", "repeats", "nonce_seed", "sampling", "levels", "contexts", "children", "max_tokens", "counting",
                   "latency", "bases", "new_tokens", "tries", "source", "thinking", "parent_max_tokens"});
  WorkloadSpec w;
  w.warmup = warmup;
  const std::string kind = OneOf(m.Get("kind"), {"battery", "concurrency", "mixed", "retained_context", "prefill"});
  w.kind = kind == "battery"            ? WorkloadKind::kBattery
           : kind == "concurrency"      ? WorkloadKind::kConcurrency
           : kind == "mixed"            ? WorkloadKind::kMixed
           : kind == "retained_context" ? WorkloadKind::kRetainedContext
                                        : WorkloadKind::kPrefill;
  w.name = m.String("name", fmt::format("{}{}-{}", warmup ? "warmup-" : "", kind, index));
  w.cases = m.StringList("cases");
  w.repeats = m.Number<int>("repeats", 1, 1, 100000);
  w.nonce_seed = m.Number<std::uint64_t>("nonce_seed", 1000 + index + (warmup ? 500 : 0), 0, UINT64_MAX);
  if (m.Has("sampling")) w.sampling = ParseSampling(m.Get("sampling"));
  w.max_tokens = m.Number<int>("max_tokens", 0, 1, 1 << 20);
  w.counting = m.Bool("counting", true);
  if (w.kind == WorkloadKind::kConcurrency || w.kind == WorkloadKind::kMixed) {
    w.levels = m.Has("levels") ? m.Get("levels").NumberList<int>(1, 1024) : std::vector<int>{1, 2, 4, 8, 16};
  } else if (m.Has("levels")) {
    throw m.Get("levels").Error(fmt::format("is not used by a {} workload", kind));
  }
  if (w.kind == WorkloadKind::kConcurrency && w.cases.empty()) throw at.Error("a concurrency workload needs 'cases'");
  if ((w.kind == WorkloadKind::kMixed || w.kind == WorkloadKind::kPrefill) && m.Has("cases")) {
    throw m.Get("cases").Error(fmt::format("is not used by a {} workload (its prompts are fixed)", kind));
  }
  if (w.kind != WorkloadKind::kBattery && m.Has("counting")) throw m.Get("counting").Error("is only used by a battery workload");
  const bool context_kind = w.kind == WorkloadKind::kRetainedContext || w.kind == WorkloadKind::kPrefill;
  if (context_kind) {
    if (warmup) throw at.Error(fmt::format("a {} workload cannot be a warmup (it discards its own first round)", kind));
    ReadContextKeys(m, base, w);
  }
  const std::pair<const char*, bool> own[] = {{"contexts", w.kind == WorkloadKind::kRetainedContext},
                                              {"children", w.kind == WorkloadKind::kRetainedContext},
                                              {"thinking", w.kind == WorkloadKind::kRetainedContext},
                                              {"parent_max_tokens", w.kind == WorkloadKind::kRetainedContext},
                                              {"bases", w.kind == WorkloadKind::kPrefill},
                                              {"new_tokens", w.kind == WorkloadKind::kPrefill},
                                              {"tries", w.kind == WorkloadKind::kPrefill},
                                              {"source", context_kind}};
  for (const auto& [key, used] : own) {
    if (!used && m.Has(key)) throw m.Get(key).Error(fmt::format("is not used by a {} workload", kind));
  }
  if (w.kind == WorkloadKind::kPrefill && m.Has("max_tokens")) {
    throw m.Get("max_tokens").Error("is not used by a prefill workload (each request asks for 1 token)");
  }
  w.latency = ParseLatency(m, w);
  return w;
}

std::vector<WorkloadSpec> ParseWorkloads(const At& at, bool warmup, const std::filesystem::path& base) {
  if (!at.node().IsSequence()) throw at.Error("must be a list of workloads");
  std::vector<WorkloadSpec> out;
  for (std::size_t i = 0; i < at.node().size(); ++i) out.push_back(ParseWorkload(at.Item(at.node()[i], i), warmup, i, base));
  return out;
}

SessionSpec ParseSessions(const At& at, const std::vector<ArmSpec>& arms) {
  const Map m(at, {"per_layout", "max_per_layout", "until", "precision", "order", "seed", "retry", "on_failure", "method"});
  SessionSpec s;
  if (m.Has("method")) s.paired = OneOf(m.Get("method"), {"welch", "paired"}) == "paired";
  if (m.Has("per_layout") && m.Has("max_per_layout"))
    throw m.Get("max_per_layout").Error("is for sequential campaigns; per_layout is set too");
  if (m.Has("until")) {
    (void)OneOf(m.Get("until"), {"decided"});
    if (!m.Has("max_per_layout")) throw m.Get("until").Error("needs max_per_layout: the most sessions a layout may run");
    s.until_decided = true;
  } else if (m.Has("max_per_layout")) {
    throw m.Get("max_per_layout").Error("needs until: decided (else use per_layout)");
  }
  s.per_layout = s.until_decided ? m.Number<int>("max_per_layout", 16, 2, 10000) : m.Number<int>("per_layout", 4, 1, 10000);
  if (m.Has("precision")) {
    if (!s.until_decided) throw m.Get("precision").Error("is a stopping condition of sequential campaigns: needs until: decided");
    s.precision = m.Number<double>("precision", 0, 0.001, 10.0);
  }
  s.retry = m.Number<int>("retry", 0, 0, 100);
  if (m.Has("on_failure")) s.abort_on_failure = OneOf(m.Get("on_failure"), {"continue", "abort"}) == "abort";
  if (m.Has("order")) {
    const At order = m.Get("order");
    if (order.node().IsSequence()) {
      s.order = SessionSpec::Order::kExplicit;
      s.sequence = order.StringList();
      for (std::size_t i = 0; i < s.sequence.size(); ++i) {
        if (std::none_of(arms.begin(), arms.end(), [&](const ArmSpec& a) { return a.label == s.sequence[i]; })) {
          throw order.Item(order.node()[i], i).Error(fmt::format("'{}' is not an arm label", s.sequence[i]));
        }
      }
      if (m.Has("per_layout") && s.per_layout != static_cast<int>(s.sequence.size())) {
        throw order.Error(fmt::format("lists {} sessions, but per_layout is {}", s.sequence.size(), s.per_layout));
      }
      s.per_layout = static_cast<int>(s.sequence.size());
    } else if (order.String() == "random") {
      s.order = SessionSpec::Order::kRandom;
      s.seed = m.Number<std::uint64_t>("seed", 0, 0, UINT64_MAX);
    } else {
      s.order = SessionSpec::Order::kPattern;
      s.pattern = order.String();
      for (char c : s.pattern) {
        const int arm = c - 'A';
        if (arm < 0 || arm >= static_cast<int>(arms.size())) {
          throw order.Error(
              fmt::format("'{}' names arm {}; the pattern's letters A.. stand for the {} arms in order", s.pattern, c, arms.size()));
        }
      }
      if (s.pattern.empty()) throw order.Error("is empty");
    }
  }
  // Every arm needs sessions in every layout, or there is nothing to compare.
  for (std::size_t a = 0; a < arms.size(); ++a) {
    bool present = false;
    switch (s.order) {
      case SessionSpec::Order::kPattern:
        for (int i = 0; i < s.per_layout; ++i)
          present = present || s.pattern[static_cast<std::size_t>(i) % s.pattern.size()] - 'A' == static_cast<int>(a);
        break;
      case SessionSpec::Order::kExplicit:
        present = std::find(s.sequence.begin(), s.sequence.end(), arms[a].label) != s.sequence.end();
        break;
      case SessionSpec::Order::kRandom:
        present = static_cast<std::size_t>(s.per_layout) >= arms.size();
        break;
    }
    if (!present) throw at.Error(fmt::format("arm '{}' gets no session in this order", arms[a].label));
  }
  if (s.until_decided) {
    if (s.order != SessionSpec::Order::kPattern) throw m.Get("until").Error("a sequential campaign needs a pattern order (e.g. ABBA)");
    if (s.per_layout % s.block(arms.size()) != 0) {
      throw m.Get("max_per_layout")
          .Error(fmt::format("must be a whole number of {} blocks ({} sessions each)", s.pattern, s.block(arms.size())));
    }
  }
  return s;
}

}  // namespace

const HostSpec& Campaign::Host(std::string_view host_name) const {
  for (const HostSpec& h : hosts) {
    if (h.name == host_name) return h;
  }
  throw InputError(fmt::format("{}: no host named '{}'", file.string(), host_name));
}

bool Campaign::uses_remote_hosts() const {
  for (const LayoutSpec& l : layouts) {
    if (!Host(l.coordinator_host).local()) return true;
    for (int i = 0; i < l.workers; ++i) {
      if (!Host(WorkerHost(l, i)).local()) return true;
    }
    if (l.coordinator_ranks == 2 && !Host(PeerHost(l)).local()) return true;
  }
  return false;
}

const std::string& WorkerHost(const LayoutSpec& layout, int index) {
  static const std::string local = "local";
  return layout.worker_hosts.empty() ? local : layout.worker_hosts.at(static_cast<std::size_t>(index));
}

const std::string& PeerHost(const LayoutSpec& layout) { return layout.peer_host.empty() ? layout.coordinator_host : layout.peer_host; }

const ArmSpec& Campaign::Arm(std::string_view label) const {
  for (const ArmSpec& a : arms) {
    if (a.label == label) return a;
  }
  throw InputError(fmt::format("{}: no arm labelled '{}'", file.string(), label));
}

namespace {

// `gate.families`: each a family's label ("code-sweep: code C4") or its id
// ({workload: code-sweep, metric: aggregate, case: code, level: 4}).
std::vector<store::FamilySelector> GatedFamilies(const At& list) {
  const YAML::Node& node = list.node();
  if (node.IsScalar()) return {{node.Scalar(), std::nullopt}};
  if (!node.IsSequence()) throw list.Error("must be a list of family labels or ids");
  std::vector<store::FamilySelector> out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    const At item = list.Item(node[i], i);
    if (node[i].IsScalar()) {
      out.push_back({node[i].Scalar(), std::nullopt});
      continue;
    }
    const Map m(item, {"workload", "metric", "case", "level", "context", "base", "new_tokens", "percentile", "sampling"});
    store::FamilyId id;
    id.workload = m.Get("workload").String();
    id.metric =
        store::ParseFamilyMetric(OneOf(m.Get("metric"), {"weighted", "case", "aggregate", "retained", "pooled_cases", "pooled_levels",
                                                         "ttft", "itl", "tpot", "e2e", "startup", "memory", "prefill", "pooled_prefill"}),
                                 m.at().path());
    id.case_id = m.String("case", "");
    id.level = m.Number("level", 1, 1, 1 << 20);
    id.context = m.Number("context", 0, 0, 1 << 30);
    const bool prefill = id.metric == store::FamilyMetric::kPrefill;
    for (const char* key : {"base", "new_tokens"}) {
      if (m.Has(key) && !prefill) throw m.Get(key).Error("is only for a prefill cell (metric prefill)");
    }
    if (prefill) {
      if (!m.Has("base") || !m.Has("new_tokens")) throw item.Error("a prefill cell needs 'base' and 'new_tokens'");
      id.context = m.Number("base", 0, 0, 1 << 30);
      id.new_tokens = m.Number("new_tokens", 1, 1, 1 << 30);
    }
    if (store::IsLatency(id.metric)) {
      if (!m.Has("percentile")) throw item.Error(fmt::format("a {} family needs 'percentile' (50, 90 or 99)", ToString(id.metric)));
      id.percentile = std::stoi(OneOf(m.Get("percentile"), {"50", "90", "99"}));
    } else if (m.Has("percentile")) {
      throw m.Get("percentile").Error("is only for a latency family (metric ttft, itl, tpot or e2e)");
    }
    if (m.Has("sampling")) id.greedy = OneOf(m.Get("sampling"), {"greedy", "sampled"}) == "greedy";
    out.push_back({"", id});
  }
  return out;
}

}  // namespace

namespace {

// `conditions: {power_limit_w, max_sm_clock_mhz, max_memory_clock_mhz, gpus, sample_s}`.
ConditionsSpec ParseConditions(const At& at) {
  const Map m(at, {"power_limit_w", "max_sm_clock_mhz", "max_memory_clock_mhz", "gpus", "sample_s"});
  ConditionsSpec c;
  if (m.Has("power_limit_w")) c.controls.power_limit_w = m.Number<double>("power_limit_w", 0, 1, 100000);
  if (m.Has("max_sm_clock_mhz")) c.controls.max_sm_clock_mhz = m.Number<double>("max_sm_clock_mhz", 0, 1, 100000);
  if (m.Has("max_memory_clock_mhz")) c.controls.max_memory_clock_mhz = m.Number<double>("max_memory_clock_mhz", 0, 1, 100000);
  c.controls.gpus = m.StringList("gpus");
  c.sample_s = m.Number<double>("sample_s", 2, 0.1, 3600);
  return c;
}

}  // namespace

// `model`: a checkpoint directory, or a preset (synthetic with a seed, or trained).
void ReadModel(const Map& m, const std::filesystem::path& base, Campaign& c) {
  const Map model(m.Get("model"), {"path", "preset", "seed"});
  if (model.Has("path") == model.Has("preset")) throw model.at().Error("give either 'path' or 'preset' (+ 'seed')");
  if (model.Has("path")) {
    c.model.path = Resolve(base, model.Get("path").String());
    if (std::error_code ec; !std::filesystem::exists(c.model.path / "config.json", ec)) {
      throw model.Get("path").Error(fmt::format("{} is not a checkpoint directory (no config.json)", c.model.path.string()));
    }
  } else {
    c.model.preset = OneOf(model.Get("preset"), {"tiny", "small", "mini", "v41-tiny", "v41-small"});
    if (IsTrainedPreset(c.model.preset)) {
      if (model.Has("seed"))
        throw model.Get("seed").Error(fmt::format(
            "the {} preset is a trained checkpoint: seed applies only to the synthetic presets (tiny, small, v41-tiny, v41-small)",
            c.model.preset));
      try {
        c.model.trained = TrainedPresetDir(c.model.preset);
      } catch (const InputError& e) {
        throw model.Get("preset").Error(e.what());
      }
    } else {
      c.model.seed = model.Number<std::uint64_t>("seed", 1, 0, UINT64_MAX);
    }
  }
}

// `arms`: at least two, labels unique; a mixed arm's sides must be arms Tandem launches.
void ReadArms(const At& arms, const std::filesystem::path& base, Campaign& c) {
  if (!arms.node().IsSequence() || arms.node().size() < 2) throw arms.Error("must list at least two arms");
  for (std::size_t i = 0; i < arms.node().size(); ++i) {
    ArmSpec arm = ParseArm(arms.Item(arms.node()[i], i), base);
    for (const ArmSpec& other : c.arms) {
      if (other.label == arm.label) throw arms.Item(arms.node()[i], i).Error(fmt::format("label '{}' is used twice", arm.label));
    }
    c.arms.push_back(std::move(arm));
  }
  // A mixed arm's sides must be arms whose images Tandem launches.
  for (std::size_t i = 0; i < c.arms.size(); ++i) {
    const ArmSpec& arm = c.arms[i];
    if (arm.kind != ArmKind::kMixed) continue;
    const At item = arms.Item(arms.node()[i], i);
    for (const auto& [key, label] : {std::pair{"coordinator_from", arm.coordinator_from}, std::pair{"worker_from", arm.worker_from}}) {
      const std::string& wanted = label;  // clang 14 cannot capture a structured binding
      const auto side = std::find_if(c.arms.begin(), c.arms.end(), [&](const ArmSpec& a) { return a.label == wanted; });
      const At at = item.Child(item.node()[key], key);
      if (side == c.arms.end()) throw at.Error(fmt::format("'{}' is not an arm label", label));
      if (side->kind != ArmKind::kBinary && side->kind != ArmKind::kGit && side->kind != ArmKind::kContainer) {
        throw at.Error(fmt::format("arm '{}' is a {} arm: a mixed pair takes binary, git or container arms", label, ToString(side->kind)));
      }
    }
  }
}

// `hosts`: "local" always, then each named host once.
void ReadHosts(const Map& m, Campaign& c) {
  c.hosts.push_back(HostSpec{.name = "local", .ssh = "local", .address = "127.0.0.1"});
  if (m.Has("hosts")) {
    const At hosts = m.Get("hosts");
    if (!hosts.node().IsSequence()) throw hosts.Error("must be a list of hosts");
    for (std::size_t i = 0; i < hosts.node().size(); ++i) {
      const At item = hosts.Item(hosts.node()[i], i);
      HostSpec h = ParseHost(item);
      for (const HostSpec& other : c.hosts) {
        if (other.name == h.name) throw item.Error(fmt::format("host name '{}' is used twice", h.name));
      }
      c.hosts.push_back(std::move(h));
    }
  }
}

// `layouts`: names unique, options and placement checked against every arm.
void ReadLayouts(const At& layouts, const At& arms, Campaign& c) {
  if (!layouts.node().IsSequence() || layouts.node().size() == 0) throw layouts.Error("must list at least one layout");
  for (std::size_t i = 0; i < layouts.node().size(); ++i) {
    const At item = layouts.Item(layouts.node()[i], i);
    c.layouts.push_back(ParseLayout(item, c.hosts));
    for (std::size_t k = 0; k + 1 < c.layouts.size(); ++k) {
      if (c.layouts[k].name == c.layouts.back().name)
        throw item.Error(fmt::format("layout name '{}' is used twice", c.layouts.back().name));
    }
    // Only Tandem's own workers know the flag: a command or external arm would run
    // without the emulated link and be compared as if it had one.
    const LayoutSpec& l = c.layouts.back();
    const auto listed = [](const At& parent, const char* key) { return parent.Child(parent.node()[key], key); };
    CheckOptionsAgainstLayout(listed(item, "options"), l.options, l, i, false);
    for (std::size_t a = 0; a < c.arms.size(); ++a) {
      const ArmSpec& arm = c.arms[a];
      if (arm.kind == ArmKind::kCommand || arm.kind == ArmKind::kExternal) continue;
      const At at = arms.Item(arms.node()[a], a);
      CheckOptionsAgainstLayout(listed(at, "options"), arm.options, l, i, false);
      CheckOptionsAgainstLayout(listed(at, "worker_options"), arm.worker_options, l, i, true);
    }
    for (const ArmSpec& arm : c.arms) {
      if (l.emulated_rtt_us > 0 && (arm.kind == ArmKind::kCommand || arm.kind == ArmKind::kExternal)) {
        throw item.Child(item.node()["emulated_rtt_us"], "emulated_rtt_us")
            .Error(
                fmt::format("arm '{}' is a {} arm: only arms that start Tandem's workers emulate the link", arm.label, ToString(arm.kind)));
      }
      // A command template runs through the local shell: it has no way onto another host.
      bool remote = !c.Host(l.coordinator_host).local() || (l.coordinator_ranks == 2 && !c.Host(PeerHost(l)).local());
      for (int w = 0; w < l.workers; ++w) remote = remote || !c.Host(WorkerHost(l, w)).local();
      if (remote && arm.kind == ArmKind::kCommand) {
        throw item.Error(
            fmt::format("arm '{}' is a command arm, which runs on the harness's machine only; this layout places "
                        "processes on other hosts",
                        arm.label));
      }
    }
  }
}

void ReadCorpusCases(const Map& m, Campaign& c) {
  // Every case a workload names must be in the corpus: say where, now, not mid-run.
  const Corpus corpus = LoadCorpus(c.corpus);
  for (const char* section : {"warmup", "workloads"}) {
    if (!m.Has(section)) continue;
    const At list = m.Get(section);
    for (std::size_t i = 0; i < list.node().size(); ++i) {
      const At w = list.Item(list.node()[i], i);
      if (!w.node()["cases"]) continue;
      const At cases = w.Child(w.node()["cases"], "cases");
      for (std::size_t j = 0; j < cases.node().size(); ++j) {
        const At id = cases.Item(cases.node()[j], j);
        const auto known = std::find_if(corpus.cases.begin(), corpus.cases.end(), [&](const CorpusCase& k) { return k.id == id.String(); });
        if (known == corpus.cases.end()) {
          std::vector<std::string> ids;
          for (const CorpusCase& k : corpus.cases) ids.push_back(k.id);
          throw id.Error(fmt::format("'{}' is not a case of {} ({})", id.String(), c.corpus.string(), fmt::join(ids, ", ")));
        }
      }
    }
  }
}

// `gate:`: tandem gate's defaults for this campaign.
void ReadGate(const Map& m, Campaign& c) {
  if (m.Has("gate")) {
    const Map g(m.Get("gate"), {"baseline", "candidate", "families", "max_regression", "rule", "require_identical_greedy"});
    for (const auto& field : {std::pair{"baseline", &c.gate.baseline}, std::pair{"candidate", &c.gate.candidate}}) {
      if (!g.Has(field.first)) continue;
      const std::string label = g.Get(field.first).String();
      if (std::none_of(c.arms.begin(), c.arms.end(), [&](const ArmSpec& a) { return a.label == label; })) {
        throw g.Get(field.first).Error(fmt::format("'{}' is not an arm label", label));
      }
      *field.second = label;
    }
    if (g.Has("families")) c.gate.families = GatedFamilies(g.Get("families"));
    if (g.Has("max_regression")) c.gate.max_regression = g.Get("max_regression").Number<double>(0.0, 0.99);
    if (g.Has("rule")) c.gate.proven = OneOf(g.Get("rule"), {"proven", "noninferior"}) == "proven";
    if (g.Has("require_identical_greedy")) c.gate.require_identical_greedy = g.Get("require_identical_greedy").Bool();
  }
}

Campaign ParseCampaign(std::string_view text, const std::filesystem::path& file) {
  const std::string name = file.string();
  const YAML::Node root = yaml::Load(std::string(text), name);
  const At top(root, name, "");
  const Map m(top, {"name", "model", "arms", "layouts", "sessions", "warmup", "workloads", "quality", "store", "timeouts", "gate", "corpus",
                    "hosts", "startup", "conditions"});
  const std::filesystem::path base = std::filesystem::absolute(file).parent_path();
  Campaign c;
  c.file = file;
  c.yaml_text = std::string(text);
  c.yaml_sha256 = Sha256Hex(text);
  c.name = m.Get("name").String();
  ReadModel(m, base, c);
  ReadArms(m.Get("arms"), base, c);
  ReadHosts(m, c);
  ReadLayouts(m.Get("layouts"), m.Get("arms"), c);
  if (m.Has("sessions")) c.sessions = ParseSessions(m.Get("sessions"), c.arms);
  if (m.Has("warmup")) c.warmup = ParseWorkloads(m.Get("warmup"), true, base);
  c.workloads = ParseWorkloads(m.Get("workloads"), false, base);
  if (c.workloads.empty() && !c.warmup.empty()) {
    throw m.Get("workloads").Error("is empty while warmup is not: a campaign that measures only launches (startup, memory) has neither");
  }
  std::set<std::string> names;
  for (const auto* list : {&c.warmup, &c.workloads}) {
    for (const WorkloadSpec& w : *list) {
      if (!names.insert(w.name).second) throw m.Get("workloads").Error(fmt::format("workload name '{}' is used twice", w.name));
    }
  }
  if (m.Has("quality")) {
    const Map q(m.Get("quality"), {"cache_bound", "on_failure"});
    c.quality.cache_bound = q.Number<int>("cache_bound", 4, 0, 1 << 20);
    if (q.Has("on_failure")) c.quality.fail_session = OneOf(q.Get("on_failure"), {"record", "fail_session"}) == "fail_session";
  }
  c.store = Resolve(base, m.String("store", "results/" + c.name + ".db"));
  c.corpus = Resolve(base, m.String("corpus", "corpus.yaml"));
  if (std::error_code ec; !std::filesystem::exists(c.corpus, ec)) {
    throw(m.Has("corpus") ? m.Get("corpus") : top).Error(fmt::format("corpus {} does not exist", c.corpus.string()));
  }
  ReadCorpusCases(m, c);
  if (m.Has("timeouts")) {
    const Map t(m.Get("timeouts"), {"launch_s", "request_s", "teardown_grace_s"});
    c.timeouts.launch_s = t.Number<double>("launch_s", 300, 1, 86400);
    c.timeouts.request_s = t.Number<double>("request_s", 600, 1, 86400);
    c.timeouts.teardown_grace_s = t.Number<double>("teardown_grace_s", 10, 0, 3600);
  }
  if (m.Has("conditions")) c.conditions = ParseConditions(m.Get("conditions"));
  if (m.Has("startup")) c.startup.discard = Map(m.Get("startup"), {"discard"}).Number<int>("discard", 1, 0, 1000);
  ReadGate(m, c);
  return c;
}

int SessionSpec::block(std::size_t arms) const {
  switch (order) {
    case Order::kPattern:
      return static_cast<int>(pattern.size());
    case Order::kExplicit:
      return static_cast<int>(sequence.size());
    case Order::kRandom:
      break;
  }
  return static_cast<int>(arms);
}

std::vector<int> SessionSpec::looks(std::size_t arms) const {
  if (!until_decided) return {per_layout};
  std::vector<int> out;
  for (int n = block(arms); n <= per_layout; n += block(arms)) out.push_back(n);
  return out;
}

Campaign LoadCampaign(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open the campaign file", file.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseCampaign(text.str(), file);
}

}  // namespace tandem::harness
