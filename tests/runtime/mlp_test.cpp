// MlpForwardMany, as a MoE layer runs its experts (a shared expert's 16 rows and routed
// experts' 1–3 each, as at C16): each MLP gets the bits it gets alone on one thread, for
// bf16 experts and int8 ones with gate and up fused (their activations packed between
// the two passes), for fp32 and double outputs, with a few experts and with many.
#include "runtime/engine/mlp.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/kernels/quantized_matrix.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/numeric/dtype.hpp"

namespace tandem::rt {
namespace {

constexpr std::int64_t kHidden = 512, kInter = 128;  // the small preset's expert

WeightMatrix RandomBf16(std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::shared_ptr<std::uint16_t[]> v(new std::uint16_t[static_cast<std::size_t>(rows * cols)]);
  for (std::int64_t i = 0; i < rows * cols; ++i) v[static_cast<std::size_t>(i)] = F32ToBf16(normal(rng));
  return WeightMatrix::OwnedBf16(rows, cols, v);
}

// A routed expert: bf16, or int8 with gate and up stacked into one matrix as MoeSlices
// fuses a quantized expert's.
MlpWeights RandomExpert(bool quantized, std::mt19937& rng) {
  MlpWeights m{RandomBf16(kInter, kHidden, rng), RandomBf16(kInter, kHidden, rng), RandomBf16(kHidden, kInter, rng), {}};
  if (!quantized) return m;
  const auto q = [](const WeightMatrix& w) { return QuantizedMatrix::Quantize(w, QuantFormat::kInt8, 32); };
  m.gate_up = WeightMatrix::FromQuantized(std::make_shared<const QuantizedMatrix>(QuantizedMatrix::StackRows(q(m.gate), q(m.up))));
  m.down = WeightMatrix::FromQuantized(std::make_shared<const QuantizedMatrix>(q(m.down)));
  m.gate = m.up = WeightMatrix{};
  return m;
}

struct Layer {
  std::vector<MlpWeights> experts;
  std::vector<std::vector<float>> inputs;
  std::vector<std::int64_t> rows;
};

Layer RandomLayer(std::size_t experts, bool quantized, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Layer l;
  for (std::size_t e = 0; e < experts; ++e) {
    l.experts.push_back(RandomExpert(quantized, rng));
    l.rows.push_back(e == 0 ? 16 : 1 + static_cast<std::int64_t>(rng() % 3));  // a shared expert's 16 rows, routed 1–3
    std::vector<float> x(static_cast<std::size_t>(l.rows.back() * kHidden));
    for (float& v : x) v = normal(rng);
    l.inputs.push_back(std::move(x));
  }
  return l;
}

// Every expert through one MlpForwardMany on `pool`, fp32 outputs, and every other
// expert's also in double: each against MlpForward alone on one thread.
void ExpectEachMlpsOwnBits(const Layer& l, ThreadPool& pool) {
  std::vector<std::vector<float>> out(l.experts.size());
  std::vector<std::vector<double>> out64(l.experts.size());
  std::vector<MlpTask> tasks;
  for (std::size_t e = 0; e < l.experts.size(); ++e) {
    const auto n = static_cast<std::size_t>(l.rows[e] * kHidden);
    if (e % 2 == 0) {
      out[e].assign(n, 0.0f);
      tasks.push_back({&l.experts[e], l.inputs[e].data(), l.rows[e], out[e].data(), nullptr});
    } else {
      out64[e].assign(n, 0.0);
      tasks.push_back({&l.experts[e], l.inputs[e].data(), l.rows[e], nullptr, out64[e].data()});
    }
  }
  Workspace<float> scratch;
  MlpForwardMany(tasks, scratch, &pool);
  Workspace<float> alone_scratch;
  for (std::size_t e = 0; e < l.experts.size(); ++e) {
    const MlpTask alone_task = tasks[e];
    std::vector<float> alone(out[e].size());
    std::vector<double> alone64(out64[e].size());
    MlpTask t = alone_task;
    t.out = alone_task.out != nullptr ? alone.data() : nullptr;
    t.out64 = alone_task.out64 != nullptr ? alone64.data() : nullptr;
    MlpForwardMany(std::span<const MlpTask>(&t, 1), alone_scratch, nullptr);
    EXPECT_EQ(out[e], alone) << "expert " << e << " of " << l.experts.size();
    EXPECT_EQ(out64[e], alone64) << "expert " << e << " of " << l.experts.size();
  }
}

TEST(MlpForwardMany, GivesEachMlpTheBitsItGetsAloneOnOneThread) {
  ThreadPool pool(2);
  for (bool quantized : {false, true}) {
    for (std::size_t experts : {std::size_t{5}, std::size_t{40}}) {
      SCOPED_TRACE(testing::Message() << experts << " experts, " << (quantized ? "int8" : "bf16"));
      ExpectEachMlpsOwnBits(RandomLayer(experts, quantized, static_cast<unsigned>(experts) + (quantized ? 100u : 0u)), pool);
    }
  }
}

}  // namespace
}  // namespace tandem::rt

namespace tandem::rt {
namespace {

// DeepSeek V4.1's clamp: the gate bounded from above only, up both ways, before SiLU.
TEST(Mlp, TheSwigluClampBoundsTheGateFromAboveAndTheUpBothWays) {
  constexpr std::int64_t n = 32;
  auto diagonal = [](float value) {
    std::shared_ptr<float[]> v(new float[n * n]());
    for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i * n + i)] = value;
    return WeightMatrix::OwnedF32(n, n, v);
  };
  MlpWeights m{diagonal(20.0f), diagonal(20.0f), diagonal(1.0f), {}};
  std::vector<float> x(n);
  for (std::int64_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(i - 16) / 8.0f;  // −2 … 1.875
  auto silu = [](double g) { return g / (1.0 + std::exp(-g)); };
  for (const float limit : {0.0f, 10.0f}) {
    m.swiglu_limit = limit;
    std::vector<float> out(n);
    Workspace<float> scratch;
    MlpForward(m, x.data(), 1, out.data(), scratch, nullptr);
    for (std::int64_t i = 0; i < n; ++i) {
      double g = 20.0 * x[static_cast<std::size_t>(i)], u = g;
      if (limit > 0) {
        g = std::min(g, 10.0);
        u = std::clamp(u, -10.0, 10.0);
      }
      const double want = silu(g) * u;
      EXPECT_NEAR(out[static_cast<std::size_t>(i)], want, 1e-5 * std::max(1.0, std::fabs(want)))
          << "limit " << limit << ", x " << x[static_cast<std::size_t>(i)];
    }
  }
}

}  // namespace
}  // namespace tandem::rt
