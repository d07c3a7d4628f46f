#include "store/record_fields.hpp"

#include <fmt/format.h>

#include "common/input_error.hpp"

namespace tandem::store {

namespace {

using nlohmann::json;

[[noreturn]] void WrongType(const json& j, const char* key, const std::string& where, const char* want) {
  throw InputError(fmt::format("{}: '{}' is {}, not {}", where, key, j.at(key).dump(), want));
}

// A key's value, or `fallback` where the key is missing or null.
template <class T>
T Field(const json& j, const char* key, T fallback, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return fallback;
  const json& v = j.at(key);
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) WrongType(j, key, where, "true or false");
  } else if constexpr (std::is_arithmetic_v<T>) {
    if (!v.is_number()) WrongType(j, key, where, "a number");
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) WrongType(j, key, where, "text");
  }
  return v.get<T>();
}

// Text as the host reported it: a string as is, any other value as JSON.
std::string Text(const json& j, const char* key) {
  const json& v = j.at(key);
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::optional<std::string> OptionalText(const json& j, const char* key) {
  if (!j.contains(key)) return std::nullopt;
  return Text(j, key);
}

std::vector<std::string> Words(const json& j, const char* key, const std::string& where) {
  std::vector<std::string> out;
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return out;
  if (!j.at(key).is_array()) WrongType(j, key, where, "a list");
  for (const json& x : j.at(key)) out.push_back(x.is_string() ? x.get<std::string>() : x.dump());
  return out;
}

std::vector<int> Numbers(const json& j, const char* key, const std::string& where) {
  std::vector<int> out;
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return out;
  if (!j.at(key).is_array()) WrongType(j, key, where, "a list of numbers");
  for (const json& x : j.at(key)) {
    if (!x.is_number()) WrongType(j, key, where, "a list of numbers");
    out.push_back(x.get<int>());
  }
  return out;
}

GpuFacts ReadGpu(const json& g, const std::string& where) {
  GpuFacts out;
  if (!g.is_object()) return out;
  out.index = Field(g, "index", 0.0, where);
  out.name = Field<std::string>(g, "name", "?", where);
  const auto number = [&](const char* key) -> std::optional<double> {
    return g.contains(key) && g.at(key).is_number() ? std::optional(g.at(key).get<double>()) : std::nullopt;
  };
  out.power_limit_w = number("power_limit_w");
  out.sm_clock_mhz = number("sm_clock_mhz");
  out.max_sm_clock_mhz = number("max_sm_clock_mhz");
  out.memory_clock_mhz = number("memory_clock_mhz");
  out.max_memory_clock_mhz = number("max_memory_clock_mhz");
  return out;
}

}  // namespace

ArmLaunch ReadArmLaunch(const json& l, const std::string& where) {
  ArmLaunch a;
  a.repository = Field<std::string>(l, "repository", "", where);
  a.ref = Field<std::string>(l, "ref", "", where);
  a.coordinator = Field<std::string>(l, "coordinator", "", where);
  a.worker = Field<std::string>(l, "worker", "", where);
  a.command = Field<std::string>(l, "command", "", where);
  a.worker_command = Field<std::string>(l, "worker_command", "", where);
  a.coordinator_from = Field<std::string>(l, "coordinator_from", "", where);
  a.worker_from = Field<std::string>(l, "worker_from", "", where);
  a.base_url = Field<std::string>(l, "base_url", "", where);
  if (l.is_object() && l.contains("engine")) a.engine = Field<std::string>(l, "engine", "", where);
  a.coordinator_image = Field<std::string>(l, "coordinator_image", "", where);
  a.worker_image = Field<std::string>(l, "worker_image", "", where);
  a.run_args = Words(l, "run_args", where);
  a.options = Words(l, "options", where);
  a.worker_options = Words(l, "worker_options", where);
  if (l.is_object() && l.contains("env") && l.at("env").is_object()) {
    for (const auto& [k, v] : l.at("env").items()) a.env.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
  }
  return a;
}

