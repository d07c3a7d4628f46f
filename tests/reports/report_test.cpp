// The release report rendered from a hand-built store (tests/reports/golden/
// make_report_fixture.py): the whole markdown against the committed golden file, and
// its A/B and headline rows against values computed independently with numpy/scipy.
// Set TANDEM_UPDATE_GOLDEN=1 to rewrite report.md after an intended change, then
// review the diff.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reports/export.hpp"
#include "reports/markdown_report.hpp"
#include "reports/plots.hpp"
#include "reports/quality.hpp"
#include "store/campaign_record.hpp"
#include "store/comparison.hpp"
#include "store/store.hpp"
#include "tests/support/fixture_store.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kGolden = fs::path(TANDEM_REPORTS_GOLDEN_DIR);

json Fixture() {
  std::ifstream in(kGolden / "report_fixture.json");
  EXPECT_TRUE(in) << kGolden / "report_fixture.json";
  return json::parse(in);
}

class Report : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / fmt_name(info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fixture_ = Fixture();
    testing::WriteFixtureStore(fixture_, dir_ / "store.db");
    const store::Store store = store::Store::Open(dir_ / "store.db");
    record_ = LoadCampaignRecord(store, std::nullopt);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string fmt_name(const std::string& test) { return "tandem-report-" + test + "-" + std::to_string(::getpid()); }

  // The report with the (temporary) store path replaced, as the golden file has it.
  std::string Rendered(const ReportOptions& options = {}) const {
    std::string text = RenderReport(record_, options) + "\n";
    const std::string path = (dir_ / "store.db").string();
    for (std::size_t at; (at = text.find(path)) != std::string::npos;) text.replace(at, path.size(), "STORE");
    return text;
  }

  fs::path dir_;
  json fixture_;
  store::CampaignRecord record_;
};

TEST_F(Report, MatchesTheGoldenMarkdownExactly) {
  const std::string text = Rendered();
  const fs::path golden = kGolden / "report.md";
  if (const char* update = std::getenv("TANDEM_UPDATE_GOLDEN"); update != nullptr && std::string(update) == "1") {
    std::ofstream(golden) << text;
    GTEST_SKIP() << "rewrote " << golden;
  }
  std::ifstream in(golden);
  ASSERT_TRUE(in) << golden << " is missing; run with TANDEM_UPDATE_GOLDEN=1";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(text, want.str()) << "the report changed; if intended, rerun with TANDEM_UPDATE_GOLDEN=1 and review the diff";
}

TEST_F(Report, FiguresMatchTheIndependentComputation) {
  const std::string text = Rendered();
  for (const char* table : {"ab_rows", "headline_rows", "ttft_rows", "itl_rows", "content_rows", "concurrency_rows", "mixed_rows",
                            "retained_rows", "acceptance_rows"}) {
    for (const json& row : fixture_["expected"][table]) {
      EXPECT_NE(text.find("\n" + row.get<std::string>() + "\n"), std::string::npos) << table << " row missing:\n" << row.get<std::string>();
    }
  }
}

TEST_F(Report, EverySectionTheCampaignMeasured) {
  const std::string text = Rendered();
  for (const char* section :
       {"## Arms", "## Host", "## Protocol", "## A/B: v14 vs v13", "## Greedy output agreement", "## Headline decode",
        "## Content-type decode", "## Draft acceptance", "## Concurrency scaling", "## Mixed traffic", "## Retained-context decode",
        "## Quality", "## Noise and power", "## Plots", "## Appendix: samples referenced above"}) {
    EXPECT_NE(text.find(std::string("\n") + section + "\n"), std::string::npos) << section;
  }
  // What must be disclosed, with links that resolve to the appendix.
  for (const char* needle : {"reported more cached prompt tokens than the bound", "token", "completed on attempt 2", "61% busy",
                             "1 of 8 sessions", "across arms: "}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  }
  for (std::size_t at = 0; (at = text.find("](#sample-", at)) != std::string::npos; ++at) {
    const std::size_t end = text.find(')', at);
    const std::string anchor = text.substr(at + 3, end - at - 3);
    EXPECT_NE(text.find("<a id=\"" + anchor + "\"></a>"), std::string::npos) << anchor;
  }
}

