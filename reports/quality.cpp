#include "reports/quality.hpp"

#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "reports/host_hardware.hpp"

namespace tandem::reports {

using store::CampaignRecord;
using store::SampleRecord;
using store::SessionRecord;
using store::WorkloadRecord;

namespace {

// Sample ids as "#12, #13, … (+N more)" for messages.
std::string Ids(const std::vector<std::int64_t>& ids, std::size_t most = 8) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < ids.size() && i < most; ++i) parts.push_back(fmt::format("#{}", ids[i]));
  std::string out = fmt::format("{}", fmt::join(parts, ", "));
  if (ids.size() > most) out += fmt::format(" (+{} more)", ids.size() - most);
  return out;
}

bool Greedy(const WorkloadRecord& w) { return w.settings.greedy; }

}  // namespace

bool IsContentCheck(const std::string& check) {
  return check != "stream_complete" && check != "usage_consistent" && check != "cache_bound" && check != "greedy_match";
}

bool GreedyPrompt::AllAgree() const {
  std::set<std::string> shas;
  for (const auto& [arm, by_sha] : outputs) {
    for (const auto& [sha, ids] : by_sha) shas.insert(sha);
  }
  return shas.size() <= 1;
}

bool GreedyPrompt::Differs(const std::string& baseline, const std::string& candidate) const {
  const auto a = outputs.find(baseline), b = outputs.find(candidate);
  if (a == outputs.end() || b == outputs.end()) return false;
  if (a->second.size() != 1) return false;  // the baseline disagrees with itself: not the candidate's doing
  for (const auto& [sha, ids] : b->second) {
    if (sha != a->second.begin()->first) return true;
  }
  return false;
}

