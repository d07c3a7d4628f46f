#include "harness/campaign/spec_json.hpp"

#include "common/redact.hpp"

namespace tandem::harness {

using nlohmann::json;

namespace {

json LatencyWords(const std::vector<store::FamilyMetric>& metrics) {
  json words = json::array();
  for (const store::FamilyMetric m : metrics) words.push_back(std::string(ToString(m)));
  return words;
}

}  // namespace

json WorkloadSpecJson(const WorkloadSpec& w) {
  return {{"name", w.name},
          {"kind", std::string(ToString(w.kind))},
          {"warmup", w.warmup},
          {"cases", w.cases},
          {"repeats", w.repeats},
          {"nonce_seed", w.nonce_seed},
          {"greedy", w.sampling.greedy},
          {"temperature", w.sampling.temperature},
          {"top_p", w.sampling.top_p},
          {"seed", w.sampling.seed},
          {"levels", w.levels},
          {"contexts", w.contexts},
          {"children", w.children},
          {"max_tokens", w.max_tokens},
          {"counting", w.counting},
          {"latency", LatencyWords(w.latency)},
          {"bases", w.bases},
          {"new_tokens", w.new_tokens},
          {"tries", w.tries},
          {"parent_max_tokens", w.kind == WorkloadKind::kRetainedContext ? w.parent_max_tokens : 0},
          {"thinking", w.kind == WorkloadKind::kRetainedContext ? w.thinking : std::vector<std::string>{}},
          {"source", w.source.string()},
          {"source_sha256", w.source_sha256}};
}

json LayoutSpecJson(const LayoutSpec& l) {
  return {{"name", l.name},
          {"workers", l.workers},
          {"expert_parallel", l.expert_parallel},
          {"local_expert_layers", l.local_expert_layers},
          {"coordinator_ranks", l.coordinator_ranks},
          {"wire_dtype", l.wire_dtype},
          {"partial_dtype", l.partial_dtype},
          {"coordinator_threads", l.coordinator_threads},
          {"worker_threads", l.worker_threads},
          {"emulated_rtt_us", l.emulated_rtt_us},
          {"options", RedactArgs(l.options)},
          {"coordinator_cpus", l.coordinator_cpus},
          {"worker_cpus", l.worker_cpus},
          {"coordinator_host", l.coordinator_host},
          {"worker_hosts", l.worker_hosts},
          {"peer_host", l.coordinator_ranks == 2 ? PeerHost(l) : ""}};
}

}  // namespace tandem::harness