TEST_F(Report, SectionsAppearOnlyWhenMeasured) {
  // Only a greedy battery, one layout, no drafts: no draft, concurrency, mixed or retained sections.
  json small = fixture_;
  for (json& s : small["sessions"]) {
    json kept = json::array();
    for (const json& w : s["workloads"]) {
      if (w["name"] == "greedy-battery") kept.push_back(w);
    }
    s["workloads"] = kept;
  }
  testing::WriteFixtureStore(small, dir_ / "small.db");
  const store::Store store = store::Store::Open(dir_ / "small.db");
  const std::string text = RenderReport(LoadCampaignRecord(store, std::nullopt), {});
  for (const char* absent : {"## Draft acceptance", "## Concurrency scaling", "## Mixed traffic", "## Retained-context decode"}) {
    EXPECT_EQ(text.find(absent), std::string::npos) << absent;
  }
  EXPECT_NE(text.find("## Headline decode"), std::string::npos);
}

TEST_F(Report, DraftCountersThatWentBackwardsGiveAnErrorNotAPartialFigure) {
  // One code-sweep batch of the candidate in tp4: the server restarted between the reads.
  json broken = fixture_;
  bool changed = false;
  for (json& s : broken["sessions"]) {
    if (changed || s["layout"] != "tp4" || s["arm"] != "v14") continue;
    for (json& w : s["workloads"]) {
      if (w["name"] != "code-sweep") continue;
      for (json& x : w["samples"]) {
        if (x["batch"] == w["samples"][0]["batch"]) {
          x["draft"] = {{"error", "draft counters: accepted_drafts went backwards (50 before, 3 after)"}};
        }
      }
      changed = true;
    }
  }
  ASSERT_TRUE(changed);
  testing::WriteFixtureStore(broken, dir_ / "broken.db");
  const store::Store store = store::Store::Open(dir_ / "broken.db");
  const std::string text = RenderReport(LoadCampaignRecord(store, std::nullopt), {});
  const std::size_t at = text.find("## Draft acceptance");
  ASSERT_NE(at, std::string::npos);
  const std::string section = text.substr(at, text.find("\n## ", at + 1) - at);
  EXPECT_NE(section.find("| code-sweep | code | — · 1.00/round | error: counters went backwards | — · 1.00/round | 0.625 · 1.75/round |"),
            std::string::npos)
      << section;
  EXPECT_NE(section.find("- code-sweep code (tp4 · v14): session "), std::string::npos) << section;
  EXPECT_NE(section.find("accepted_drafts went backwards (50 before, 3 after)"), std::string::npos) << section;
}

TEST_F(Report, PairedIntervalsPairAdjacentSessionsAndRefuseAPairThatLostOne) {
  json paired = fixture_;
  paired["campaign"]["gate"]["method"] = "paired";
  testing::WriteFixtureStore(paired, dir_ / "paired.db");
  const store::CampaignRecord record = LoadCampaignRecord(store::Store::Open(dir_ / "paired.db"), std::nullopt);
  const std::string text = RenderReport(record, {});
  EXPECT_NE(text.find("The campaign declares `method: paired`"), std::string::npos);
  // Each cell's paired interval is the one-sample t over the ABBA pairs' log ratios.
  const store::FamilyScores* f = nullptr;
  for (const store::FamilyScores& x : record.families) {
    if (x.layout == "tp4" && x.family == "code-sweep: code C1") f = &x;
  }
  ASSERT_NE(f, nullptr);
  const store::PairedComparison p = store::PairByBlock(record, *f, "v13", "v14");
  ASSERT_TRUE(p.interval) << p.missing;
  EXPECT_EQ(p.pairs, 2u);
  EXPECT_NE(text.find(fmt::format("; paired {:.3f} ({:.3f}–{:.3f})", p.interval->ratio, p.interval->lo, p.interval->hi)),
            std::string::npos);

  // Session 2 (tp4, v14) failed: its pair with session 1 is refused, not re-paired with session 4.
  for (json& s : paired["sessions"]) {
    if (s["order_index"] == 1) {
      s["status"] = "failed";
      s["reason"] = "crashed";
    }
  }
  testing::WriteFixtureStore(paired, dir_ / "lost.db");
  const store::CampaignRecord lost = LoadCampaignRecord(store::Store::Open(dir_ / "lost.db"), std::nullopt);
  for (const store::FamilyScores& x : lost.families) {
    if (x.layout != "tp4" || x.family != "code-sweep: code C1") continue;
    const store::PairedComparison q = store::PairByBlock(lost, x, "v13", "v14");
    EXPECT_FALSE(q.interval);
    EXPECT_NE(q.missing.find("the pair of sessions 1 and 2 lost session 2 (v14, failed)"), std::string::npos) << q.missing;
  }
  EXPECT_NE(RenderReport(lost, {}).find("; paired: the pair of sessions 1 and 2 lost session 2"), std::string::npos);
}

