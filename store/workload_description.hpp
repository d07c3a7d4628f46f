#pragma once

#include <string>

#include "store/campaign_record.hpp"

namespace tandem::store {

// One line saying what a workload does, from its settings as stored (the `spec_json` the
// harness writes for each workload run, read by ReadWorkloadSettings): "`battery` (battery): every weighted case;
// ...; nonce seed 7". The report's protocol section and `tandem run --dry-run` print it.
std::string DescribeWorkload(const std::string& name, WorkloadKind kind, const WorkloadSettings& settings);

}  // namespace tandem::store
