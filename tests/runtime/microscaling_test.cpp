// DeepSeek V4.1's block formats and the reference's activation round trips, against
// golden values computed independently with numpy (tests/reference/microscaling_golden.py).
#include "runtime/numeric/microscaling.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tandem::rt {
namespace {

nlohmann::json Golden() {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/reference/golden/microscaling.json");
  EXPECT_TRUE(in) << "tests/reference/golden/microscaling.json is missing";
  return nlohmann::json::parse(in);
}

std::vector<float> Floats(const nlohmann::json& j) {
  std::vector<float> out;
  for (const auto& v : j) out.push_back(v.get<float>());
  return out;
}

// Equal bit patterns: −0 is not 0 here.
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]) && ++differ <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " (0x" << std::hex << std::bit_cast<std::uint32_t>(got[i]) << "), want "
                    << want[i] << " (0x" << std::bit_cast<std::uint32_t>(want[i]) << ")" << std::dec;
    }
  }
  EXPECT_EQ(differ, 0) << what;
}

TEST(Microscaling, RoundTripsMatchTheGoldenValuesBitForBit) {
  const nlohmann::json golden = Golden();
  const auto& cases = golden.at("round_trips");
  ASSERT_GE(cases.size(), 10u);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const std::vector<float> input = Floats(cases[c].at("input"));
    std::vector<float> x = input;
    RoundTripFp8(x.data(), x.size());
    ExpectSameBits(x, Floats(cases[c].at("fp8")), "fp8 case " + std::to_string(c));
    x = input;
    RoundTripFp4Pow2(x.data(), x.size());
    ExpectSameBits(x, Floats(cases[c].at("fp4_pow2")), "fp4 (E8M0 scales) case " + std::to_string(c));
    x = input;
    RoundTripFp4E4M3(x.data(), x.size());
    ExpectSameBits(x, Floats(cases[c].at("fp4_e4m3")), "fp4 (E4M3 scales) case " + std::to_string(c));
  }
}

TEST(Microscaling, Fp4WeightRowsDequantizeAsTheGoldenValues) {
  const auto golden = Golden();  // kept: a range-for over a member of a temporary would read it freed
  for (const auto& row : golden.at("fp4_rows")) {
    const std::vector<std::uint8_t> packed = row.at("packed").get<std::vector<std::uint8_t>>();
    const std::vector<std::uint8_t> scales = row.at("scales").get<std::vector<std::uint8_t>>();
    std::vector<float> out(packed.size() * 2);
    DequantizeFp4Row(packed.data(), scales.data(), static_cast<std::int64_t>(out.size()), out.data());
    ExpectSameBits(out, Floats(row.at("values")), "fp4 row");
  }
}

// Every value a nearest-value search over E2M1's eight magnitudes gives (the even code at a
// tie), for floats from 0 to 8 by a stride of bit patterns and a few ulps around each midpoint.
TEST(Microscaling, E2M1RoundingIsTheNearestValue) {
  const float values[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const auto nearest = [&](float a) {
    int best = 0;
    for (int k = 1; k < 8; ++k) {
      const double d = std::fabs(static_cast<double>(a) - values[k]), d_best = std::fabs(static_cast<double>(a) - values[best]);
      if (d < d_best || (d == d_best && k % 2 == 0)) best = k;
    }
    return values[best];
  };
  std::vector<float> probes;
  for (std::uint32_t bits = 0; bits <= std::bit_cast<std::uint32_t>(8.0f); bits += 4099) probes.push_back(std::bit_cast<float>(bits));
  for (const float mid : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f}) {
    float v = mid;
    for (int i = 0; i < 4; ++i) v = std::nextafter(v, 0.0f);
    for (int i = 0; i < 9; ++i, v = std::nextafter(v, 8.0f)) probes.push_back(v);
  }
  for (const float a : probes) {
    ASSERT_EQ(E2M1ToF32(F32ToE2M1(a)), nearest(a)) << a;
    ASSERT_EQ(E2M1ToF32(F32ToE2M1(-a)), -nearest(a)) << -a;
  }
}

TEST(Microscaling, E2M1TiesGoToTheEvenCodeAndTheSignIsKept) {
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const float want[] = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(E2M1ToF32(F32ToE2M1(ties[i])), want[i]) << ties[i];
    EXPECT_EQ(E2M1ToF32(F32ToE2M1(-ties[i])), -want[i]) << -ties[i];
  }
  EXPECT_TRUE(std::signbit(E2M1ToF32(F32ToE2M1(-0.1f))));
  EXPECT_EQ(E2M1ToF32(F32ToE2M1(100.0f)), 6.0f);
  EXPECT_EQ(E8M0ToF32(127), 1.0f);
  EXPECT_EQ(E8M0ToF32(130), 8.0f);
  EXPECT_TRUE(std::isnan(E8M0ToF32(255)));
  EXPECT_EQ(RoundScalePow2(448.0f, 1.0f / 448.0f), 1.0f);
  EXPECT_EQ(RoundScalePow2(449.0f, 1.0f / 448.0f), 2.0f);
}

}  // namespace
}  // namespace tandem::rt
