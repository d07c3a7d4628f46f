#include "harness/campaign/campaign.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "common/input_error.hpp"
#include "common/sha256.hpp"
#include "harness/campaign/corpus.hpp"
#include "harness/campaign/cpu_list.hpp"
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

ArmSpec ParseArm(const At& at, const std::filesystem::path& base) {
  const Map m(at, {"label", "source", "options", "worker_options", "env", "revision"});
  ArmSpec arm;
  arm.label = m.Get("label").String();
  if (arm.label.empty() || arm.label.find_first_of(" \t,") != std::string::npos) throw m.Get("label").Error("must be a word");
  const Map src(m.Get("source"),
                {"kind", "coordinator", "worker", "repository", "ref", "cmake_flags", "command", "worker_command", "base_url"});
  const std::string kind = OneOf(src.Get("kind"), {"binary", "git", "command", "external"});
  auto refuse = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys) {
      if (src.Has(k)) throw src.Get(k).Error(fmt::format("is not used by a '{}' source", kind));
    }
  };
  if (kind == "binary") {
    arm.kind = ArmSourceKind::kBinary;
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
    arm.kind = ArmSourceKind::kGit;
    refuse({"coordinator", "worker", "command", "worker_command", "base_url"});
    arm.repository = src.Get("repository").String();
    if (arm.repository.find("://") == std::string::npos) arm.repository = Resolve(base, arm.repository).string();
    arm.ref = src.Get("ref").String();
    arm.cmake_flags = src.StringList("cmake_flags");
  } else if (kind == "command") {
    arm.kind = ArmSourceKind::kCommand;
    refuse({"coordinator", "worker", "repository", "ref", "cmake_flags", "base_url"});
    arm.coordinator_command = src.Get("command").String();
    if (arm.coordinator_command.find("{port}") == std::string::npos) {
      throw src.Get("command").Error("must contain {port}: the harness picks the port");
    }
    arm.worker_command = src.String("worker_command", "");
  } else {
    arm.kind = ArmSourceKind::kExternal;
    refuse({"coordinator", "worker", "repository", "ref", "cmake_flags", "command", "worker_command"});
    arm.base_url = src.Get("base_url").String();
    if (arm.base_url.rfind("http://", 0) != 0) throw src.Get("base_url").Error("must start with http://");
  }
  arm.options = m.StringList("options");
  arm.worker_options = m.StringList("worker_options");
  if (m.Has("env")) {
    const At env = m.Get("env");
    if (!env.node().IsMap()) throw env.Error("must be a mapping NAME: value");
    for (const auto& kv : env.node()) arm.env[kv.first.Scalar()] = env.Child(kv.second, kv.first.Scalar()).String();
  }
  arm.declared_revision = m.String("revision", "");
  return arm;
}

