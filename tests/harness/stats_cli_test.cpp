// Runs the real `tandem` executable: output formats and exit codes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_command.hpp"

namespace tandem::harness {
namespace {

using tandem::testing::CommandResult;
using tandem::testing::RunCommand;

CommandResult Tandem(const std::vector<std::string>& args) {
  CommandResult r = RunCommand(TANDEM_BIN, args);
  EXPECT_FALSE(r.timed_out);
  return r;
}

TEST(StatsCli, CompareJsonHasEveryKey) {
  const CommandResult r = Tandem({"stats", "compare", "--baseline", "100,102,98,101", "--candidate", "105,107,104,106", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"ratio", "lo", "hi", "df", "t", "p", "n_baseline", "n_candidate", "method", "level", "excludes_one"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["method"], "welch");
  EXPECT_EQ(j["level"], 0.95);
  EXPECT_EQ(j["n_baseline"], 4);
  EXPECT_EQ(j["excludes_one"], true);
  EXPECT_NEAR(j["ratio"].get<double>(), 1.0524250217264397, 1e-12);
}

TEST(StatsCli, ComparePairedAtAnotherLevel) {
  const CommandResult r = Tandem({"stats", "compare", "--baseline", "100,102,98,101", "--candidate", "105,107,104,106", "--method",
                                  "paired", "--level", "0.99", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["method"], "paired");
  EXPECT_EQ(j["df"], 3.0);
  EXPECT_EQ(j["level"], 0.99);
}

TEST(StatsCli, CompareTextNamesEveryFigure) {
  const CommandResult r = Tandem({"stats", "compare", "--baseline", "1,1.1,0.9", "--candidate", "1.05,0.95,1.0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* word : {"ratio", "interval", "df", "t ", "p ", "baseline 3, candidate 3", "includes 1"}) {
    EXPECT_NE(r.out.find(word), std::string::npos) << word << " in\n" << r.out;
  }
}

TEST(StatsCli, BadInputExitsTwoWithAMessage) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"stats", "compare", "--baseline", "1", "--candidate", "1,2"}, "baseline: needs at least 2 values, got 1"},
      {{"stats", "compare", "--baseline", "1,2", "--candidate", "1,-2"}, "candidate: value -2 (index 1) is not positive"},
      {{"stats", "compare", "--baseline", "1,nan", "--candidate", "1,2"}, "baseline: value nan (index 1) is not finite"},
      {{"stats", "compare", "--baseline", "1,x", "--candidate", "1,2"}, "--baseline"},
      {{"stats", "compare", "--baseline", "1,2", "--candidate", "1,2", "--level", "1.5"}, "level: 1.5"},
      {{"stats", "compare", "--baseline", "1,2", "--candidate", "1,2", "--method", "bayes"}, "--method"},
      {{"stats", "compare", "--baseline", "1,2,3", "--candidate", "1,2", "--method", "paired"}, "pairing needs the same number"},
      {{"stats", "compare", "--baseline", "1,2"}, "--candidate"},
      {{"stats", "weighted", "--samples", "/nonexistent.json"}, "/nonexistent.json: cannot open"},
      {{"stats"}, "subcommand"},
  };
  for (const auto& [args, message] : cases) {
    const CommandResult r = Tandem(args);
    EXPECT_EQ(r.exit_code, 2) << args.back();
    EXPECT_NE(r.err.find(message), std::string::npos) << "stderr: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(StatsCli, WeightedReproducesTheHandCheckedBattery) {
  const CommandResult r = Tandem({"stats", "weighted", "--samples", TANDEM_SOURCE_DIR "/docs/examples/battery-samples.json", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["repeats"].size(), 3u);
  const double want[] = {104.52, 104.69, 107.81};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(j["repeats"][i]["repeat"], i);
    EXPECT_EQ(j["repeats"][i]["requests"], 4);
    EXPECT_NEAR(j["repeats"][i]["weighted_decode"].get<double>(), want[i], 1e-9);
  }
  EXPECT_NEAR(j["median"].get<double>(), 104.69, 1e-9);

  const CommandResult text = Tandem({"stats", "weighted", "--samples", TANDEM_SOURCE_DIR "/docs/examples/battery-samples.json"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("median of 3 repeats: 104.69 tok/s"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace tandem::harness