void ReadLayoutSpec(const json& s, LayoutRecord& l, const std::string& where) {
  l.workers = Field(s, "workers", 0, where);
  l.local_expert_layers = Field(s, "local_expert_layers", 0, where);
  l.coordinator_ranks = Field(s, "coordinator_ranks", 1, where);
  l.expert_parallel = Field<std::string>(s, "expert_parallel", "tp", where);
  l.wire_dtype = Field<std::string>(s, "wire_dtype", "bf16", where);
  l.partial_dtype = Field<std::string>(s, "partial_dtype", "f64", where);
  l.coordinator_threads = Field(s, "coordinator_threads", 0, where);
  l.worker_threads = Field(s, "worker_threads", 1, where);
  l.coordinator_cpus = Field<std::string>(s, "coordinator_cpus", "", where);
  l.worker_cpus = Field<std::string>(s, "worker_cpus", "", where);
  l.emulated_rtt_us = Field(s, "emulated_rtt_us", 0, where);
  l.coordinator_host = Field<std::string>(s, "coordinator_host", "local", where);
  l.peer_host = Field<std::string>(s, "peer_host", "", where);
  l.worker_hosts = Words(s, "worker_hosts", where);
}

HostFacts ReadHostFacts(const json& f, const std::string& where) {
  HostFacts h;
  if (!f.is_object() || f.empty()) return h;
  h.known = true;
  h.hostname = Field<std::string>(f, "hostname", "?", where);
  h.kernel = Field<std::string>(f, "kernel", "?", where);
  h.memory = Field<std::string>(f, "memory", "?", where);
  if (f.contains("cpu_model")) h.cpu_model = Text(f, "cpu_model");
  if (f.contains("cpu_vendor")) h.cpu_vendor = Text(f, "cpu_vendor");
  if (f.contains("cpu_model_number")) h.cpu_model_number = Text(f, "cpu_model_number");
  if (f.contains("cpu_stepping")) h.cpu_stepping = Text(f, "cpu_stepping");
  if (f.contains("cpu_part")) h.cpu_part = Text(f, "cpu_part");
  h.cpu_family = OptionalText(f, "cpu_family");
  h.cpu_implementer = OptionalText(f, "cpu_implementer");
  h.logical_cpus = OptionalText(f, "logical_cpus");
  if (f.contains("cpu_isa") && f.at("cpu_isa").is_array()) {
    h.cpu_isa.emplace();
    for (const json& x : f.at("cpu_isa")) {
      if (x.is_string()) h.cpu_isa->push_back(x.get<std::string>());
    }
  }
  if (f.contains("gpus") && f.at("gpus").is_array()) {
    for (const json& g : f.at("gpus")) h.gpus.push_back(ReadGpu(g, where + ": gpus"));
  }
  if (f.contains("busy_fraction")) h.busy_fraction = Field(f, "busy_fraction", 0.0, where);
  h.load_warning = Field(f, "load_warning", false, where);
  if (f.contains("hosts") && f.at("hosts").is_object()) {
    for (const auto& [name, facts] : f.at("hosts").items()) {
      h.hosts.push_back(ReadHostFacts(facts, where + ": hosts: " + name));
      h.hosts.back().name = name;
    }
  }
  return h;
}

