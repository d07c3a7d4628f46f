// The gate design as the store keeps it (store/gate_design): every field round-trips, a
// design as stores written before it was typed (no version) reads the same, and bad stored
// values are refused naming where and what.
#include "store/gate_design.hpp"

#include <string>

#include <gtest/gtest.h>

#include "common/input_error.hpp"

namespace tandem::store {
namespace {

std::string Refusal(const std::string& text) {
  try {
    GateDesign::FromJson(text, "x.db: campaign 1: gate_json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(GateDesign, EveryFieldRoundTrips) {
  GateDesign d;
  d.baseline = "v13";
  d.candidate = "v14";
  d.families = {{"battery: weighted decode", std::nullopt}, {"code: C16", std::nullopt}};
  d.max_regression = 0.05;
  d.rule = GateDesign::Rule::kProven;
  d.require_identical_greedy = true;
  d.alpha = 0.01;
  d.looks = {4, 8, 12};
  d.block = 2;
  d.sequential = true;
  d.precision = 0.02;
  d.method = GateDesign::Method::kPaired;
  d.extended = {{8, 12}};
  EXPECT_EQ(GateDesign::FromJson(d.ToJson(), "here"), d);
  EXPECT_EQ(GateDesign::FromJson(GateDesign{}.ToJson(), "here"), GateDesign{});
  EXPECT_NE(d.ToJson().find("\"version\":1"), std::string::npos) << d.ToJson();
}

// A family named by its id round-trips, and the design then says version 2 (a version 1
// reader would misread it); a malformed id is refused naming what is wrong.
TEST(GateDesign, AFamilyNamedByItsIdRoundTripsAsVersion2) {
  GateDesign d;
  FamilyId id{.workload = "code-sweep", .metric = FamilyMetric::kAggregate, .case_id = "code", .level = 4, .greedy = true};
  d.families = {{"battery: weighted decode", std::nullopt}, {"", id}};
  EXPECT_EQ(GateDesign::FromJson(d.ToJson(), "here"), d);
  EXPECT_NE(d.ToJson().find("\"version\":2"), std::string::npos) << d.ToJson();
  EXPECT_NE(d.ToJson().find(R"({"case":"code","level":4,"metric":"aggregate","sampling":"greedy","workload":"code-sweep"})"),
            std::string::npos)
      << d.ToJson();
  GateDesign latency;
  latency.families = {{"", FamilyId{.workload = "battery", .metric = FamilyMetric::kTtft, .percentile = 99}}};
  EXPECT_EQ(GateDesign::FromJson(latency.ToJson(), "here"), latency);
  EXPECT_NE(latency.ToJson().find(R"({"metric":"ttft","percentile":99,"workload":"battery"})"), std::string::npos) << latency.ToJson();
  GateDesign prefill;
  prefill.families = {{"", FamilyId{.workload = "prefill", .metric = FamilyMetric::kPrefill, .context = 1024, .new_tokens = 512}}};
  EXPECT_EQ(GateDesign::FromJson(prefill.ToJson(), "here"), prefill);
  EXPECT_NE(prefill.ToJson().find(R"({"context":1024,"metric":"prefill","new_tokens":512,"workload":"prefill"})"), std::string::npos)
      << prefill.ToJson();
  EXPECT_EQ(Refusal(R"({"families":[{"workload":"w","metric":"speed"}]})"),
            "x.db: campaign 1: gate_json: families: metric 'speed' is not one this Tandem knows (weighted, case, aggregate, retained, "
            "pooled_cases, pooled_levels, ttft, itl, tpot, e2e, startup, memory, prefill, pooled_prefill); a newer Tandem wrote it?");
  EXPECT_EQ(Refusal(R"({"families":[{"workload":"w"}]})"),
            R"(x.db: campaign 1: gate_json: families: a family's id {"workload":"w"} needs workload and metric)");
  EXPECT_EQ(Refusal(R"({"families":[{"workload":"w","metric":"case","colour":"red"}]})"),
            "x.db: campaign 1: gate_json: families: unknown key 'colour' in a family's id (known: workload, metric, case, level, "
            "context, new_tokens, percentile, sampling)");
  EXPECT_EQ(Refusal(R"({"version":3})"),
            "x.db: campaign 1: gate_json: gate design version 3; this Tandem reads up to 2 (a newer Tandem wrote it?)");
}

// What the harness stored before the design was typed (keys sorted as nlohmann wrote them).
TEST(GateDesign, ADesignWithoutAVersionReadsAsStoredBefore) {
  const GateDesign d = GateDesign::FromJson(
      R"({"baseline":"a","block":4,"candidate":"b","extended":[{"from":8,"to":12}],"families":["battery: code"],"looks":[4,8,12],)"
      R"("max_regression":0.05,"method":"paired","precision":0.03,"require_identical_greedy":true,"rule":"proven","sequential":true})",
      "old");
  EXPECT_EQ(d.baseline, "a");
  EXPECT_EQ(d.candidate, "b");
  EXPECT_EQ(d.families, (std::vector<FamilySelector>{{"battery: code", std::nullopt}}));
  EXPECT_EQ(d.looks, (std::vector<int>{4, 8, 12}));
  EXPECT_EQ(d.block, 4);
  EXPECT_TRUE(d.sequential);
  EXPECT_DOUBLE_EQ(d.max_regression, 0.05);
  EXPECT_DOUBLE_EQ(d.precision, 0.03);
  EXPECT_EQ(d.rule, GateDesign::Rule::kProven);
  EXPECT_EQ(d.method, GateDesign::Method::kPaired);
  EXPECT_TRUE(d.require_identical_greedy);
  EXPECT_EQ(d.extended, (std::vector<GateDesign::Extension>{{8, 12}}));
  // The defaults: nothing stored, or only a gate section's keys.
  EXPECT_EQ(GateDesign::FromJson("", "none"), GateDesign{});
  EXPECT_EQ(GateDesign::FromJson("{}", "none"), GateDesign{});
  const GateDesign partial = GateDesign::FromJson(R"({"baseline":"v13","candidate":"v14","max_regression":0.03,"rule":"proven"})", "p");
  EXPECT_EQ(partial.block, 4);
  EXPECT_FALSE(partial.sequential);
  EXPECT_EQ(partial.method, GateDesign::Method::kWelch);
  EXPECT_DOUBLE_EQ(partial.alpha, 0.025);
}

TEST(GateDesign, BadStoredValuesAreRefusedNamingWhereAndWhat) {
  EXPECT_EQ(Refusal("[1]"), "x.db: campaign 1: gate_json: not a JSON object: [1]");
  EXPECT_EQ(Refusal(R"({"rule":"maybe"})"), "x.db: campaign 1: gate_json: rule 'maybe' is neither 'noninferior' nor 'proven'");
  EXPECT_EQ(Refusal(R"({"looks":"4,8"})"), R"(x.db: campaign 1: gate_json: 'looks' is "4,8", not what a gate design holds there)");
  EXPECT_EQ(Refusal(R"({"max_regression":1.5})"), "x.db: campaign 1: gate_json: max_regression 1.5 is outside [0, 1)");
  EXPECT_EQ(Refusal(R"({"blocks":4})"), "x.db: campaign 1: gate_json: unknown key 'blocks' in the gate design");
  EXPECT_EQ(Refusal(R"({"families":"battery: code"})"), R"(x.db: campaign 1: gate_json: 'families' is "battery: code", not a list)");
  EXPECT_EQ(Refusal(R"({"extended":[{"from":4}]})"), R"(x.db: campaign 1: gate_json: an 'extended' entry {"from":4} lacks from and to)");
}

}  // namespace
}  // namespace tandem::store
