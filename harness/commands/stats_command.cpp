#include "harness/commands/stats_command.hpp"

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"
#include "harness/traffic/battery_samples.hpp"
#include "stats/descriptive.hpp"
#include "stats/log_ratio.hpp"
#include "stats/stats_error.hpp"

namespace tandem::harness {

namespace {

struct CompareOptions {
  std::vector<double> baseline;
  std::vector<double> candidate;
  std::string method = "welch";
  double level = 0.95;
  bool json = false;
};

struct WeightedOptions {
  std::string samples_file;
  bool json = false;
};

void RunCompare(const CompareOptions& opt) {
  const stats::RatioInterval r = opt.method == "paired"
                                     ? stats::PairedLogRatio(stats::PairInRunOrder(opt.baseline, opt.candidate), opt.level)
                                     : stats::WelchLogRatio(opt.baseline, opt.candidate, opt.level);
  if (opt.json) {
    const nlohmann::json out = {{"ratio", r.ratio},
                                {"lo", r.lo},
                                {"hi", r.hi},
                                {"df", r.df},
                                {"t", r.t},
                                {"p", r.p},
                                {"n_baseline", r.n_baseline},
                                {"n_candidate", r.n_candidate},
                                {"method", stats::ToString(r.method)},
                                {"level", r.level},
                                {"excludes_one", r.excludes_one()}};
    fmt::print("{}\n", out.dump());
    return;
  }
  fmt::print("method     {} ({:g}% two-sided, on log session scores)\n", stats::ToString(r.method), r.level * 100.0);
  fmt::print("ratio      {:.4f}  (candidate / baseline, ratio of geometric means)\n", r.ratio);
  fmt::print("interval   {:.4f} – {:.4f}  {}\n", r.lo, r.hi,
             r.excludes_one() ? "excludes 1: the change is significant" : "includes 1: no significant change");
  fmt::print("df         {:.2f}\n", r.df);
  fmt::print("t          {:.3f}\n", r.t);
  fmt::print("p          {:.4g}\n", r.p);
  fmt::print("n          baseline {}, candidate {}\n", r.n_baseline, r.n_candidate);
}

void RunWeighted(const WeightedOptions& opt) {
  const std::vector<BatterySample> samples = ReadBatterySamples(opt.samples_file);
  std::map<std::int64_t, std::vector<stats::WeightedRequest>> by_repeat;
  for (const BatterySample& s : samples) by_repeat[s.repeat].push_back(s.request);

  std::vector<double> scores;
  nlohmann::json repeats = nlohmann::json::array();
  for (const auto& [repeat, requests] : by_repeat) {
    try {
      scores.push_back(stats::WeightedDecode(requests));
    } catch (const stats::StatsError& e) {
      throw InputError(fmt::format("{}: repeat {}: {}", opt.samples_file, repeat, e.what()));
    }
    repeats.push_back({{"repeat", repeat}, {"requests", requests.size()}, {"weighted_decode", scores.back()}});
  }
  const double median = stats::Median(scores);
  if (opt.json) {
    fmt::print("{}\n", nlohmann::json{{"repeats", repeats}, {"median", median}}.dump());
    return;
  }
  fmt::print("{:>6}  {:>8}  {:>14}\n", "repeat", "requests", "weighted tok/s");
  for (const auto& r : repeats) {
    fmt::print("{:>6}  {:>8}  {:>14.2f}\n", r["repeat"].get<std::int64_t>(), r["requests"].get<std::size_t>(),
               r["weighted_decode"].get<double>());
  }
  fmt::print("median of {} repeat{}: {:.2f} tok/s\n", scores.size(), scores.size() == 1 ? "" : "s", median);
}

}  // namespace

void AddStatsCommand(CLI::App& app) {
  CLI::App* stats = app.add_subcommand("stats", "Statistics on numbers you supply");
  stats->require_subcommand(1);

  auto compare_opt = std::make_shared<CompareOptions>();
  CLI::App* compare = stats->add_subcommand("compare", "A/B ratio of geometric means of session scores, with a confidence interval");
  compare->add_option("--baseline", compare_opt->baseline, "Baseline session scores, comma-separated, run order")
      ->required()
      ->delimiter(',');
  compare->add_option("--candidate", compare_opt->candidate, "Candidate session scores, comma-separated, run order")
      ->required()
      ->delimiter(',');
  compare->add_option("--method", compare_opt->method, "welch: unpaired Welch interval; paired: i-th baseline with i-th candidate session")
      ->check(CLI::IsMember({"welch", "paired"}))
      ->capture_default_str();
  compare->add_option("--level", compare_opt->level, "Two-sided confidence level, in (0, 1)")->capture_default_str();
  compare->add_flag("--json", compare_opt->json, "Print one JSON object");
  compare->callback([compare_opt] { RunCompare(*compare_opt); });

  auto weighted_opt = std::make_shared<WeightedOptions>();
  CLI::App* weighted = stats->add_subcommand("weighted", "Weighted decode per battery repeat, and the median over repeats");
  weighted->add_option("--samples", weighted_opt->samples_file, "JSON array of samples (docs/statistics.md)")->required();
  weighted->add_flag("--json", weighted_opt->json, "Print one JSON object");
  weighted->callback([weighted_opt] { RunWeighted(*weighted_opt); });
}

}  // namespace tandem::harness
