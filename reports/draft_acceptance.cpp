#include "reports/draft_acceptance.hpp"

#include <cstdint>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace tandem::reports {

std::vector<DraftCounterSums> SumDraftCounters(const store::CampaignRecord& r) {
  struct Sums {
    std::int64_t accepted = 0, verified = 0, rounds = 0;
  };
  using Case = std::pair<std::string, std::string>;    // (workload, case)
  using Column = std::pair<std::string, std::string>;  // (layout, arm)
  std::vector<Case> order;
  std::map<Case, std::map<Column, Sums>> sums;
  std::set<std::tuple<std::int64_t, std::int64_t, int>> seen;  // (session, workload run, batch)
  std::map<Case, std::map<Column, std::string>> errors;
  bool any = false;
  for (const store::SampleRecord& x : r.samples) {
    const store::WorkloadRecord* w = r.Workload(x.run);
    const store::SessionRecord* s = r.Session(x.session);
    if (w == nullptr || s == nullptr || w->warmup || (!x.draft.counted && !x.draft.error)) continue;
    // Every sample of a batch carries the batch's delta: count it once.
    if (!seen.insert({x.session, x.run, x.batch}).second) continue;
    const Case key{x.workload, w->kind == store::WorkloadKind::kMixed ? "mixed" : x.case_id};
    if (!sums.contains(key)) order.push_back(key);
    if (x.draft.error) {
      errors[key].try_emplace({s->layout, s->arm}, fmt::format("session {} batch {}: {}", s->order_index + 1, x.batch, *x.draft.error));
      sums[key].try_emplace({s->layout, s->arm});
      any = true;
      continue;
    }
    Sums& t = sums[key][{s->layout, s->arm}];
    t.accepted += x.draft.accepted_drafts;
    t.verified += x.draft.verified_drafts;
    t.rounds += x.draft.request_rounds;
    any = any || x.draft.verified_drafts > 0;
  }
  std::vector<DraftCounterSums> out;
  if (!any) return out;
  for (const Case& key : order) {
    DraftCounterSums row{key.first, key.second, {}, errors[key]};
    for (const auto& [column, t] : sums[key]) {
      if (row.errors.contains(column) || t.accepted < 0 || t.verified < 0 || t.rounds < 0) continue;
      row.by_layout_arm[column] = {static_cast<std::uint64_t>(t.accepted), static_cast<std::uint64_t>(t.verified),
                                   static_cast<std::uint64_t>(t.rounds)};
    }
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace tandem::reports
