// DeepSeek V4.1's rotary embedding: YaRN's ramp where the reference puts it, frequencies
// and rotations against float64, and the inverse rotation undoing the forward one.
#include "runtime/engine/v41_rope.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/numeric/dtype.hpp"

namespace tandem::rt {
namespace {

// 1/base^(2i/d), YaRN-ramped, in float64.
std::vector<double> ExactFreqs(int d, double base, double orig, double factor, int low, int high) {
  std::vector<double> f;
  for (int i = 0; i < d / 2; ++i) {
    double v = 1.0 / std::pow(base, 2.0 * i / d);
    if (orig > 0) {
      const double ramp = std::clamp((i - low) / (high == low ? 0.001 : static_cast<double>(high - low)), 0.0, 1.0);
      v = v / factor * ramp + v * (1 - ramp);
    }
    f.push_back(v);
  }
  return f;
}

TEST(V41Rope, YarnRampsWhereTheReferenceDoes) {
  const V41Rope flash(64, 160000, V41Rope::Yarn{65536, 16, 32, 1});
  EXPECT_EQ(flash.ramp_low(), 15);
  EXPECT_EQ(flash.ramp_high(), 25);
  const V41Rope small(16, 160000, V41Rope::Yarn{32, 4, 32, 1});
  EXPECT_EQ(small.ramp_low(), 0);
  EXPECT_EQ(small.ramp_high(), 2);
  const V41Rope window(64, 10000, std::nullopt);
  for (const auto& [rope, base, orig, factor] :
       {std::tuple{&flash, 160000.0, 65536.0, 16.0}, std::tuple{&small, 160000.0, 32.0, 4.0}, std::tuple{&window, 10000.0, 0.0, 1.0}}) {
    const int d = static_cast<int>(rope->freqs().size()) * 2;
    const std::vector<double> want = ExactFreqs(d, base, orig, factor, rope->ramp_low(), rope->ramp_high());
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(rope->freqs()[i], want[i], 4e-7 * want[i]) << "pair " << i;
  }
  // Pairs up to the ramp keep their frequency, from its end on it is divided by 16.
  EXPECT_NEAR(flash.freqs()[15], 1.0 / std::pow(160000.0, 30.0 / 64), 1e-9);
  EXPECT_NEAR(flash.freqs()[25], 1.0 / std::pow(160000.0, 50.0 / 64) / 16, 1e-9);
}

TEST(V41Rope, RotatesTheLastDimsAsInterleavedPairsAndTheInverseUndoesIt) {
  const int width = 64, d = 16;
  const V41Rope rope(d, 160000, V41Rope::Yarn{32, 4, 32, 1});
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(2 * width);
  for (float& x : v) x = Bf16ToF32(F32ToBf16(normal(rng)));
  for (const std::int64_t position : {0, 1, 37, 4095}) {
    std::vector<float> r = v;
    rope.Apply(r.data(), 2, width, position);
    for (int row = 0; row < 2; ++row) {
      for (int k = 0; k < width - d; ++k) EXPECT_EQ(r[row * width + k], v[row * width + k]) << "the nope part is left alone";
      for (int i = 0; i < d / 2; ++i) {
        const double a = static_cast<double>(position) * rope.freqs()[static_cast<std::size_t>(i)];
        const double x0 = v[row * width + width - d + 2 * i], x1 = v[row * width + width - d + 2 * i + 1];
        const double y0 = x0 * std::cos(a) - x1 * std::sin(a), y1 = x0 * std::sin(a) + x1 * std::cos(a);
        EXPECT_NEAR(r[row * width + width - d + 2 * i], y0, std::ldexp(std::fabs(y0), -8) + 1e-6) << position << " pair " << i;
        EXPECT_NEAR(r[row * width + width - d + 2 * i + 1], y1, std::ldexp(std::fabs(y1), -8) + 1e-6) << position << " pair " << i;
      }
    }
    rope.Apply(r.data(), 2, width, position, true);
    for (std::size_t k = 0; k < v.size(); ++k) EXPECT_NEAR(r[k], v[k], std::ldexp(std::fabs(v[k]), -7) + 1e-2) << position;
  }
}

}  // namespace
}  // namespace tandem::rt