WorkloadSettings ReadWorkloadSettings(const json& s, const std::string& where) {
  WorkloadSettings w;
  w.cases = Words(s, "cases", where);
  w.levels = Numbers(s, "levels", where);
  w.contexts = Numbers(s, "contexts", where);
  w.counting = Field(s, "counting", true, where);
  w.greedy = Field(s, "greedy", true, where);
  w.repeats = Field(s, "repeats", 1, where);
  w.children = Field(s, "children", 2, where);
  w.max_tokens = Field(s, "max_tokens", 0, where);
  w.temperature = Field(s, "temperature", 0.0, where);
  w.top_p = Field(s, "top_p", 1.0, where);
  w.seed = Field<std::int64_t>(s, "seed", 0, where);
  w.nonce_seed = Field<std::int64_t>(s, "nonce_seed", 0, where);
  w.bases = Numbers(s, "bases", where);
  w.new_tokens = Numbers(s, "new_tokens", where);
  w.tries = Field(s, "tries", 0, where);
  w.parent_max_tokens = Field(s, "parent_max_tokens", 0, where);
  w.thinking = Words(s, "thinking", where);
  w.source = Field(s, "source", std::string(), where);
  w.source_sha256 = Field(s, "source_sha256", std::string(), where);
  for (const std::string& word : Words(s, "latency", where)) {
    const FamilyMetric metric = ParseFamilyMetric(word, where + ": latency");
    if (!IsLatency(metric)) throw InputError(fmt::format("{}: latency: '{}' is not a latency metric (ttft, itl, tpot, e2e)", where, word));
    w.latency.push_back(metric);
  }
  return w;
}

std::optional<PredictionSums> ReadPredictionSums(const json& stats) {
  if (!stats.is_object() || !stats.contains("draft") || !stats["draft"].is_object()) return std::nullopt;
  const json& p = stats["draft"].value("round_time_prediction", json());
  if (!p.is_object() || !p.value("rounds", json()).is_number()) return std::nullopt;
  const auto number = [&](const char* key) { return p.contains(key) && p[key].is_number() ? p[key].get<double>() : 0.0; };
  return PredictionSums{number("rounds"), number("abs_rel_error_sum"), number("error_us_sum")};
}

std::map<std::string, bool> ReadChecks(const json& checks, const std::string& where) {
  std::map<std::string, bool> out;
  if (!checks.is_object()) return out;
  for (const auto& [name, passed] : checks.items()) {
    if (!passed.is_boolean()) throw InputError(fmt::format("{}: check '{}' is {}, not true or false", where, name, passed.dump()));
    out[name] = passed.get<bool>();
  }
  return out;
}

std::optional<TokenCountMismatch> ReadTokenCountMismatch(const json& flags, const std::string& where) {
  if (!flags.is_object() || !flags.contains("token_count_mismatch")) return std::nullopt;
  const json& m = flags.at("token_count_mismatch");
  const std::string at = where + ": token_count_mismatch";
  return TokenCountMismatch{Field(m, "usage", 0, at), Field(m, "tokenizer", 0, at), Field(m, "chunks", 0, at)};
}

DraftCounts ReadDraftCounts(const json& d, const std::string& where) {
  DraftCounts out;
  if (!d.is_object()) return out;
  if (d.contains("error")) out.error = d.at("error").is_string() ? d.at("error").get<std::string>() : "?";
  out.counted = d.contains("verified_drafts");
  out.accepted_drafts = Field<std::int64_t>(d, "accepted_drafts", 0, where);
  out.verified_drafts = Field<std::int64_t>(d, "verified_drafts", 0, where);
  out.request_rounds = Field<std::int64_t>(d, "request_rounds", 0, where);
  return out;
}

json ChecksJson(const SampleRecord& sample) { return json(sample.checks); }

json FlagsJson(const SampleRecord& sample) {
  json flags = json::object();
  if (const auto& m = sample.token_count_mismatch)
    flags["token_count_mismatch"] = {{"usage", m->usage}, {"tokenizer", m->tokenizer}, {"chunks", m->chunks}};
  return flags;
}

json DraftJson(const DraftCounts& d) {
  json out = json::object();
  if (d.counted)
    out = {{"accepted_drafts", d.accepted_drafts}, {"verified_drafts", d.verified_drafts}, {"request_rounds", d.request_rounds}};
  if (d.error) out["error"] = *d.error;
  return out;
}

}  // namespace tandem::store
