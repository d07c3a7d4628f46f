// Compares tandem::stats against values computed independently with numpy and
// scipy by golden/make_golden.py (committed beside the values).
#include <cmath>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "stats/descriptive.hpp"
#include "stats/log_ratio.hpp"

namespace tandem::stats {
namespace {

nlohmann::json LoadGolden() {
  std::ifstream in(TANDEM_STATS_GOLDEN);
  if (!in) throw std::runtime_error("cannot open " TANDEM_STATS_GOLDEN);
  return nlohmann::json::parse(in);
}

double RelativeError(double got, double want) { return std::fabs(got - want) / std::fabs(want); }

TEST(LogRatioGolden, WelchAndPairedMatchScipy) {
  const nlohmann::json golden = LoadGolden();
  int welch = 0, paired = 0;
  for (const auto& c : golden.at("intervals")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const auto a = c.at("baseline").get<std::vector<double>>();
    const auto b = c.at("candidate").get<std::vector<double>>();
    const double level = c.at("level");
    const bool is_welch = c.at("method") == "welch";
    const RatioInterval r = is_welch ? WelchLogRatio(a, b, level) : PairedLogRatio(PairInRunOrder(a, b), level);
    (is_welch ? welch : paired)++;
    EXPECT_EQ(ToString(r.method), c.at("method").get<std::string>());
    EXPECT_LT(RelativeError(r.ratio, c.at("ratio")), 1e-9);
    EXPECT_LT(RelativeError(r.lo, c.at("lo")), 1e-9);
    EXPECT_LT(RelativeError(r.hi, c.at("hi")), 1e-9);
    EXPECT_LT(RelativeError(r.df, c.at("df")), 1e-9);
    EXPECT_LT(std::fabs(r.t - c.at("t").get<double>()), 1e-9 * std::max(1.0, std::fabs(r.t)));
    EXPECT_LT(std::fabs(r.p - c.at("p").get<double>()), 1e-9);
    EXPECT_EQ(r.n_baseline, a.size());
    EXPECT_EQ(r.n_candidate, b.size());
    EXPECT_EQ(r.excludes_one(), c.at("lo").get<double>() > 1.0 || c.at("hi").get<double>() < 1.0);
  }
  EXPECT_GE(welch, 50);
  EXPECT_GE(paired, 50);
}

TEST(LogRatioGolden, DescriptiveMatchesNumpy) {
  const nlohmann::json golden = LoadGolden();
  ASSERT_FALSE(golden.at("descriptive").empty());
  for (const auto& c : golden.at("descriptive")) {
    const auto v = c.at("values").get<std::vector<double>>();
    SCOPED_TRACE(c.at("values").dump());
    EXPECT_LT(RelativeError(Mean(v), c.at("mean")), 1e-12);
    EXPECT_LT(RelativeError(Median(v), c.at("median")), 1e-12);
    EXPECT_LT(RelativeError(GeometricMean(v), c.at("geometric_mean")), 1e-12);
    if (!c.at("variance").is_null()) {
      EXPECT_LT(RelativeError(SampleVariance(v), c.at("variance")), 1e-10);
    }
    for (const auto& qp : c.at("percentiles")) {
      EXPECT_LT(RelativeError(Percentile(v, qp.at(0)), qp.at(1)), 1e-12) << "percentile " << qp.at(0);
    }
  }
}

}  // namespace
}  // namespace tandem::stats
