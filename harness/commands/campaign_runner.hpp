#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "harness/campaign/campaign.hpp"

namespace tandem::harness {

struct RunOptions {
  bool dry_run = false;                     // print the resolved plan, run nothing
  bool check_hosts = false;                 // with dry_run: also connect to every host and check its model and images
  bool quiet = false;                       // no progress line (CI)
  std::optional<std::filesystem::path> db;  // overrides the campaign's `store`
  int extend = 0;                           // with resume: this many more sessions per layout
};

// `tandem run`: resolves arms (building git ones), prepares the model, plans the
// sessions, records everything in the store and runs the sessions in order, each
// one launching its arm's processes for its layout from scratch. Returns the exit
// code: 0 when every session completed, 1 when some failed.
int RunCampaign(const Campaign& campaign, const RunOptions& options);

// `tandem run --resume DB`: continues the store's latest campaign at its first
// incomplete session; a session that was running when the harness died is redone
// from scratch, and nothing complete is touched. With `extend`, first adds that many
// sessions per layout (whole blocks) and the gate looks that go with them.
int ResumeCampaign(const std::filesystem::path& db, const RunOptions& options);

}  // namespace tandem::harness