LayoutSpec ParseLayout(const At& at) {
  const Map m(at, {"name", "workers", "expert_parallel", "local_expert_layers", "coordinator_ranks", "wire_dtype", "partial_dtype",
                   "coordinator_threads", "worker_threads", "emulated_rtt_us", "options", "coordinator_cpus", "worker_cpus"});
  LayoutSpec l;
  l.name = m.Get("name").String();
  l.workers = m.Number<int>("workers", 0, 0, 64);
  if (m.Has("expert_parallel")) l.expert_parallel = OneOf(m.Get("expert_parallel"), {"tp", "ep"});
  l.local_expert_layers = m.Number<int>("local_expert_layers", 0, 0, 1 << 20);
  l.coordinator_ranks = m.Number<int>("coordinator_ranks", 1, 1, 2);
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

WorkloadSpec ParseWorkload(const At& at, bool warmup, std::size_t index) {
  const Map m(at,
              {"name", "kind", "cases", "repeats", "nonce_seed", "sampling", "levels", "contexts", "children", "max_tokens", "counting"});
  WorkloadSpec w;
  w.warmup = warmup;
  const std::string kind = OneOf(m.Get("kind"), {"battery", "concurrency", "mixed", "retained_context"});
  w.kind = kind == "battery"       ? WorkloadKind::kBattery
           : kind == "concurrency" ? WorkloadKind::kConcurrency
           : kind == "mixed"       ? WorkloadKind::kMixed
                                   : WorkloadKind::kRetainedContext;
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
  if ((w.kind == WorkloadKind::kMixed || w.kind == WorkloadKind::kRetainedContext) && m.Has("cases")) {
    throw m.Get("cases").Error(fmt::format("is not used by a {} workload (its cases are fixed)", kind));
  }
  if (w.kind != WorkloadKind::kBattery && m.Has("counting")) throw m.Get("counting").Error("is only used by a battery workload");
  if (w.kind == WorkloadKind::kRetainedContext) {
    w.contexts = m.Has("contexts") ? m.Get("contexts").NumberList<int>(16, 1 << 20) : std::vector<int>{1024};
    w.children = m.Number<int>("children", 2, 1, 1000);
  } else if (m.Has("contexts") || m.Has("children")) {
    throw(m.Has("contexts") ? m.Get("contexts") : m.Get("children")).Error(fmt::format("is not used by a {} workload", kind));
  }
  return w;
}

std::vector<WorkloadSpec> ParseWorkloads(const At& at, bool warmup) {
  if (!at.node().IsSequence()) throw at.Error("must be a list of workloads");
  std::vector<WorkloadSpec> out;
  for (std::size_t i = 0; i < at.node().size(); ++i) out.push_back(ParseWorkload(at.Item(at.node()[i], i), warmup, i));
  return out;
}

SessionSpec ParseSessions(const At& at, const std::vector<ArmSpec>& arms) {
  const Map m(at, {"per_layout", "order", "seed", "retry", "on_failure"});
  SessionSpec s;
  s.per_layout = m.Number<int>("per_layout", 4, 1, 10000);
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
  return s;
}

}  // namespace

const ArmSpec& Campaign::Arm(std::string_view label) const {
  for (const ArmSpec& a : arms) {
    if (a.label == label) return a;
  }
  throw InputError(fmt::format("{}: no arm labelled '{}'", file.string(), label));
}

std::string_view ToString(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kBattery:
      return "battery";
    case WorkloadKind::kConcurrency:
      return "concurrency";
    case WorkloadKind::kMixed:
      return "mixed";
    case WorkloadKind::kRetainedContext:
      return "retained_context";
  }
  return "?";
}

std::string_view ToString(ArmSourceKind kind) {
  switch (kind) {
    case ArmSourceKind::kBinary:
      return "binary";
    case ArmSourceKind::kGit:
      return "git";
    case ArmSourceKind::kCommand:
      return "command";
    case ArmSourceKind::kExternal:
      return "external";
  }
  return "?";
}

