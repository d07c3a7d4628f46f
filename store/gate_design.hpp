#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "store/family_id.hpp"

namespace tandem::store {

// A campaign's gate as designed: its `gate:` section (the defaults of `tandem gate`, whose
// flags override them) and what its session plan adds (looks, block, sequential stopping).
// Stored as JSON in `campaign.gate_json`; FromJson and ToJson are its one reading and
// writing, and the defaults below are the only ones.
struct GateDesign {
  // Read up to this version; a store without one is read as 1. Written as 1 unless a
  // gated family is named by its id (2).
  static constexpr int kVersion = 2;
  enum class Rule { kNoninferior, kProven };
  enum class Method { kWelch, kPaired };  // how sessions are compared (`sessions: paired`)
  struct Extension {                      // `tandem run --extend`: sessions per layout before and after
    int from = 0, to = 0;
    bool operator==(const Extension&) const = default;
  };

  std::string baseline, candidate;       // arm labels; empty: the campaign's first and second arm
  std::vector<FamilySelector> families;  // gated; empty: every decode-rate family both arms measured (latency only when named)
  double max_regression = 0.03;          // the candidate may be this much slower (T = 1 − it)
  Rule rule = Rule::kNoninferior;        // kProven: fail only on a proven regression
  bool require_identical_greedy = false;
  double alpha = 0.025;  // one-sided level of each test (the 95% interval's two sides)
  // Sessions per layout after which the gate looks; empty: once, after every session.
  std::vector<int> looks;
  int block = 4;            // sessions per block of the plan (a pattern's length)
  bool sequential = false;  // a layout stops once its gated families are decided
  // `sessions: precision` (0: none): a sequential layout also waits for every gated
  // family's interval to lie within ±precision of its ratio.
  double precision = 0;
  Method method = Method::kWelch;
  std::vector<Extension> extended;

  bool operator==(const GateDesign&) const = default;

  // Empty text is the default design. `where` names the text in errors (e.g. "results/x.db: campaign 1: gate_json"): an
  // invalid document, an unknown key, a value of the wrong type or outside its range, or a
  // version newer than kVersion throws InputError saying which.
  static GateDesign FromJson(const std::string& text, const std::string& where);
  std::string ToJson() const;  // every field, with the version
};

// One entry of `families`, from its JSON: a label (a string) or an id (an object with
// workload, metric and optionally case, level, context, sampling). Errors name `where`.
FamilySelector ReadSelector(const nlohmann::json& family, const std::string& where);
nlohmann::json SelectorJson(const FamilyId& id);

}  // namespace tandem::store
