#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "store/campaign_record.hpp"

// What went wrong or needs disclosing in a campaign, from its samples and sessions:
// the report's quality section and the gate's quality verdict both read this.
namespace tandem::reports {

// One prompt of a greedy workload (the same request in every session that sent it)
// and the outputs each arm produced for it.
struct GreedyPrompt {
  std::string layout, workload, case_id, nonce;
  int repeat = 0, batch = 0, slot = 0;
  // arm → content sha256 → sample ids
  std::map<std::string, std::map<std::string, std::vector<std::int64_t>>> outputs;

  bool AllAgree() const;  // one output over every arm and session
  // Both arms sent it, each arm agrees with itself, and the outputs differ.
  bool Differs(const std::string& baseline, const std::string& candidate) const;
  std::vector<std::int64_t> SampleIds() const;
};

// Valid samples of measured greedy workloads, grouped by prompt, in first-sent order.
std::vector<GreedyPrompt> GreedyPrompts(const store::CampaignRecord& record);

struct Quality {
  // check → arm → failed sample ids (measured workloads); warmup failures apart.
  std::map<std::string, std::map<std::string, std::vector<std::int64_t>>> failed_checks;
  // check → arm → ids of samples whose content check failed on an answer that ended on its
  // token budget (finish_reason length): cut short, so not judged, and never a failure.
  std::map<std::string, std::map<std::string, std::vector<std::int64_t>>> truncated_checks;
  std::map<std::string, std::vector<std::int64_t>> failed_warmup;  // arm → sample ids
  std::map<std::string, std::vector<std::int64_t>> token_flags;    // arm → sample ids with token_count_mismatch
  std::vector<const store::SessionRecord*> failed_sessions, unfinished_sessions, retried_sessions, loaded_sessions;
};

Quality AssessQuality(const store::CampaignRecord& record);

// Whether a stored check judges the text (non_empty, regex, json_fields, counting) rather
// than the sample's integrity (stream_complete, usage_consistent, cache_bound) or its
// agreement with other samples (greedy_match).
bool IsContentCheck(const std::string& check);

// Whether a sample's answer ended on its token budget: its content checks judge a text
// that was cut short, so a failed one is reported as truncated, not as a failure.
bool Truncated(const store::SampleRecord& sample);

// The gate's reading of quality for one pair of arms: `failures` fail the gate (the
// candidate lost or changed something), `doubts` make it inconclusive (the campaign
// cannot tell). Each entry is a sentence naming sessions or sample ids.
struct PairQuality {
  std::vector<std::string> failures;
  std::vector<std::string> doubts;
};

PairQuality AssessPair(const store::CampaignRecord& record, const std::string& baseline, const std::string& candidate);

}  // namespace tandem::reports
