// DeepSeek V4.1's hyper-connections against golden values computed independently in
// float64 (tests/reference/hyper_connections_golden.py).
#include "runtime/engine/hyper_connections.hpp"

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tandem::rt {
namespace {

std::vector<float> Floats(const nlohmann::json& j) {
  std::vector<float> out;
  for (const auto& v : j) out.push_back(v.get<float>());
  return out;
}

// The golden script's integer formulas for its large inputs.
std::vector<float> Stream(int hc, int dim, int c) {
  std::vector<float> x;
  for (int j = 0; j < hc; ++j) {
    for (int d = 0; d < dim; ++d) x.push_back(static_cast<float>(((j * 37 + d * 11 + c * 5) % 61 - 30) * std::ldexp(1.0, c - 3) / 8));
  }
  return x;
}

std::vector<float> MixWeights(int hc, int dim, int c) {
  std::vector<float> fn;
  for (int r = 0; r < (2 + hc) * hc; ++r) {
    for (int k = 0; k < hc * dim; ++k) fn.push_back(static_cast<float>(((r * 131 + k * 71 + c * 17) % 97 - 48) / 1024.0));
  }
  return fn;
}

TEST(HyperConnections, MixesCollapseAndUpdateMatchTheFloat64Reference) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/reference/golden/hyper_connections.json");
  ASSERT_TRUE(in) << "tests/reference/golden/hyper_connections.json is missing";
  const nlohmann::json golden = nlohmann::json::parse(in);
  const int hc = golden.at("hc"), dim = golden.at("dim");
  const auto& cases = golden.at("cases");
  ASSERT_GE(cases.size(), 4u);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    const nlohmann::json& g = cases[c];
    const std::vector<float> x = Stream(hc, dim, static_cast<int>(c)), fn = MixWeights(hc, dim, static_cast<int>(c));
    const std::vector<float> base = Floats(g.at("base")), scale = Floats(g.at("scale")), f = Floats(g.at("f"));
    const HyperConnectionWeights w{hc, dim, fn.data(), base.data(), scale.data(), g.at("sinkhorn_iters"), 1e-20f, 1e-6f};
    std::vector<float> pre(hc), post(hc), comb(hc * hc);
    HcMixes(w, x.data(), pre.data(), post.data(), comb.data());
    // fp32 sums over hc·dim products against float64: a few ulps of values near 1.
    for (int i = 0; i < hc; ++i) {
      EXPECT_NEAR(pre[i], g.at("pre")[i].get<double>(), 2e-6);
      EXPECT_NEAR(post[i], g.at("post")[i].get<double>(), 4e-6);
    }
    for (int i = 0; i < hc * hc; ++i) EXPECT_NEAR(comb[i], g.at("comb")[i].get<double>(), 2e-6);
    // Collapse and update with the reference's own mixes: bf16 results, within one bf16
    // ulp of the exact value.
    const std::vector<float> want_pre = Floats(g.at("pre")), want_post = Floats(g.at("post")), want_comb = Floats(g.at("comb"));
    std::vector<float> collapsed(dim), updated(hc * dim);
    HcPre(x.data(), hc, dim, want_pre.data(), collapsed.data());
    HcPost(f.data(), x.data(), hc, dim, want_post.data(), want_comb.data(), updated.data());
    auto within_ulp = [](float got, double want) { return std::fabs(got - want) <= std::ldexp(std::fabs(want), -8) + 1e-30; };
    int bad = 0;
    for (int d = 0; d < dim; ++d) bad += within_ulp(collapsed[d], g.at("collapsed")[d].get<double>()) ? 0 : 1;
    for (int k = 0; k < hc * dim; ++k) bad += within_ulp(updated[k], g.at("updated")[k].get<double>()) ? 0 : 1;
    EXPECT_EQ(bad, 0);
  }
}

TEST(HyperConnections, CombIsDoublyStochasticAndPostWithinItsRange) {
  const int hc = 4, dim = 32;
  const std::vector<float> x = Stream(hc, dim, 1), fn = MixWeights(hc, dim, 2);
  const std::vector<float> base(24, 0.3f), scale = {1.0f, 1.0f, 3.0f};
  std::vector<float> pre(hc), post(hc), comb(hc * hc);
  HcMixes({hc, dim, fn.data(), base.data(), scale.data(), 20, 1e-20f, 1e-6f}, x.data(), pre.data(), post.data(), comb.data());
  for (int i = 0; i < hc; ++i) {
    float row = 0, column = 0;
    for (int k = 0; k < hc; ++k) {
      row += comb[i * hc + k];
      column += comb[k * hc + i];
    }
    EXPECT_NEAR(column, 1.0f, 1e-5f);  // the last normalisation is over columns
    EXPECT_NEAR(row, 1.0f, 1e-3f);
    EXPECT_GT(post[i], 0.0f);
    EXPECT_LT(post[i], 2.0f);
    EXPECT_GT(pre[i], 0.0f);
  }
}

}  // namespace
}  // namespace tandem::rt
