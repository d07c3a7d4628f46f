// Latency families from recorded request timings, against the percentiles numpy computed from
// the same samples (tests/store/golden/make_latency_scores_golden.py): every family, every
// session's score, and the sessions where a percentile had too few requests behind it.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "store/session_scores.hpp"
#include "store/store.hpp"
#include "tests/support/fixture_store.hpp"

namespace tandem::store {
namespace {

using nlohmann::json;

std::filesystem::path TempFile() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto path =
      std::filesystem::temp_directory_path() / (std::string("tandem-") + info->test_suite_name() + "-" + info->name() + ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
  return path;
}

json Golden() {
  std::ifstream in(TANDEM_LATENCY_SCORES_GOLDEN);
  return json::parse(in);
}

TEST(LatencyScores, MatchTheIndependentComputation) {
  const json golden = Golden();
  const auto file = TempFile();
  const std::int64_t campaign = testing::WriteFixtureStore(golden, file);
  const Store store = Store::Open(file);
  std::map<std::string, const FamilyScores*> latency;
  const std::vector<FamilyScores> got = ComputeSessionScores(store, campaign);
  for (const FamilyScores& f : got) {
    if (IsLatency(f.metric)) latency[f.family] = &f;
  }
  ASSERT_EQ(latency.size(), golden["expected"].size());
  for (const json& e : golden["expected"]) {
    const std::string family = e["family"];
    ASSERT_TRUE(latency.contains(family)) << family;
    const FamilyScores& f = *latency[family];
    EXPECT_EQ(f.direction, Direction::kLowerIsBetter) << family;
    EXPECT_EQ(f.by_arm.size(), e["by_arm"].size()) << family;
    for (const auto& [arm, values] : e["by_arm"].items()) {
      ASSERT_TRUE(f.by_arm.contains(arm)) << family << " " << arm;
      ASSERT_EQ(f.by_arm.at(arm).size(), values.size()) << family << " " << arm;
      for (std::size_t i = 0; i < values.size(); ++i) {
        const double want = values[i].get<double>();
        EXPECT_NEAR(f.by_arm.at(arm)[i], want, 1e-12 * want) << family << " " << arm << " session " << i;
      }
    }
    std::map<std::string, int> unestimable;
    for (const auto& [arm, n] : e["not_estimable"].items()) unestimable[arm] = n.get<int>();
    EXPECT_EQ(f.not_estimable_by_arm, unestimable) << family;
  }
  // The rates are untouched: every decode family is still there, and no latency family is a rate.
  EXPECT_TRUE(std::any_of(got.begin(), got.end(), [](const FamilyScores& f) { return f.family == "battery: weighted decode"; }));
  std::filesystem::remove(file);
}

TEST(LatencyScores, AWorkloadThatListsNoneScoresNone) {
  json golden = Golden();
  for (json& s : golden["sessions"]) {
    for (json& w : s["workloads"]) w["spec"]["latency"] = json::array();
  }
  const auto file = TempFile();
  const std::int64_t campaign = testing::WriteFixtureStore(golden, file);
  for (const FamilyScores& f : ComputeSessionScores(Store::Open(file), campaign)) EXPECT_FALSE(IsLatency(f.metric)) << f.family;
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace tandem::store
