#include "harness/traffic/workload_runner.hpp"

#include <algorithm>
#include <latch>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "common/input_error.hpp"
#include "harness/traffic/checks.hpp"
#include "harness/traffic/sse_client.hpp"
#include "harness/traffic/workload_requests.hpp"
#include "runtime/model/tokenizer.hpp"
#include "stats/decode_metrics.hpp"
#include "stats/descriptive.hpp"
#include "stats/stats_error.hpp"

namespace tandem::harness {

namespace {

using nlohmann::json;

const std::vector<std::string> kMixedRotation = {"code", "fable", "topic"};

// The lifetime draft counters of a /v1/stats body, or nullopt when there are none.
std::optional<stats::DraftCounters> ReadDraftCounters(const std::string& stats) {
  const json j = json::parse(stats, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("draft") || !j["draft"].is_object()) return std::nullopt;
  std::uint64_t values[3] = {};
  const char* keys[3] = {"accepted_drafts", "verified_drafts", "request_rounds"};
  for (int k = 0; k < 3; ++k) {
    const auto it = j["draft"].find(keys[k]);
    if (it == j["draft"].end() || !it->is_number_unsigned()) return std::nullopt;
    values[k] = it->get<std::uint64_t>();
  }
  return stats::DraftCounters{values[0], values[1], values[2]};
}

// Aggregate throughput of the samples of one batch: Σ(ct − 1) / (max t_finish − min t_first_output).
std::optional<double> Aggregate(const std::vector<store::SampleRow>& samples, std::size_t first, std::size_t count) {
  std::vector<stats::RequestTiming> timings;
  for (std::size_t i = first; i < first + count; ++i) {
    const store::SampleRow& s = samples[i];
    if (!s.valid) return std::nullopt;
    timings.push_back({s.completion_tokens, s.t_first_output, s.t_finish});
  }
  try {
    return stats::AggregateThroughput(timings);
  } catch (const stats::StatsError&) {
    return std::nullopt;
  }
}

}  // namespace

Planned Runner::Make(const CorpusCase& c, std::uint64_t position, bool nonced) {
  Planned p;
  p.c = &c;
  const std::uint64_t slot = position + static_cast<std::uint64_t>(ctx_.nonce_round) * static_cast<std::uint64_t>(total_);
  std::string marker;
  if (nonced && c.nonce) marker = ctx_.nonces->Marker(ctx_.workload_index, w_.nonce_seed, slot);
  json messages = json::array();
  if (!c.system.empty()) {
    messages.push_back({{"role", "system"}, {"content", marker + c.system}});
    marker.clear();
  }
  messages.push_back({{"role", "user"}, {"content", marker + c.prompt}});
  const int max_tokens = w_.max_tokens > 0 ? w_.max_tokens : c.max_tokens;
  p.body = {{"model", ctx_.model}, {"messages", messages}, {"max_tokens", max_tokens}};
  if (w_.sampling.greedy) {
    p.body["temperature"] = 0;
  } else {
    p.body["temperature"] = w_.sampling.temperature;
    p.body["top_p"] = w_.sampling.top_p;
    p.body["seed"] = w_.sampling.seed + position;
  }
  if (!c.response_format.empty()) p.body["response_format"] = nlohmann::ordered_json::parse(c.response_format);
  p.sample.case_id = c.id;
  p.sample.weight = c.weight;
  p.sample.nonce = nonced && c.nonce ? ctx_.nonces->Marker(ctx_.workload_index, w_.nonce_seed, slot) : "";
  p.check = {max_tokens, nonced && c.nonce ? ctx_.cache_bound : -1, ctx_.tokenizer};
  return p;
}

void Runner::Send(std::vector<Planned>& batch) {
  // The server's draft counters around the batch: per-case acceptance (a batch holds
  // one case, except in mixed traffic). Absent when the server has no /v1/stats.
  const auto before = ReadDraftCounters(HttpGet(ctx_.base_url, "/v1/stats", 30, nullptr, ctx_.api_key));
  std::vector<StreamedCompletion> responses(batch.size());
  std::vector<std::thread> threads;
  // Every thread first exists, then all send: started as they are created, a batch's
  // requests went out up to a thread start apart, and on a fast model (the tiny test
  // preset, 16 tokens) the first could finish before the last arrived, which then rode
  // its prefix cache (cache_bound failed) although they were meant to run together.
  std::latch ready(static_cast<std::ptrdiff_t>(batch.size()));
  for (std::size_t i = 0; i < batch.size(); ++i) {
    threads.emplace_back([&, i] {
      ready.arrive_and_wait();
      responses[i] = StreamChat(ctx_.base_url, batch[i].body, ctx_.request_timeout_s, ctx_.api_key);
    });
  }
  for (auto& t : threads) t.join();
  const auto after = ReadDraftCounters(HttpGet(ctx_.base_url, "/v1/stats", 30, nullptr, ctx_.api_key));
  // None when the server has no counters. Counters that went backwards (the server
  // restarted, or a counter wrapped) are recorded as an error: the report then gives this
  // workload and case no acceptance figure instead of one computed without this batch.
  std::string draft = "{}";
  if (before && after) {
    try {
      const stats::DraftCounters d = stats::DraftCountersBetween(*before, *after);
      draft =
          json{{"accepted_drafts", d.accepted_drafts}, {"verified_drafts", d.verified_drafts}, {"request_rounds", d.request_rounds}}.dump();
    } catch (const stats::StatsError& e) {
      draft = json{{"error", e.what()}}.dump();
    }
  }
  for (std::size_t i = 0; i < batch.size(); ++i) {
    Planned& p = batch[i];
    p.sample.draft_json = draft;
    p.sample.slot = static_cast<int>(i);
    p.sample.level = static_cast<int>(batch.size());
    p.sample.request_json = p.body.dump();
    ApplyChecks(p.sample, responses[i], *p.c, p.check);
    out_.samples.push_back(p.sample);
    last_.push_back(responses[i]);
  }
  done_ += static_cast<int>(batch.size());
  if (ctx_.progress) ctx_.progress(done_, total_);
}

store::SampleRow& Runner::SendOne(Planned& p) {
  std::vector<Planned> one = {p};
  Send(one);
  return out_.samples.back();
}

namespace {

const CorpusCase kProbeCase{.id = "probe", .max_tokens = 1, .prompt = "Probe: reply with one word."};
const char* const kProbeTurn = "Probe: and one more word.";

}  // namespace

TemplateOverhead Runner::Probe(bool thinking, bool with_turn) {
  Planned p = Make(kProbeCase, NextPosition());
  p.body["max_tokens"] = 1;
  p.check.max_tokens = 1;
  if (thinking) p.body["thinking"] = {{"type", "enabled"}};
  p.sample.role = "probe";
  p.sample.batch = batch_++;
  const auto sent = [&](const char* what) {
    const store::SampleRow& s = SendOne(p);
    if (!last_.back().complete()) {
      throw std::runtime_error(fmt::format("workload {}: the request that measures the chat template's size ({}) failed: {}", w_.name, what,
                                           s.error.empty() ? s.checks_json : s.error));
    }
    return s.prompt_tokens;
  };
  const std::string text = p.body["messages"].back()["content"].get<std::string>();
  TemplateOverhead o;
  const int first = sent("one message");
  o.first = first - static_cast<int>(ctx_.tokenizer->Encode(text).size());
  if (with_turn) {
    p.body["messages"].push_back({{"role", "assistant"}, {"content", kFixedAnswer}});
    p.body["messages"].push_back({{"role", "user"}, {"content", kProbeTurn}});
    p.check.cache_bound = -1;  // the first message is cached by now
    p.sample.batch = batch_++;
    o.turn = sent("a second turn") - first - static_cast<int>(ctx_.tokenizer->Encode(kProbeTurn).size());
  }
  return o;
}

void Runner::Battery() {
  const std::vector<const CorpusCase*> cases = ctx_.corpus->Select(w_.cases);
  const CorpusCase* counting = nullptr;
  for (const CorpusCase& c : ctx_.corpus->cases) {
    if (c.count > 0) counting = &c;
  }
  json repeats = json::array();
  for (int r = 0; r < w_.repeats; ++r) {
    const std::size_t first = out_.samples.size();
    for (const CorpusCase* c : cases) {
      std::vector<Planned> one = {Make(*c, position_++)};
      one[0].sample.repeat = r;
      one[0].sample.batch = batch_++;
      Send(one);
    }
    std::vector<stats::WeightedRequest> weighted;
    bool complete = true;
    for (std::size_t i = first; i < out_.samples.size(); ++i) {
      const store::SampleRow& s = out_.samples[i];
      if (s.weight <= 0) continue;
      if (!s.valid) complete = false;
      weighted.push_back({s.case_id, s.weight, {s.completion_tokens, s.t_first_output, s.t_finish}});
    }
    json entry = {{"repeat", r}};
    if (complete && !weighted.empty()) {
      try {
        entry["weighted_decode"] = stats::WeightedDecode(weighted);
      } catch (const stats::StatsError& e) {
        entry["error"] = e.what();
      }
    } else {
      entry["error"] = "an invalid sample: the repeat has no weighted decode";
    }
    repeats.push_back(entry);
    if (counting != nullptr && w_.counting) {
      std::vector<Planned> one = {Make(*counting, position_++)};
      one[0].sample.repeat = r;
      one[0].sample.batch = batch_++;
      Send(one);
    }
  }
  std::vector<double> scores;
  for (const json& e : repeats) {
    if (e.contains("weighted_decode")) scores.push_back(e["weighted_decode"]);
  }
  out_.result = {{"repeats", repeats}};
  if (!scores.empty()) out_.result["weighted_decode_median"] = stats::Median(scores);
}

void Runner::Concurrency(const std::vector<std::string>& cases, bool mixed) {
  json levels = json::array();
  const std::vector<std::string> swept = mixed ? std::vector<std::string>{"mixed"} : cases;
  for (const std::string& id : swept) {
    for (int level : w_.levels) {
      std::vector<double> aggregates;
      for (int r = 0; r < w_.repeats; ++r) {
        std::vector<Planned> batch;
        if (mixed) {
          for (int i = 0; i < level; ++i) {
            batch.push_back(Make(ctx_.corpus->Case(kMixedRotation[static_cast<std::size_t>(i) % kMixedRotation.size()]), position_++));
          }
        } else {
          // C identical requests: one nonce for the batch; they start together, so
          // none can hit the prefix cache of another.
          const Planned p = Make(ctx_.corpus->Case(id), position_++);
          batch.assign(static_cast<std::size_t>(level), p);
        }
        for (Planned& p : batch) {
          p.sample.repeat = r;
          p.sample.batch = batch_;
          if (mixed) p.sample.case_id = p.c->id;
        }
        ++batch_;
        const std::size_t first = out_.samples.size();
        Send(batch);
        if (const auto a = Aggregate(out_.samples, first, batch.size())) aggregates.push_back(*a);
      }
      json entry = {{"case", id}, {"level", level}, {"aggregate", aggregates}};
      if (!aggregates.empty()) entry["median"] = stats::Median(aggregates);
      levels.push_back(entry);
    }
  }
  out_.result = {{"levels", levels}};
}

WorkloadOutcome Runner::Run() {
  switch (w_.kind) {
    case WorkloadKind::kBattery:
      Battery();
      break;
    case WorkloadKind::kConcurrency:
      Concurrency(w_.cases, false);
      break;
    case WorkloadKind::kMixed:
      Concurrency({}, true);
      break;
    case WorkloadKind::kRetainedContext:
      RetainedContext();
      break;
    case WorkloadKind::kPrefill:
      Prefill();
      break;
  }
  // Retries a prefill cell did not need leave the count short of its bound.
  if (done_ < total_ && ctx_.progress) ctx_.progress(total_, total_);
  return std::move(out_);
}

int CountRequests(const WorkloadSpec& w, const Corpus& corpus) {
  switch (w.kind) {
    case WorkloadKind::kBattery: {
      int cases = w.cases.empty() ? static_cast<int>(corpus.Weighted().size()) : static_cast<int>(w.cases.size());
      bool counting = false;
      for (const CorpusCase& c : corpus.cases) counting = counting || c.count > 0;
      return w.repeats * (cases + (counting && w.counting ? 1 : 0));
    }
    case WorkloadKind::kConcurrency:
    case WorkloadKind::kMixed: {
      int per_repeat = 0;
      for (int level : w.levels) per_repeat += level;
      const int cases = w.kind == WorkloadKind::kMixed ? 1 : static_cast<int>(w.cases.size());
      return cases * per_repeat * w.repeats;
    }
    case WorkloadKind::kRetainedContext:
      return CountRetainedContextRequests(w, corpus);
    case WorkloadKind::kPrefill:
      return CountPrefillRequests(w);
  }
  return 0;
}

WorkloadOutcome RunWorkload(const WorkloadSpec& workload, const WorkloadContext& context) { return Runner(workload, context).Run(); }

}  // namespace tandem::harness
