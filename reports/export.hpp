#pragma once

#include <ostream>
#include <string>

#include "store/campaign_record.hpp"

// `tandem export`: a campaign's raw samples or its session scores as CSV (RFC 4180,
// one header row) or JSON (an array of objects with the same fields).
namespace tandem::reports {

enum class ExportFormat { kCsv, kJson };
enum class ExportTable { kSamples, kScores };

void Export(const store::CampaignRecord& record, ExportTable table, ExportFormat format, std::ostream& out);

}  // namespace tandem::reports