Campaign ParseCampaign(std::string_view text, const std::filesystem::path& file) {
  const std::string name = file.string();
  const YAML::Node root = yaml::Load(std::string(text), name);
  const At top(root, name, "");
  const Map m(top,
              {"name", "model", "arms", "layouts", "sessions", "warmup", "workloads", "quality", "store", "timeouts", "gate", "corpus"});
  const std::filesystem::path base = std::filesystem::absolute(file).parent_path();
  Campaign c;
  c.file = file;
  c.yaml_text = std::string(text);
  c.yaml_sha256 = Sha256Hex(text);
  c.name = m.Get("name").String();

  const Map model(m.Get("model"), {"path", "preset", "seed"});
  if (model.Has("path") == model.Has("preset")) throw model.at().Error("give either 'path' or 'preset' (+ 'seed')");
  if (model.Has("path")) {
    c.model.path = Resolve(base, model.Get("path").String());
    if (std::error_code ec; !std::filesystem::exists(c.model.path / "config.json", ec)) {
      throw model.Get("path").Error(fmt::format("{} is not a checkpoint directory (no config.json)", c.model.path.string()));
    }
  } else {
    c.model.preset = OneOf(model.Get("preset"), {"tiny", "small"});
    c.model.seed = model.Number<std::uint64_t>("seed", 1, 0, UINT64_MAX);
  }

  const At arms = m.Get("arms");
  if (!arms.node().IsSequence() || arms.node().size() < 2) throw arms.Error("must list at least two arms");
  for (std::size_t i = 0; i < arms.node().size(); ++i) {
    ArmSpec arm = ParseArm(arms.Item(arms.node()[i], i), base);
    for (const ArmSpec& other : c.arms) {
      if (other.label == arm.label) throw arms.Item(arms.node()[i], i).Error(fmt::format("label '{}' is used twice", arm.label));
    }
    c.arms.push_back(std::move(arm));
  }
  const At layouts = m.Get("layouts");
  if (!layouts.node().IsSequence() || layouts.node().size() == 0) throw layouts.Error("must list at least one layout");
  for (std::size_t i = 0; i < layouts.node().size(); ++i) {
    const At item = layouts.Item(layouts.node()[i], i);
    c.layouts.push_back(ParseLayout(item));
    for (std::size_t k = 0; k + 1 < c.layouts.size(); ++k) {
      if (c.layouts[k].name == c.layouts.back().name)
        throw item.Error(fmt::format("layout name '{}' is used twice", c.layouts.back().name));
    }
    // Only Tandem's own workers know the flag: a command or external arm would run
    // without the emulated link and be compared as if it had one.
    for (const ArmSpec& arm : c.arms) {
      if (c.layouts.back().emulated_rtt_us > 0 && arm.kind != ArmSourceKind::kBinary && arm.kind != ArmSourceKind::kGit) {
        throw item.Child(item.node()["emulated_rtt_us"], "emulated_rtt_us")
            .Error(fmt::format("arm '{}' is a {} arm: only binary and git arms start Tandem's workers, which emulate the link", arm.label,
                               ToString(arm.kind)));
      }
    }
  }
  if (m.Has("sessions")) c.sessions = ParseSessions(m.Get("sessions"), c.arms);
  if (m.Has("warmup")) c.warmup = ParseWorkloads(m.Get("warmup"), true);
  c.workloads = ParseWorkloads(m.Get("workloads"), false);
  if (c.workloads.empty()) throw m.Get("workloads").Error("must list at least one workload");
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
  if (m.Has("timeouts")) {
    const Map t(m.Get("timeouts"), {"launch_s", "request_s", "teardown_grace_s"});
    c.timeouts.launch_s = t.Number<double>("launch_s", 300, 1, 86400);
    c.timeouts.request_s = t.Number<double>("request_s", 600, 1, 86400);
    c.timeouts.teardown_grace_s = t.Number<double>("teardown_grace_s", 10, 0, 3600);
  }
  if (m.Has("gate")) {
    // Defaults for `tandem gate`; its flags override them. Stored as JSON.
    const Map g(m.Get("gate"), {"baseline", "candidate", "families", "max_regression", "rule"});
    nlohmann::json gate = nlohmann::json::object();
    for (const char* key : {"baseline", "candidate"}) {
      if (!g.Has(key)) continue;
      const std::string label = g.Get(key).String();
      if (std::none_of(c.arms.begin(), c.arms.end(), [&](const ArmSpec& a) { return a.label == label; })) {
        throw g.Get(key).Error(fmt::format("'{}' is not an arm label", label));
      }
      gate[key] = label;
    }
    if (g.Has("families")) gate["families"] = g.Get("families").StringList();
    if (g.Has("max_regression")) gate["max_regression"] = g.Get("max_regression").Number<double>(0.0, 0.99);
    if (g.Has("rule")) gate["rule"] = OneOf(g.Get("rule"), {"proven", "noninferior"});
    c.gate_json = gate.dump();
  }
  return c;
}

Campaign LoadCampaign(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open the campaign file", file.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseCampaign(text.str(), file);
}

}  // namespace tandem::harness
