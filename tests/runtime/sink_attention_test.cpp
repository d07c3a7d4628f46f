// DeepSeek V4.1's attention with a sink, against a direct float64 softmax, and its window
// indices at prefill and in decode.
#include "runtime/engine/sink_attention.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/numeric/dtype.hpp"

namespace tandem::rt {
namespace {

std::vector<float> Bf16Values(std::size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = Bf16ToF32(F32ToBf16(normal(rng)));
  return v;
}

// o = Σ_t e^{z_t} v_t / (Σ_t e^{z_t} + e^{sink}), in float64.
std::vector<double> Exact(const std::vector<float>& q, const std::vector<float>& kv, const std::vector<std::int32_t>& indices, int d,
                          double scale, double sink) {
  double top = sink;
  std::vector<double> z(indices.size(), -INFINITY);
  for (std::size_t t = 0; t < indices.size(); ++t) {
    if (indices[t] < 0) continue;
    double dot = 0;
    for (int i = 0; i < d; ++i) dot += static_cast<double>(q[i]) * kv[static_cast<std::size_t>(indices[t]) * d + i];
    z[t] = dot * scale;
    top = std::max(top, z[t]);
  }
  std::vector<double> o(d, 0.0);
  double sum = std::exp(sink - top);
  for (std::size_t t = 0; t < indices.size(); ++t) {
    if (indices[t] < 0) continue;
    const double p = std::exp(z[t] - top);
    sum += p;
    for (int i = 0; i < d; ++i) o[i] += p * kv[static_cast<std::size_t>(indices[t]) * d + i];
  }
  for (double& x : o) x /= sum;
  return o;
}

TEST(SinkAttention, MatchesAFloat64SoftmaxWithTheSinkWithinBf16Weights) {
  std::mt19937 rng(41);
  const int d = 64, rows = 200;
  const std::vector<float> kv = Bf16Values(static_cast<std::size_t>(rows) * d, rng, 1.0f);
  for (const float sink : {-5.0f, 0.0f, 2.5f, 40.0f}) {
    for (const std::size_t n : {std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{150}}) {
      const std::vector<float> q = Bf16Values(d, rng, 0.5f);
      std::vector<std::int32_t> indices(n);
      for (std::size_t t = 0; t < n; ++t) indices[t] = (t % 7 == 3 && n > 1) ? -1 : static_cast<std::int32_t>((t * 37) % rows);
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      std::vector<float> out(d);
      SinkAttention(q.data(), kv.data(), indices, d, scale, sink, out.data());
      const std::vector<double> want = Exact(q, kv, indices, d, scale, sink);
      double worst = 0;
      for (int i = 0; i < d; ++i) worst = std::max(worst, std::fabs(out[i] - want[i]));
      // bf16 probabilities (2^-9 relative each) and a bf16 output, on values of about 1.
      EXPECT_LT(worst, 1e-2) << "sink " << sink << ", " << n << " indices";
    }
  }
}

TEST(SinkAttention, TheSinkTakesWeightWithoutAValueAndNoIndexGivesZeros) {
  std::mt19937 rng(7);
  const int d = 32;
  const std::vector<float> kv = Bf16Values(4 * d, rng, 1.0f), q = Bf16Values(d, rng, 1.0f);
  const std::vector<std::int32_t> one = {2};
  std::vector<float> out(d);
  // One key: without the sink its value comes out whole; with a sink of equal logit, half.
  SinkAttention(q.data(), kv.data(), one, d, 0.0f, -std::numeric_limits<float>::infinity(), out.data());
  for (int i = 0; i < d; ++i) EXPECT_EQ(out[i], kv[2 * d + i]);
  SinkAttention(q.data(), kv.data(), one, d, 0.0f, 0.0f, out.data());
  for (int i = 0; i < d; ++i) EXPECT_EQ(out[i], Bf16ToF32(F32ToBf16(kv[2 * d + i] / 2)));
  const std::vector<std::int32_t> none = {-1, -1};
  SinkAttention(q.data(), kv.data(), none, d, 1.0f, 0.0f, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

std::vector<std::int32_t> Window(std::int64_t position, int window, bool ring, std::int64_t rows) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(ring ? window : std::min<std::int64_t>(window, rows)));
  WindowIndices(position, window, ring, rows, out.data());
  return out;
}

TEST(SinkAttention, WindowIndicesAtPrefillAndInDecode) {
  using V = std::vector<std::int32_t>;
  // Prefill of 6 tokens, window 4: each row sees itself and the 3 before it.
  EXPECT_EQ(Window(0, 4, false, 6), (V{0, -1, -1, -1}));
  EXPECT_EQ(Window(2, 4, false, 6), (V{0, 1, 2, -1}));
  EXPECT_EQ(Window(5, 4, false, 6), (V{2, 3, 4, 5}));
  EXPECT_EQ(Window(1, 4, false, 2), (V{0, 1}));  // a prompt shorter than the window
  // Decode over the ring (slot = position % 4), oldest slot first, unwritten ones −1.
  EXPECT_EQ(Window(1, 4, true, 0), (V{-1, -1, 0, 1}));
  EXPECT_EQ(Window(3, 4, true, 0), (V{0, 1, 2, 3}));
  EXPECT_EQ(Window(6, 4, true, 0), (V{3, 0, 1, 2}));
  EXPECT_EQ(Window(7, 4, true, 0), (V{0, 1, 2, 3}));
}

}  // namespace
}  // namespace tandem::rt
