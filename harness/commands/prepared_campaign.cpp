#include <algorithm>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"
#include "harness/campaign/campaign_secrets.hpp"
#include "harness/commands/campaign_run.hpp"
#include "harness/launch/managed_process.hpp"
#include "harness/traffic/workload_runner.hpp"
#include "runtime/model/cache_dir.hpp"
#include "runtime/model/model_error.hpp"
#include "runtime/model/model_revision.hpp"

namespace tandem::harness {

using nlohmann::json;

namespace {

// A prefill cell or retained context beyond the model's context is refused before anything
// starts: the server would refuse each of its requests.
void CheckContextSizes(const Campaign& c, const std::filesystem::path& model, const Corpus& corpus, const rt::Tokenizer& tokenizer) {
  std::ifstream in(model / "config.json");
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
  if (!config.is_object() || !config.contains("max_position_embeddings") || !config["max_position_embeddings"].is_number_integer()) return;
  const long long limit = config["max_position_embeddings"].get<long long>();
  const auto refuse = [&](const WorkloadSpec& w, const std::string& what, long long needs) {
    if (needs <= limit) return;
    throw InputError(
        fmt::format("{}: workload '{}': {} needs {} positions, beyond the model's context of {} ({}: "
                    "max_position_embeddings)",
                    c.file.string(), w.name, what, needs, limit, (model / "config.json").string()));
  };
  for (const WorkloadSpec& w : c.workloads) {
    for (int base : w.bases) {
      for (int add : w.new_tokens) refuse(w, fmt::format("the cell base {} +{} (and 1 token out)", base, add), 1LL + base + add);
    }
    // A child turn: the context, the parent's answer, its own message (and the template's
    // few tokens around it) and its answer.
    long long child = 0;
    if (w.kind == WorkloadKind::kRetainedContext) {
      for (const CorpusCase* k : corpus.Select(w.cases)) {
        const long long message = static_cast<long long>(tokenizer.Encode(k->system + "\n\n" + k->prompt).size()) + 32;
        child = std::max(child, message + (w.max_tokens > 0 ? w.max_tokens : k->max_tokens));
      }
    }
    for (int size : w.contexts) {
      refuse(w,
             fmt::format("the context {} with the parent's answer ({} tokens at most) and a child turn (about {})", size,
                         w.parent_max_tokens, child),
             1LL * size + w.parent_max_tokens + child);
    }
  }
}

std::filesystem::path BuildCache() { return rt::TandemCacheDir() / "builds"; }

// The checkpoint: a path, a trained preset's committed one, or a synthetic preset
// written once into the cache by the first arm that has a tandem-rt.
std::filesystem::path PrepareModel(const Campaign& c, const std::vector<ResolvedArm>& arms, bool dry_run) {
  if (!c.model.path.empty()) return c.model.path;
  if (!c.model.trained.empty()) return c.model.trained;
  const auto dir = rt::TandemCacheDir() / "models" / fmt::format("{}-seed{}", c.model.preset, c.model.seed);
  if (std::filesystem::exists(dir / "model.safetensors") || dry_run) return dir;
  // A binary or git arm's tandem-rt, else a container arm's image run by the local engine.
  const RoleImage* writer = nullptr;
  for (const ResolvedArm& a : arms) {
    if (!a.built) continue;
    for (const RoleImage* role : {&a.coordinator, &a.worker}) {
      if (!role->executable.empty() && (writer == nullptr || writer->container())) writer = role;
      if (role->container() && writer == nullptr) writer = role;
    }
  }
  if (writer == nullptr) throw InputError("model.preset needs a binary, git or container arm whose tandem-rt can write it (init-model)");
  const auto log = rt::TandemCacheDir() / "models" / "init-model.log";
  const auto partial = dir.string() + ".partial";
  std::error_code ec;
  std::filesystem::remove_all(partial, ec);
  std::filesystem::create_directories(dir.parent_path(), ec);
  std::vector<std::string> argv = {"init-model", "--preset", c.model.preset, "--seed", std::to_string(c.model.seed), "--out", partial};
  if (writer->container()) {
    const std::string parent = dir.parent_path().string();
    argv.insert(argv.begin(), {writer->engine, "run", "--rm", "-v", parent + ":" + parent, writer->image});
  } else {
    argv.insert(argv.begin(), writer->executable.string());
  }
  if (RunToCompletion(argv, log, std::chrono::seconds(600)) != 0) {
    throw InputError(fmt::format("init-model for preset {} failed; see {}", c.model.preset, log.string()));
  }
  std::filesystem::rename(partial, dir);
  return dir;
}

}  // namespace

Prepared Prepare(const Campaign& c, bool dry_run, bool check_hosts, std::ostream& log) {
  Prepared p;
  p.campaign = &c;
  p.secrets = CampaignSecretValues(c);
  // Every arm's API key is in the environment before anything is built or started.
  for (const ArmSpec& arm : c.arms) {
    if (const std::string key = ReadApiKey(arm); !key.empty()) p.secrets.push_back(key);
  }
  p.corpus = LoadCorpus(c.corpus);  // every case a workload names was checked against it by ParseCampaign
  for (const ArmSpec& arm : c.arms) {
    if (arm.kind == ArmKind::kMixed) {  // composed below, from its resolved sides
      p.arms.push_back(ResolvedArm{.spec = arm});
      continue;
    }
    ResolvedArm resolved = ResolveArm(arm, {.build = false, .build_cache = BuildCache()});
    if (!resolved.built && !dry_run) {
      log << fmt::format("building arm {}: {} at {} ({}) into {}...\n", arm.label, arm.repository, arm.ref, resolved.revision.substr(0, 12),
                         BuildCache().string());
      resolved = ResolveArm(arm, {.build = true, .build_cache = BuildCache()});
    }
    p.arms.push_back(std::move(resolved));
  }
  // A mixed arm takes its images from its two sides, resolved above.
  for (ResolvedArm& a : p.arms) {
    if (a.spec.kind != ArmKind::kMixed) continue;
    const auto side = [&](const std::string& label) -> const ResolvedArm& {
      return *std::find_if(p.arms.begin(), p.arms.end(), [&](const ResolvedArm& r) { return r.spec.label == label; });
    };
    a = ComposeMixedArm(a.spec, side(a.spec.coordinator_from), side(a.spec.worker_from));
  }
  p.model = PrepareModel(c, p.arms, dry_run);
  const bool have_model = std::filesystem::exists(p.model / "config.json");
  if (have_model) {
    try {
      p.model_revision = rt::ModelRevision(p.model);
      p.tokenizer.emplace(rt::Tokenizer::Load(p.model / "tokenizer.json"));
    } catch (const rt::ModelError& e) {
      throw InputError(e.what());
    }
    CheckContextSizes(c, p.model, p.corpus, *p.tokenizer);
  }
  const int workloads = static_cast<int>(c.warmup.size() + c.workloads.size());
  p.plan = PlanSessions(c);
  // An external arm is not relaunched, so each of its sessions needs fresh markers.
  int rounds = 1;
  for (const ArmSpec& arm : c.arms) {
    if (arm.kind != ArmKind::kExternal) continue;
    rounds = std::max(
        rounds, static_cast<int>(std::count_if(p.plan.begin(), p.plan.end(), [&](const PlannedSession& s) { return s.arm == arm.label; })));
  }
  if (p.tokenizer) {
    p.nonces.emplace(*p.tokenizer, workloads);
    for (const auto* list : {&c.warmup, &c.workloads}) {
      for (const WorkloadSpec& w : *list) {
        const int n = CountRequests(w, p.corpus);
        if (static_cast<std::size_t>(n) * static_cast<std::size_t>(rounds) > p.nonces->per_workload()) {
          throw InputError(
              fmt::format("{}: workload '{}' sends {} requests per session{}, but the tokenizer offers {} nonce markers per "
                          "workload; use fewer repeats or levels{}",
                          c.file.string(), w.name, n, rounds > 1 ? fmt::format(" in each of an external arm's {} sessions", rounds) : "",
                          p.nonces->per_workload(), rounds > 1 ? ", or fewer sessions" : ""));
        }
      }
    }
  }
  for (const auto* list : {&c.warmup, &c.workloads}) {
    for (const WorkloadSpec& w : *list) p.requests_per_session += CountRequests(w, p.corpus);
  }
  // Every host reachable, with the model and every image in place, before anything starts.
  if (!dry_run || check_hosts) p.cluster = Cluster::Prepare(c, p.arms, p.model, p.model_revision, dry_run, log);
  return p;
}

}  // namespace tandem::harness