std::vector<std::int64_t> GreedyPrompt::SampleIds() const {
  std::vector<std::int64_t> ids;
  for (const auto& [arm, by_sha] : outputs) {
    for (const auto& [sha, list] : by_sha) ids.insert(ids.end(), list.begin(), list.end());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<GreedyPrompt> GreedyPrompts(const CampaignRecord& r) {
  using Key = std::tuple<std::string, std::string, std::string, int, int, int, std::string>;
  std::map<Key, std::size_t> index;
  std::vector<GreedyPrompt> out;
  for (const SampleRecord& x : r.samples) {
    const WorkloadRecord* w = r.Workload(x.run);
    const SessionRecord* s = r.Session(x.session);
    if (w == nullptr || s == nullptr || w->warmup || !Greedy(*w) || !x.valid || s->status != store::SessionStatus::kComplete) continue;
    const Key key{s->layout, x.workload, x.case_id, x.repeat, x.batch, x.slot, x.nonce};
    auto [it, fresh] = index.try_emplace(key, out.size());
    if (fresh) out.push_back({s->layout, x.workload, x.case_id, x.nonce, x.repeat, x.batch, x.slot, {}});
    out[it->second].outputs[s->arm][x.content_sha256].push_back(x.id);
  }
  return out;
}

bool Truncated(const SampleRecord& sample) { return sample.finish_reason == "length"; }

Quality AssessQuality(const CampaignRecord& r) {
  Quality q;
  for (const SampleRecord& x : r.samples) {
    const WorkloadRecord* w = r.Workload(x.run);
    const SessionRecord* s = r.Session(x.session);
    if (w == nullptr || s == nullptr) continue;
    if (x.token_count_mismatch) q.token_flags[s->arm].push_back(x.id);
    if (x.passed || x.role == "retry") continue;  // a prefill try sent again fails nothing
    if (w->warmup) {
      q.failed_warmup[s->arm].push_back(x.id);
      continue;
    }
    for (const auto& [check, ok] : x.checks) {
      if (ok) continue;
      (IsContentCheck(check) && Truncated(x) ? q.truncated_checks : q.failed_checks)[check][s->arm].push_back(x.id);
    }
  }
  for (const SessionRecord& s : r.sessions) {
    if (s.status == store::SessionStatus::kFailed) q.failed_sessions.push_back(&s);
    if (s.status == store::SessionStatus::kPlanned || s.status == store::SessionStatus::kRunning) q.unfinished_sessions.push_back(&s);
    if (s.attempts > 1) q.retried_sessions.push_back(&s);
    if (s.host.load_warning) q.loaded_sessions.push_back(&s);
  }
  return q;
}

namespace {

// A measured sample of a completed session: what the pair's checks read.
const SessionRecord* MeasuredSession(const CampaignRecord& r, const SampleRecord& x) {
  const WorkloadRecord* w = r.Workload(x.run);
  const SessionRecord* s = r.Session(x.session);
  if (w == nullptr || s == nullptr || w->warmup || s->status != store::SessionStatus::kComplete) return nullptr;
  return s;
}

// A failed session of the candidate fails the pair; one of the baseline, or one unfinished, is a doubt.
void CheckSessions(const CampaignRecord& r, const std::string& baseline, const std::string& candidate, PairQuality& out) {
  for (const SessionRecord& s : r.sessions) {
    if (s.arm != baseline && s.arm != candidate) continue;
    const std::string who = fmt::format("session {} ({}, {})", s.order_index + 1, s.layout, s.arm);
    if (s.status == store::SessionStatus::kFailed) {
      (s.arm == candidate ? out.failures : out.doubts).push_back(fmt::format("{} failed: {}", who, s.reason));
    } else if (s.status != store::SessionStatus::kComplete &&
               s.status != store::SessionStatus::kSkipped) {  // skipped: a sequential layout was decided
      out.doubts.push_back(fmt::format("{} never completed (status {}): resume the campaign", who, ToString(s.status)));
    }
  }
}

// Integrity: every measured candidate sample must be usable.
void CheckIntegrity(const CampaignRecord& r, const std::string& candidate, PairQuality& out) {
  std::map<std::string, std::vector<std::int64_t>> invalid;  // failed integrity check → ids
  for (const SampleRecord& x : r.samples) {
    const SessionRecord* s = MeasuredSession(r, x);
    // Not usable, and not a failure: a prefill try sent again; a sample whose server reports no
    // cached tokens (the report says unverified).
    if (s == nullptr || s->arm != candidate || x.valid || x.role == "retry" || x.unverified) continue;
    for (const char* check : {"stream_complete", "usage_consistent", "cache_bound"}) {
      if (x.checks.contains(check) && !x.checks.at(check)) invalid[check].push_back(x.id);
    }
    if (!x.checks.contains("stream_complete")) invalid["stream_complete"].push_back(x.id);
  }
  for (const auto& [check, ids] : invalid) {
    out.failures.push_back(fmt::format("{} candidate sample{} failed {}: {}", ids.size(), ids.size() == 1 ? "" : "s", check, Ids(ids)));
  }
}

// Greedy output. Within each arm it must be deterministic (the same prompt, the same text in
// every session); across arms a difference is reported, and fails the gate only when the
// campaign requires identical output (another runtime may legitimately differ).
void CheckGreedyOutput(const CampaignRecord& r, const std::string& baseline, const std::string& candidate, PairQuality& out) {
  std::vector<const GreedyPrompt*> changed;
  std::size_t changed_samples = 0;
  std::map<std::string, int> inconsistent;  // arm → prompts it answered differently in different sessions
  const std::vector<GreedyPrompt> prompts = GreedyPrompts(r);
  for (const GreedyPrompt& p : prompts) {
    if (p.Differs(baseline, candidate)) {
      changed.push_back(&p);
      for (const auto& [sha, ids] : p.outputs.at(candidate)) {
        if (sha != p.outputs.at(baseline).begin()->first) changed_samples += ids.size();
      }
    }
    for (const std::string& arm : {baseline, candidate}) {
      const auto a = p.outputs.find(arm);
      if (a != p.outputs.end() && a->second.size() > 1) ++inconsistent[arm];
    }
  }
  if (!changed.empty() && r.gate.require_identical_greedy) {
    std::vector<std::string> first;
    for (std::size_t i = 0; i < changed.size() && i < 5; ++i) {
      const GreedyPrompt& p = *changed[i];
      std::vector<std::int64_t> ids;
      for (const auto& [sha, group] : p.outputs.at(candidate)) ids.insert(ids.end(), group.begin(), group.end());
      std::sort(ids.begin(), ids.end());
      first.push_back(fmt::format("{} {} {} repeat {} (candidate {})", p.layout, p.workload, p.case_id, p.repeat, Ids(ids)));
    }
    out.failures.push_back(fmt::format(
        "greedy output differs from the baseline's (gate.require_identical_greedy) on {} prompt{} ({} candidate sample{}); first: {}",
        changed.size(), changed.size() == 1 ? "" : "s", changed_samples, changed_samples == 1 ? "" : "s", fmt::join(first, "; ")));
  }
  for (const auto& [arm, count] : inconsistent) {
    out.doubts.push_back(fmt::format("the {}'s greedy output varies between its own sessions for {} prompt{} (not deterministic)",
                                     arm == baseline ? "baseline" : "candidate", count, count == 1 ? "" : "s"));
  }
}

// Content checks of greedy workloads: the candidate may not fail more often.
void CheckContent(const CampaignRecord& r, const std::string& baseline, const std::string& candidate, PairQuality& out) {
  std::map<std::string, std::pair<int, int>> content;  // check → (baseline failures, candidate failures)
  std::map<std::string, std::vector<std::int64_t>> candidate_failed;
  for (const SampleRecord& x : r.samples) {
    const SessionRecord* s = MeasuredSession(r, x);
    if (s == nullptr || !Greedy(*r.Workload(x.run)) || !x.valid) continue;
    if ((s->arm != baseline && s->arm != candidate) || Truncated(x)) continue;  // a cut-short answer is not judged
    for (const auto& [check, ok] : x.checks) {
      if (!IsContentCheck(check) || ok) continue;
      (s->arm == baseline ? content[check].first : content[check].second) += 1;
      if (s->arm == candidate) candidate_failed[check].push_back(x.id);
    }
  }
  // Compare rates, not counts: the arms may have different numbers of sessions.
  std::map<std::string, int> sessions;
  for (const SessionRecord& s : r.sessions) sessions[s.arm] += s.status == store::SessionStatus::kComplete ? 1 : 0;
  for (const auto& [check, counts] : content) {
    const double base = sessions[baseline] > 0 ? static_cast<double>(counts.first) / sessions[baseline] : 0;
    const double cand = sessions[candidate] > 0 ? static_cast<double>(counts.second) / sessions[candidate] : 0;
    if (cand > base) {
      out.failures.push_back(
          fmt::format("content check {} fails more often in the candidate's greedy samples ({:.2f} vs {:.2f} per session): {}", check, cand,
                      base, Ids(candidate_failed[check])));
    }
  }
}

}  // namespace

PairQuality AssessPair(const CampaignRecord& r, const std::string& baseline, const std::string& candidate) {
  PairQuality out;
  CheckSessions(r, baseline, candidate, out);
  for (std::string& doubt : LopsidedHardware(AssessHardware(r), baseline, candidate)) out.doubts.push_back(std::move(doubt));
  CheckIntegrity(r, candidate, out);
  CheckGreedyOutput(r, baseline, candidate, out);
  CheckContent(r, baseline, candidate, out);
  return out;
}

}  // namespace tandem::reports
