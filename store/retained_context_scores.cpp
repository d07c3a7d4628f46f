// Retained context: the weighted decode of the children per context size (and thinking
// mode), beside the fresh-launch control. A store from before contexts were exact (no
// control row) keeps its old definition: the median decode rate of the children.
#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "stats/decode_metrics.hpp"
#include "stats/stats_error.hpp"
#include "store/workload_scorers.hpp"

namespace tandem::store {

namespace {

constexpr std::string_view kThinking = " thinking";

bool Thinking(const std::string& role) { return role.ends_with(kThinking); }
std::string Bare(const std::string& role) { return Thinking(role) ? role.substr(0, role.size() - kThinking.size()) : role; }

void ScoreRetainedChildren(const std::vector<const ScoredSample*>& samples, const FamilySink& put) {
  const std::string& w = samples.front()->workload;
  std::map<int, std::vector<double>> per_context;
  for (const ScoredSample* r : samples) {
    if (r->role != "child") continue;
    if (const auto rate = DecodeRateOf(*r)) per_context[r->context].push_back(*rate);
  }
  for (const auto& [context, rates] : per_context) {
    put({.family = fmt::format("{}: retained {}", w, context), .metric = FamilyMetric::kRetained, .context = context}, rates);
  }
}

// One row: the control or a context size, in one thinking mode.
struct Row {
  bool control = false;
  int context = 0;
  bool thinking = false;
  auto operator<=>(const Row&) const = default;
};

}  // namespace

void ScoreRetainedContext(const std::vector<const ScoredSample*>& samples, const FamilySink& put) {
  const bool exact = std::any_of(samples.begin(), samples.end(), [](const ScoredSample* r) { return Bare(r->role) == "control"; });
  if (!exact) return ScoreRetainedChildren(samples, put);
  const std::string& w = samples.front()->workload;
  std::map<Row, std::map<int, std::vector<stats::WeightedRequest>>> repeats;
  std::map<std::pair<Row, int>, bool> complete;
  std::vector<Row> order;
  for (const ScoredSample* r : samples) {
    const std::string role = Bare(r->role);
    if ((role != "control" && role != "child") || r->weight <= 0) continue;
    const Row row{role == "control", r->context, Thinking(r->role)};
    if (!repeats.contains(row)) order.push_back(row);
    complete.try_emplace({row, r->repeat}, true);
    if (!r->valid) complete[{row, r->repeat}] = false;
    repeats[row][r->repeat].push_back({r->case_id, r->weight, {r->completion_tokens, r->t_first_output, r->t_finish}});
  }
  for (const Row& row : order) {
    std::vector<double> weighted;
    for (const auto& [repeat, requests] : repeats[row]) {
      if (!complete[{row, repeat}]) continue;
      try {
        weighted.push_back(stats::WeightedDecode(requests));
      } catch (const stats::StatsError&) {
      }
    }
    if (weighted.empty()) continue;
    const std::string size = row.control ? "fresh launch" : std::to_string(row.context);
    const std::string mode = row.thinking ? ", thinking" : "";
    const std::string case_id =
        std::string(row.control ? "fresh-launch" : "") + (row.thinking ? (row.control ? " thinking" : "thinking") : "");
    put({.family = fmt::format("{}: retained {}{}", w, size, mode),
         .metric = FamilyMetric::kRetained,
         .case_id = case_id,
         .context = row.context},
        weighted);
  }
}

}  // namespace tandem::store