TEST(PairBySession, PairsAnArmsTwoFamiliesBySessionNotByIndex) {
  // C1 and C4 of one arm: session 12 has no C4 score, 13 and 20 no C1 score, and the C4
  // scores come in another order. Pairing by index would put session 10's C1 against 11's C4.
  store::FamilyScores c1, c4;
  c1.by_arm["a"] = {100, 110, 120};
  c1.sessions_by_arm["a"] = {10, 11, 12};
  c4.by_arm["a"] = {330, 310, 290, 505};
  c4.sessions_by_arm["a"] = {11, 10, 13, 20};
  c4.by_arm["b"] = {1, 2};
  c4.sessions_by_arm["b"] = {10, 11};
  const store::PairedComparison p = store::PairBySession(c1, c4, "a");
  ASSERT_TRUE(p.interval) << p.missing;
  EXPECT_EQ(p.pairs, 2u);
  const stats::SessionPair by_session[] = {{100, 310}, {110, 330}};
  const stats::RatioInterval want = stats::PairedLogRatio(by_session);
  EXPECT_DOUBLE_EQ(p.interval->ratio, want.ratio);
  EXPECT_DOUBLE_EQ(p.interval->lo, want.lo);
  EXPECT_DOUBLE_EQ(p.interval->hi, want.hi);
  // An arm with fewer than two shared sessions has no interval, and says why.
  const store::PairedComparison none = store::PairBySession(c1, c4, "b");
  EXPECT_FALSE(none.interval);
  EXPECT_FALSE(none.missing.empty());
}

TEST_F(Report, RoundTimePredictionErrorComesFromTheStatsAroundEachWorkload) {
  // The candidate's code sweep: per session, 100 predicted rounds with |error| summing to
  // 5 (5%) and a signed error of +20 µs a round; in one session the server restarted.
  json stats = fixture_;
  int session = 0;
  for (json& s : stats["sessions"]) {
    if (s["arm"] != "v14" || s["layout"] != "tp4") continue;
    for (json& w : s["workloads"]) {
      if (w["name"] != "code-sweep") continue;
      const double base = 1000.0 * ++session;
      w["stats_before"] = {
          {"draft", {{"round_time_prediction", {{"rounds", base}, {"abs_rel_error_sum", base / 10}, {"error_us_sum", 0}}}}}};
      w["stats_after"] = {
          {"draft", {{"round_time_prediction", {{"rounds", base + 100}, {"abs_rel_error_sum", base / 10 + 5}, {"error_us_sum", 2000}}}}}};
    }
  }
  testing::WriteFixtureStore(stats, dir_ / "prediction.db");
  std::string text = RenderReport(LoadCampaignRecord(store::Store::Open(dir_ / "prediction.db"), std::nullopt), {});
  EXPECT_NE(text.find("## Round-time prediction"), std::string::npos);
  EXPECT_NE(text.find("| code-sweep | — | 5.0% · +20 µs (200 rounds) | — | — |"), std::string::npos)
      << text.substr(text.find("## Round-time"), 900);
  // A restart between the reads: that column gets an error, never a figure from the other session.
  bool restarted = false;
  for (json& s : stats["sessions"]) {
    if (restarted || s["arm"] != "v14" || s["layout"] != "tp4") continue;
    for (json& w : s["workloads"]) {
      if (w["name"] != "code-sweep") continue;
      w["stats_after"]["draft"]["round_time_prediction"]["rounds"] = 3;
      restarted = true;
    }
  }
  ASSERT_TRUE(restarted);
  testing::WriteFixtureStore(stats, dir_ / "restart.db");
  text = RenderReport(LoadCampaignRecord(store::Store::Open(dir_ / "restart.db"), std::nullopt), {});
  EXPECT_NE(text.find("| code-sweep | — | error: counters went backwards | — | — |"), std::string::npos);
}

