#pragma once

#include <nlohmann/json.hpp>

#include "harness/campaign/campaign.hpp"

// The forms in which the store keeps a campaign's definitions: workload_run.spec_json
// (what store::DescribeWorkload and the session scores read back) and layout.spec_json
// (what the report's protocol section shows). docs/store-schema.md lists the keys.
namespace tandem::harness {

nlohmann::json WorkloadSpecJson(const WorkloadSpec& w);
nlohmann::json LayoutSpecJson(const LayoutSpec& l);

}  // namespace tandem::harness
