#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "store/campaign_record.hpp"

// The JSON columns of a store read into the campaign record's typed fields, and the
// sample's back into JSON for exports. Stores written by older harnesses lack keys: a
// missing key reads as its default; a key of the wrong type is an InputError naming
// `where` (the store, table and row) and the key.
namespace tandem::store {

ArmLaunch ReadArmLaunch(const nlohmann::json& launch, const std::string& where);
void ReadLayoutSpec(const nlohmann::json& spec, LayoutRecord& layout, const std::string& where);
HostFacts ReadHostFacts(const nlohmann::json& facts, const std::string& where);
WorkloadSettings ReadWorkloadSettings(const nlohmann::json& spec, const std::string& where);
// The round-time prediction sums of a /v1/stats body; none when the server reports none.
std::optional<PredictionSums> ReadPredictionSums(const nlohmann::json& stats);
std::map<std::string, bool> ReadChecks(const nlohmann::json& checks, const std::string& where);
std::optional<TokenCountMismatch> ReadTokenCountMismatch(const nlohmann::json& flags, const std::string& where);
DraftCounts ReadDraftCounts(const nlohmann::json& draft, const std::string& where);

// As the harness stores them (the exports' checks, flags and draft columns).
nlohmann::json ChecksJson(const SampleRecord& sample);
nlohmann::json FlagsJson(const SampleRecord& sample);
nlohmann::json DraftJson(const DraftCounts& draft);

}  // namespace tandem::store
