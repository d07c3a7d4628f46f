// The prefill matrix: per cell (base × new tokens) the rate new tokens / time to first
// token of each clean child, and the geometric mean of a session's cells.
#include <map>
#include <set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "stats/descriptive.hpp"
#include "store/workload_scorers.hpp"

namespace tandem::store {

std::optional<double> PrefillRateOf(const ScoredSample& r) {
  if (!r.valid || r.role != "child" || r.repeat < 0 || r.new_tokens <= 0) return std::nullopt;
  // The first streamed text, or the end where one token came with no text (a thinking marker).
  const double first = r.t_first_output > 0 ? r.t_first_output : r.t_finish;
  const double seconds = first - r.t_start;
  if (!(seconds > 0)) return std::nullopt;
  return r.new_tokens / seconds;
}

void ScorePrefill(const std::vector<const ScoredSample*>& samples, const FamilySink& put) {
  const std::string& w = samples.front()->workload;
  std::map<std::pair<int, int>, std::vector<double>> cells;
  std::vector<std::pair<int, int>> order;
  std::set<std::pair<int, int>> asked;  // every cell the session measured, scored or not
  for (const ScoredSample* r : samples) {
    if (r->new_tokens > 0 && r->repeat >= 0) asked.insert({r->context, r->new_tokens});
    const auto rate = PrefillRateOf(*r);
    if (!rate) continue;
    const std::pair<int, int> cell{r->context, r->new_tokens};
    if (!cells.contains(cell)) order.push_back(cell);
    cells[cell].push_back(*rate);
  }
  std::vector<double> medians;
  for (const auto& cell : order) {
    put({.family = fmt::format("{}: base {} +{}", w, cell.first, cell.second),
         .metric = FamilyMetric::kPrefill,
         .context = cell.first,
         .new_tokens = cell.second},
        cells[cell]);
    medians.push_back(stats::Median(cells[cell]));
  }
  // Only over every cell: a geometric mean missing one would not be the session's matrix.
  if (medians.size() >= 2 && medians.size() == asked.size()) {
    put({.family = w + ": prefill, geometric mean of cells", .metric = FamilyMetric::kPooledPrefill}, {stats::GeometricMean(medians)});
  }
}

}  // namespace tandem::store
