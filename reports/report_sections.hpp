#pragma once

#include <functional>
#include <string>
#include <vector>

#include "reports/markdown.hpp"
#include "reports/markdown_report.hpp"
#include "store/campaign_record.hpp"

// The sections of the release report (private to reports/), in the order RenderReport
// writes them. A section writes nothing when the campaign measured nothing it shows.
namespace tandem::reports::sections {

// One column per layout and arm, headed "layout · arm" (the arm alone with one layout).
struct Column {
  std::string layout, arm, head;
};
std::vector<Column> LayoutArmColumns(const store::CampaignRecord& r);

// What the campaign was (report_setup.cpp).
void Title(const store::CampaignRecord& r, MarkdownDoc& d);
void Arms(const store::CampaignRecord& r, MarkdownDoc& d);
void Host(const store::CampaignRecord& r, MarkdownDoc& d);
void Protocol(const store::CampaignRecord& r, MarkdownDoc& d);

// What it measured (report_results.cpp).
void AbTables(const store::CampaignRecord& r, MarkdownDoc& d);
// With two arms and the two mixed arms that swap their sides: the 2×2 table.
void MixedPairs(const store::CampaignRecord& r, MarkdownDoc& d);
void GreedyAgreement(const store::CampaignRecord& r, MarkdownDoc& d);
void Headline(const store::CampaignRecord& r, MarkdownDoc& d);
void ContentTypes(const store::CampaignRecord& r, MarkdownDoc& d);
// TTFT and inter-token latency per case (report_latency.cpp).
void Latency(const store::CampaignRecord& r, MarkdownDoc& d);
// Each launch's phases, and memory once ready (report_startup.cpp).
void Startup(const store::CampaignRecord& r, MarkdownDoc& d);
void Memory(const store::CampaignRecord& r, MarkdownDoc& d);
// nvidia-smi through each session, and breaches of `conditions:` (report_conditions.cpp).
void GpuConditions(const store::CampaignRecord& r, MarkdownDoc& d);
// For each arm after the first: a "### A/B: … , WHAT (lower is better; …)" table of the
// families `pick` selects (all of `direction`), a row per label and a column per layout,
// then `note` (report_directed_ab.cpp).
void DirectedAbTables(const store::CampaignRecord& r, MarkdownDoc& d, const std::function<bool(const store::FamilyScores&)>& pick,
                      const std::string& what, const std::string& note, store::Direction direction = store::Direction::kLowerIsBetter);
// The prefill matrix: base rows × new-token columns per workload, layout and arm, then its A/B (report_prefill.cpp).
void Prefill(const store::CampaignRecord& r, MarkdownDoc& d);
void DraftAcceptance(const store::CampaignRecord& r, MarkdownDoc& d);
// The draft policy's round-time prediction error per workload (report_prediction.cpp).
void PredictionError(const store::CampaignRecord& r, MarkdownDoc& d);
void Concurrency(const store::CampaignRecord& r, MarkdownDoc& d);
void Retained(const store::CampaignRecord& r, MarkdownDoc& d);

// How far to trust it (report_quality.cpp).
void QualitySection(const store::CampaignRecord& r, MarkdownDoc& d);
void NoiseAndPower(const store::CampaignRecord& r, MarkdownDoc& d);
void Plots(const ReportOptions& o, MarkdownDoc& d);
void Appendix(const store::CampaignRecord& r, MarkdownDoc& d);

}  // namespace tandem::reports::sections
