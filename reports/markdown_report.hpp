#pragma once

#include <filesystem>
#include <string>

#include "reports/plots.hpp"
#include "store/campaign_record.hpp"

// `tandem report`: the release document of one campaign, in markdown. Every figure is
// recomputed from the stored samples; a value the campaign did not produce is "—",
// and a section appears only when the campaign measured what it shows.
namespace tandem::reports {

struct ReportOptions {
  // Where the markdown will be written: plot links are made relative to it.
  std::filesystem::path markdown_dir;
  // Plots to link (DrawPlots), and its note; an empty set with an empty note prints
  // how to get plots.
  PlotSet plots;
  bool plots_requested = false;
};

std::string RenderReport(const store::CampaignRecord& record, const ReportOptions& options);

}  // namespace tandem::reports