// A content check on an answer that ended on its token budget judges a text cut short:
// truncated, never a failure (the demo's capped code and JSON answers read as failures);
// the same answer ended by the model is judged.
TEST_F(Report, AContentCheckOnATruncatedAnswerIsTruncatedNotFailed) {
  auto it = std::find_if(record_.samples.begin(), record_.samples.end(), [](const store::SampleRecord& x) { return x.id == 37; });
  ASSERT_NE(it, record_.samples.end());
  ASSERT_EQ(it->finish_reason, "length");
  Quality q = AssessQuality(record_);
  EXPECT_FALSE(q.failed_checks.contains("json_fields"));
  EXPECT_EQ(q.truncated_checks["json_fields"]["v14"], std::vector<std::int64_t>{37});
  const auto judged_json = [](const PairQuality& pair) {
    return std::any_of(pair.failures.begin(), pair.failures.end(),
                       [](const std::string& f) { return f.find("content check json_fields fails more often") != std::string::npos; });
  };
  EXPECT_FALSE(judged_json(AssessPair(record_, "v13", "v14")));
  it->finish_reason = "stop";
  q = AssessQuality(record_);
  EXPECT_EQ(q.failed_checks["json_fields"]["v14"], std::vector<std::int64_t>{37});
  EXPECT_FALSE(q.truncated_checks.contains("json_fields"));
  EXPECT_TRUE(judged_json(AssessPair(record_, "v13", "v14")));
}

// A store whose sample says its first output came at -inf (edited, or damaged) gave the
// report a -inf TTFT without a word: such a sample is read as invalid, left out of every
// figure, and named.
TEST_F(Report, ASampleWithImpossibleTimesIsLeftOutAndNamed) {
  {
    store::Store store = store::Store::Open(dir_ / "store.db");
    store.Exec("UPDATE sample SET t_first_output = -1e999 WHERE id = 2");
    store.Exec("UPDATE sample SET t_finish = t_start - 1 WHERE id = 3");
  }
  const store::Store store = store::Store::Open(dir_ / "store.db");
  record_ = LoadCampaignRecord(store, std::nullopt);
  EXPECT_EQ(record_.implausible_samples, (std::vector<std::int64_t>{2, 3}));
  const std::string text = Rendered();
  EXPECT_EQ(text.find("inf"), std::string::npos) << "no infinite figure";
  EXPECT_NE(text.find("2 samples stored as valid with times no request can have"), std::string::npos);
  EXPECT_NE(text.find("[#2](#sample-2)"), std::string::npos);
}

