#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "store/campaign_record.hpp"

namespace tandem::reports {

struct Plot {
  std::string title;
  std::filesystem::path file;  // the SVG
};

struct PlotSet {
  std::vector<Plot> plots;
  std::string note;  // why some or all plots are missing; empty when none are
};

// SVG plots drawn by gnuplot into `dir` (created): per layout, every family's session
// scores by arm relative to the baseline's geometric mean with the candidates' 95%
// intervals, and the concurrency scaling (median aggregate tok/s per level). The
// gnuplot scripts are kept beside the SVGs. `gnuplot`: the program to run; when it
// cannot be found, no plot is drawn and `note` says so.
PlotSet DrawPlots(const store::CampaignRecord& record, const std::filesystem::path& dir, const std::string& gnuplot = "gnuplot");

}  // namespace tandem::reports
