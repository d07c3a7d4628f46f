#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "stats/decode_metrics.hpp"
#include "store/campaign_record.hpp"

namespace tandem::reports {

// The /v1/stats draft counters of one (workload, case), summed per (layout, arm) over
// the distinct batches of the measured workloads: what the report's draft acceptance
// table shows (stats::DraftRatesOf turns each sum into its rates).
struct DraftCounterSums {
  std::string workload, case_id;  // case "mixed" for a mixed batch
  // (layout, arm) → the counters' deltas summed over that column's batches.
  std::map<std::pair<std::string, std::string>, stats::DraftCounters> by_layout_arm;
  // (layout, arm) → why the column has no figure: a batch whose counters went backwards
  // (stats::DraftCountersBetween refused them), named by session and batch.
  std::map<std::pair<std::string, std::string>, std::string> errors;
};

// In the order the cases first appear; empty when no draft was verified anywhere.
std::vector<DraftCounterSums> SumDraftCounters(const store::CampaignRecord& r);

}  // namespace tandem::reports