TEST_F(Report, PlotsAreDrawnOrSkippedWithANote) {
  const PlotSet missing = DrawPlots(record_, dir_ / "plots-none", "/no/such/gnuplot");
  EXPECT_TRUE(missing.plots.empty());
  EXPECT_NE(missing.note.find("not installed"), std::string::npos) << missing.note;
  ReportOptions options{dir_, missing, true};
  EXPECT_NE(Rendered(options).find("(plots skipped: /no/such/gnuplot is not installed"), std::string::npos);

  if (!fs::exists("/usr/bin/gnuplot")) GTEST_SKIP() << "gnuplot is not installed";
  const PlotSet drawn = DrawPlots(record_, dir_ / "plots", "gnuplot");
  EXPECT_TRUE(drawn.note.empty()) << drawn.note;
  ASSERT_EQ(drawn.plots.size(), 4u);  // scores and scaling for each layout
  for (const Plot& p : drawn.plots) {
    std::ifstream in(p.file);
    std::stringstream svg;
    svg << in.rdbuf();
    EXPECT_NE(svg.str().find("<svg"), std::string::npos) << p.file;
  }
  const std::string text = Rendered({dir_, drawn, true});
  EXPECT_NE(text.find("![tp4: session scores](plots/scores-tp4.svg)"), std::string::npos);
  EXPECT_NE(text.find("![ep2: concurrency scaling](plots/scaling-ep2.svg)"), std::string::npos);
}

TEST_F(Report, ExportsRoundTrip) {
  std::ostringstream json_out, csv_out, scores_out;
  Export(record_, ExportTable::kSamples, ExportFormat::kJson, json_out);
  Export(record_, ExportTable::kSamples, ExportFormat::kCsv, csv_out);
  Export(record_, ExportTable::kScores, ExportFormat::kJson, scores_out);
  const json samples = json::parse(json_out.str());
  ASSERT_EQ(samples.size(), record_.samples.size());
  EXPECT_EQ(json_out.str().rfind("[\n {\"sample_id\": ", 0), 0u);  // column order kept
  EXPECT_EQ(samples[0]["layout"], "tp4");
  // CSV: a header and one record per sample; quoted fields may hold commas and quotes.
  std::size_t records = 0;
  bool quoted = false;
  for (char c : csv_out.str()) {
    if (c == '"') quoted = !quoted;
    if (c == '\n' && !quoted) ++records;
  }
  EXPECT_EQ(records, record_.samples.size() + 1);
  const json scores = json::parse(scores_out.str());
  std::size_t expected = 0;
  for (const auto& f : record_.families) {
    for (const auto& [arm, values] : f.by_arm) expected += values.size();
  }
  EXPECT_EQ(scores.size(), expected);
  EXPECT_TRUE(scores[0].contains("values"));
}

// Output that does not reach its destination is a failure: every command that writes to
// standard output exits 2 naming it (they exited 0 into /dev/full; a failing gate keeps 1), and a report whose
// file cannot be written leaves neither a .partial file nor the plots it drew.
TEST_F(Report, OutputThatCannotBeWrittenFailsAndLeavesNothingBehind) {
  const std::string db = (dir_ / "store.db").string();
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{"export", db, "--format", "csv"},
                                             {"export", db, "--format", "json", "--table", "scores"},
                                             {"report", db},
                                             {"gate", db, "--json"},
                                             {"sessions", db}}) {
    std::vector<std::string> args = {"-c", "exec \"$0\" \"$@\" > /dev/full", TANDEM_BIN};
    args.insert(args.end(), command.begin(), command.end());
    const auto r = tandem::testing::RunCommand("/bin/sh", args);
    SCOPED_TRACE(command.front());
    // The gate keeps a failing verdict's own code (1); a success becomes 2.
    const int verdict = command.front() == "gate" ? tandem::testing::RunCommand(TANDEM_BIN, command).exit_code : 0;
    EXPECT_EQ(r.exit_code, verdict == 0 ? 2 : verdict) << r.err;
    EXPECT_NE(r.err.find("writing to standard output failed"), std::string::npos) << r.err;
  }
  const fs::path taken = dir_ / "taken";  // a directory with a file in it: the report cannot be renamed there
  fs::create_directories(taken);
  std::ofstream(taken / "keep") << "x";
  const auto r = tandem::testing::RunCommand(TANDEM_BIN, {"report", db, "--out", taken.string(), "--plots", (dir_ / "plots").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(taken.string() + ": cannot write"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(taken.string() + ".partial"));
  EXPECT_FALSE(fs::exists(dir_ / "plots")) << "the plots of a report that was not written";
  EXPECT_TRUE(fs::exists(taken / "keep"));
}

}  // namespace
}  // namespace tandem::reports
