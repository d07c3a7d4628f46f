#include "runtime/kernels/quantized_matrix.hpp"

#include <cmath>
#include <memory>
#include <random>

#include <gtest/gtest.h>

#include "runtime/kernels/thread_pool.hpp"

namespace tandem::rt {
namespace {

WeightMatrix RandomMatrix(std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::shared_ptr<float[]> values(new float[static_cast<std::size_t>(rows * cols)]);
  for (std::int64_t i = 0; i < rows * cols; ++i) values[static_cast<std::size_t>(i)] = normal(rng);
  // An outlier per row: what group scales exist for.
  for (std::int64_t r = 0; r < rows; ++r) values[static_cast<std::size_t>(r * cols + (r * 7) % cols)] = 0.8f;
  return WeightMatrix::OwnedF32(rows, cols, values);
}

class QuantizedMatrixTest : public ::testing::TestWithParam<std::tuple<QuantFormat, int>> {};

TEST_P(QuantizedMatrixTest, ErrorStaysWithinHalfAStepOfItsGroup) {
  const auto [format, group] = GetParam();
  const WeightMatrix w = RandomMatrix(24, 256, 1);
  const QuantizedMatrix q = QuantizedMatrix::Quantize(w, format, group);
  const int levels = format == QuantFormat::kInt8 ? 127 : 7;
  EXPECT_EQ(q.bytes(), static_cast<std::size_t>(24 * 256) / (format == QuantFormat::kInt8 ? 1 : 2) + 24 * (256 / group) * 4);
  for (std::int64_t r = 0; r < w.rows; ++r) {
    for (std::int64_t g = 0; g < w.cols / group; ++g) {
      float amax = 0;
      for (int i = 0; i < group; ++i) amax = std::max(amax, std::abs(w.At(r, g * group + i)));
      const float step = amax / static_cast<float>(levels);
      for (int i = 0; i < group; ++i) {
        const std::int64_t c = g * group + i;
        EXPECT_LE(std::abs(q.At(r, c) - w.At(r, c)), 0.5f * step * 1.0001f) << r << "," << c;
      }
    }
  }
}

TEST_P(QuantizedMatrixTest, MatMulIsTheDequantizedProductAndBatchInvariant) {
  const auto [format, group] = GetParam();
  const WeightMatrix w = RandomMatrix(40, 128, 2);
  const QuantizedMatrix q = QuantizedMatrix::Quantize(w, format, group);
  constexpr int kBatch = 7;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<float> x(static_cast<std::size_t>(kBatch * w.cols));
  for (float& v : x) v = uniform(rng);
  std::vector<float> y(static_cast<std::size_t>(kBatch * w.rows));
  ThreadPool pool(3);
  MatMul(q, x.data(), kBatch, y.data(), &pool);
  std::vector<float> portable(y.size());
  MatMulPortable(q, x.data(), kBatch, portable.data());
  for (int b = 0; b < kBatch; ++b) {
    std::vector<float> alone(static_cast<std::size_t>(w.rows));
    MatMul(q, x.data() + b * w.cols, 1, alone.data(), nullptr);
    for (std::int64_t o = 0; o < w.rows; ++o) {
      double expected = 0;
      for (std::int64_t i = 0; i < w.cols; ++i) expected += static_cast<double>(q.At(o, i)) * x[static_cast<std::size_t>(b * w.cols + i)];
      const float got = y[static_cast<std::size_t>(b * w.rows + o)];
      EXPECT_NEAR(got, expected, 1e-4) << "row " << o << " batch " << b;
      EXPECT_NEAR(portable[static_cast<std::size_t>(b * w.rows + o)], expected, 1e-4) << "portable loop, row " << o;
      EXPECT_EQ(got, alone[static_cast<std::size_t>(o)]) << "a row's result does not depend on its batch or the threads";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedMatrixTest,
                         ::testing::Values(std::tuple{QuantFormat::kInt8, 32}, std::tuple{QuantFormat::kInt8, 128},
                                           std::tuple{QuantFormat::kInt4, 32}, std::tuple{QuantFormat::kInt4, 64}),
                         [](const auto& p) {
                           return std::string(ToString(std::get<0>(p.param))) + "_g" + std::to_string(std::get<1>(p.param));
                         });

TEST(QuantizedMatrix, ColumnsMustFillWholeGroups) {
  const WeightMatrix w = RandomMatrix(2, 48, 4);
  EXPECT_THROW(QuantizedMatrix::Quantize(w, QuantFormat::kInt8, 32), std::invalid_argument);
  EXPECT_NO_THROW(QuantizedMatrix::Quantize(w, QuantFormat::kInt8, 16));
}

TEST(QuantizedMatrix, ZeroGroupsStayZero) {
  std::shared_ptr<float[]> zeros(new float[64]());
  const QuantizedMatrix q = QuantizedMatrix::Quantize(WeightMatrix::OwnedF32(2, 32, zeros), QuantFormat::kInt4, 32);
  for (int c = 0; c < 32; ++c) EXPECT_EQ(q.At(1, c), 0.0f);
}

}  // namespace
}  // namespace tandem::rt
