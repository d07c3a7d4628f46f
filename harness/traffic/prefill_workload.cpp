// The prefill matrix: for each cell of retained base × new tokens, a parent prompt of
// exactly the base, then a child adding exactly the new tokens, each asking for one token;
// the child's usage must show the base cached and the new tokens not.
#include <stdexcept>

#include <fmt/format.h>

#include "harness/traffic/context_text.hpp"
#include "harness/traffic/workload_requests.hpp"

namespace tandem::harness {

namespace {

using nlohmann::json;

const CorpusCase kPrefillCase{.id = "prefill", .max_tokens = 1};
constexpr std::string_view kParentLead = "Read this text; more of it follows.\n\n";
constexpr std::string_view kChildLead = "The text goes on:\n\n";
constexpr std::string_view kTail = "\n\nReply with one word: OK.";

// What a prefill child's usage says about its cache: clean (the base cached, the new
// tokens not, the prompt exactly both), or why not.
std::string CacheProblem(const store::SampleRow& s, const StreamedCompletion& r, int base, int add, int cache_bound) {
  if (s.prompt_tokens != base + add) return fmt::format("a prompt of {} tokens, not {} + {}", s.prompt_tokens, base, add);
  if (base > 0 && s.cached_tokens != base) return fmt::format("{} tokens cached, not the base {}", s.cached_tokens, base);
  if (base == 0 && s.cached_tokens > cache_bound) {
    return fmt::format("{} tokens cached of a fresh prompt (at most {})", s.cached_tokens, cache_bound);
  }
  if (r.cache_miss_tokens >= 0 && r.cache_miss_tokens != s.prompt_tokens - s.cached_tokens) {
    return fmt::format("{} cached + {} missed is not the prompt's {}", s.cached_tokens, r.cache_miss_tokens, s.prompt_tokens);
  }
  return "";
}

}  // namespace

int CountPrefillRequests(const WorkloadSpec& w) {
  int per_round = 0;
  for (int base : w.bases) per_round += static_cast<int>(w.new_tokens.size()) * (base > 0 ? 2 : 1);
  return 2 + per_round * (w.repeats + 1) * w.tries;
}

bool Runner::PrefillTry(const ContextSource& source, const TemplateOverhead& overhead, const PrefillCell& cell, bool last_try) {
  const auto place = [&](Planned& p, const char* role) {
    p.body["max_tokens"] = 1;
    p.check.max_tokens = 1;
    p.sample.role = role;
    p.sample.context = cell.base;
    p.sample.new_tokens = cell.add;
    p.sample.repeat = cell.round;
    p.sample.batch = cell.batch + (std::string_view(role) == "parent" ? 0 : 1);
  };
  Planned child = Make(kPrefillCase, cell.position);
  const std::string marker = child.sample.nonce;
  if (cell.base > 0) {
    Planned parent = child;
    parent.body["messages"] =
        json::array({{{"role", "user"}, {"content", source.Fit(marker + std::string(kParentLead), cell.base - overhead.first, kTail)}}});
    place(parent, "parent");
    store::SampleRow& s = SendOne(parent);
    if (last_.back().complete()) AddCheck(s, "context_exact", s.prompt_tokens == cell.base, false);
    child.body["messages"] = parent.body["messages"];
    child.body["messages"].push_back({{"role", "assistant"}, {"content", kFixedAnswer}});
    child.body["messages"].push_back(
        {{"role", "user"}, {"content", source.Fit(std::string(kChildLead), cell.add - overhead.turn, kTail, cell.base)}});
    child.check.cache_bound = -1;  // the base is meant to be cached
  } else {
    child.body["messages"] =
        json::array({{{"role", "user"}, {"content", source.Fit(marker + std::string(kChildLead), cell.add - overhead.first, kTail)}}});
  }
  place(child, "child");
  store::SampleRow& s = SendOne(child);
  const StreamedCompletion& r = last_.back();
  if (!r.complete()) return true;  // a failed request: recorded as it is, not tried again
  if (!r.has_cached_usage) {
    // Without the cache accounting the cell's rate could be a cold prefill of base + new tokens.
    s.valid = false;
    AddFlag(s, "prefill_unverified", "the server's usage reports no cached tokens");
    return true;
  }
  const std::string problem = CacheProblem(s, r, cell.base, cell.add, ctx_.cache_bound);
  if (problem.empty() || last_try) {
    AddCheck(s, "prefill_cache", problem.empty(), true);
    if (!problem.empty()) AddFlag(s, "prefill_cache", problem);
    return true;
  }
  s.role = "retry";
  s.valid = false;
  AddFlag(s, "prefill_retry", problem);
  return false;
}

void Runner::Prefill() {
  if (ctx_.tokenizer == nullptr) {
    throw std::runtime_error(
        fmt::format("workload {}: prefill prompts are fitted with the model's tokenizer, and the model has none", w_.name));
  }
  const ContextSource source = ContextSource::Load(w_.source, w_.source_sha256, *ctx_.tokenizer);
  const TemplateOverhead overhead = Probe(false, true);
  json cells = json::array();
  const std::uint64_t first_position = position_;
  const int first_batch = batch_;
  int slot = 0;  // (cell, round, try) in order
  for (int base : w_.bases) {
    for (int add : w_.new_tokens) {
      // Round -1 is the cell's discarded warmup.
      for (int round = -1; round < w_.repeats; ++round, slot += w_.tries) {
        for (int t = 0; t < w_.tries; ++t) {
          const PrefillCell cell{base, add, round, first_position + static_cast<std::uint64_t>(slot + t), first_batch + 2 * (slot + t)};
          if (PrefillTry(source, overhead, cell, t + 1 == w_.tries)) break;
        }
      }
      cells.push_back({{"base", base}, {"new_tokens", add}});
    }
  }
  position_ = first_position + static_cast<std::uint64_t>(slot);
  batch_ = first_batch + 2 * slot;
  out_.result = {{"cells", cells}, {"template_overhead", {{"first", overhead.first}, {"turn", overhead.turn}}}};
}

}  // namespace tandem::harness
