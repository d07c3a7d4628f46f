#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tandem::store {

// One line saying what a workload does, from its stored spec (the `spec_json` the
// harness writes for each workload run): "`battery` (battery): every weighted case;
// ...; nonce seed 7". The report's protocol section and `tandem run --dry-run` print it.
std::string DescribeWorkload(const std::string& name, const std::string& kind, const nlohmann::json& spec);

}  // namespace tandem::store
