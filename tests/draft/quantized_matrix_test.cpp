#include "runtime/kernels/quantized_matrix.hpp"

#include <cmath>
#include <memory>
#include <random>

#include <gtest/gtest.h>

#include "runtime/kernels/cpu_features.hpp"
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
  // Whole tiles of 16 rows are stored: 24 rows take 32.
  const std::size_t stored_rows = 32;
  EXPECT_EQ(q.bytes(), stored_rows * 256 / (format == QuantFormat::kInt8 ? 1 : 2) + stored_rows * (256 / group) * 4);
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

// The inputs as the kernels see them: per block of 32, d = max|x| / 127 and
// round-half-even(x · 127 / max|x|) (quantized_rows.hpp).
std::vector<double> QuantizedInputs(const float* x, std::int64_t n, std::vector<double>& step) {
  std::vector<double> out(static_cast<std::size_t>(n));
  step.assign(static_cast<std::size_t>(n / 32), 0.0);
  for (std::int64_t k = 0; k < n / 32; ++k) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::abs(x[k * 32 + i]));
    const float d = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
    step[static_cast<std::size_t>(k)] = d;
    for (int i = 0; i < 32; ++i) out[static_cast<std::size_t>(k * 32 + i)] = std::nearbyint(x[k * 32 + i] * inv) * static_cast<double>(d);
  }
  return out;
}

TEST_P(QuantizedMatrixTest, MatMulIsTheProductOfTheQuantizedOperandsOnEveryPath) {
  const auto [format, group] = GetParam();
  // Enough rows that the pool splits them between its threads; 256 columns are
  // whole pairs of input blocks, 96 (with group 32) leave an unpaired last block.
  for (const std::int64_t cols : {256, 96}) {
    if (cols % group != 0) continue;
    SCOPED_TRACE(cols);
    const WeightMatrix w = RandomMatrix(300, cols, 2);
    const QuantizedMatrix q = QuantizedMatrix::Quantize(w, format, group);
    constexpr int kBatch = 7;
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0, 1);
    std::vector<float> x(static_cast<std::size_t>(kBatch * w.cols));
    for (float& v : x) v = normal(rng);
    for (int i = 0; i < 32; ++i) x[static_cast<std::size_t>(32 + i)] = 0.0f;  // an all-zero block
    x[5] = 40.0f;                                                             // an outlier in another
    std::vector<float> y(static_cast<std::size_t>(kBatch * w.rows));
    ThreadPool pool(3);
    MatMul(q, x.data(), kBatch, y.data(), &pool);
    std::vector<float> portable(y.size());
    const Isa active = SetActiveIsa(Isa::kPortable);
    MatMul(q, x.data(), kBatch, portable.data(), nullptr);
    SetActiveIsa(active);
    for (int b = 0; b < kBatch; ++b) {
      std::vector<float> alone(static_cast<std::size_t>(w.rows));
      MatMul(q, x.data() + b * w.cols, 1, alone.data(), nullptr);
      std::vector<double> step;
      const std::vector<double> xq = QuantizedInputs(x.data() + b * w.cols, w.cols, step);
      for (std::int64_t o = 0; o < w.rows; ++o) {
        double exact = 0, magnitude = 0, unquantized = 0, input_error = 0;
        for (std::int64_t i = 0; i < w.cols; ++i) {
          const double wi = q.At(o, i), xi = x[static_cast<std::size_t>(b * w.cols + i)];
          exact += wi * xq[static_cast<std::size_t>(i)];
          magnitude += std::abs(wi * xq[static_cast<std::size_t>(i)]);
          unquantized += wi * xi;
          input_error += std::abs(wi) * step[static_cast<std::size_t>(i / 32)] / 2;  // each input is off by at most half a step
        }
        const float got = y[static_cast<std::size_t>(b * w.rows + o)];
        EXPECT_NEAR(got, exact, 1e-6 * magnitude + 1e-6) << "row " << o << " batch " << b;
        EXPECT_LE(std::abs(got - unquantized), input_error * 1.001 + 1e-5) << "row " << o << " batch " << b;
        EXPECT_EQ(portable[static_cast<std::size_t>(b * w.rows + o)], got) << "the portable loops compute the same order, row " << o;
        EXPECT_EQ(got, alone[static_cast<std::size_t>(o)]) << "a row's result does not depend on its batch or the threads";
      }
    }
    // Every SIMD path this CPU has gives the same bits.
    for (Isa isa : kAllIsas) {
      if (isa > DetectedIsa()) continue;
      const Isa before = SetActiveIsa(isa);
      std::vector<float> other(y.size());
      MatMul(q, x.data(), kBatch, other.data(), &pool);
      SetActiveIsa(before);
      EXPECT_EQ(other, y) << ToString(isa);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedMatrixTest,
                         ::testing::Values(std::tuple{QuantFormat::kInt8, 32}, std::tuple{QuantFormat::kInt8, 128},
                                           std::tuple{QuantFormat::kInt4, 32}, std::tuple{QuantFormat::kInt4, 64}),
                         [](const auto& p) {
                           return std::string(ToString(std::get<0>(p.param))) + "_g" + std::to_string(std::get<1>(p.param));
                         });

TEST(QuantizedMatrix, RowMajorOrderRoundTripsThroughTheKernelsLayout) {
  for (const QuantFormat format : {QuantFormat::kInt8, QuantFormat::kInt4}) {
    SCOPED_TRACE(ToString(format));
    const WeightMatrix w = RandomMatrix(37, 96, 4);  // a partial last tile
    const QuantizedMatrix q = QuantizedMatrix::Quantize(w, format, 32);
    const auto [values, scales] = q.RowMajor();
    ASSERT_EQ(values.size(), static_cast<std::size_t>(format == QuantFormat::kInt8 ? 37 * 96 : 37 * 48));
    ASSERT_EQ(scales.size(), static_cast<std::size_t>(37 * 3));
    for (std::int64_t r = 0; r < 37; ++r) {
      for (std::int64_t c = 0; c < 96; ++c) {
        const std::size_t i = static_cast<std::size_t>(r * 96 + c);
        const int level = format == QuantFormat::kInt8
                              ? static_cast<std::int8_t>(values[i])
                              : ((values[i / 2] >> (4 * (i % 2))) & 0xF) - ((values[i / 2] >> (4 * (i % 2))) & 0x8) * 2;
        ASSERT_EQ(level, q.Level(r, c)) << r << "," << c;
        ASSERT_EQ(scales[static_cast<std::size_t>(r * 3 + c / 32)], q.Scale(r, c));
      }
    }
    const QuantizedMatrix back = QuantizedMatrix::FromRowMajor(format, 37, 96, 32, values, scales);
    EXPECT_EQ(back.values, q.values);
    EXPECT_EQ(back.scales, q.scales);
    EXPECT_THROW(QuantizedMatrix::FromRowMajor(format, 36, 96, 32, values, scales), std::invalid_argument);
  }
}

// Rows and StackRows copy whole tiles where they can and rearrange rows where they
// cannot: both ways give the same matrix as quantizing the rows themselves.
TEST(QuantizedMatrix, RowsAndStacksOfWholeTilesOrNotAreTheQuantizedRows) {
  for (const QuantFormat format : {QuantFormat::kInt8, QuantFormat::kInt4}) {
    SCOPED_TRACE(ToString(format));
    const WeightMatrix w = RandomMatrix(45, 64, 5);
    const QuantizedMatrix q = QuantizedMatrix::Quantize(w, format, 32);
    for (const auto& [first, count] : {std::pair{0, 16}, std::pair{16, 29}, std::pair{32, 13}, std::pair{3, 20}, std::pair{16, 16}}) {
      SCOPED_TRACE(testing::Message() << "rows " << first << " + " << count);
      const QuantizedMatrix part = q.Rows(first, count);
      const QuantizedMatrix expected = QuantizedMatrix::Quantize(w.RowSlice(first, count), format, 32);
      EXPECT_EQ(part.values, expected.values);
      EXPECT_EQ(part.scales, expected.scales);
    }
    for (const std::int64_t split : {16, 32, 7}) {
      SCOPED_TRACE(testing::Message() << "stacked at " << split);
      const QuantizedMatrix stacked = QuantizedMatrix::StackRows(q.Rows(0, split), q.Rows(split, 45 - split));
      EXPECT_EQ(stacked.rows, 45);
      EXPECT_EQ(stacked.values, q.values);
      EXPECT_EQ(stacked.scales, q.scales);
    }
  }
}

TEST(QuantizedMatrix, GroupsAreWholeInputBlocksThatFillTheRows) {
  const WeightMatrix w = RandomMatrix(2, 96, 4);
  EXPECT_THROW(QuantizedMatrix::Quantize(w, QuantFormat::kInt8, 64), std::invalid_argument);  // 96 columns
  EXPECT_THROW(QuantizedMatrix::Quantize(w, QuantFormat::kInt8, 16), std::invalid_argument);  // not a multiple of 32
  EXPECT_NO_THROW(QuantizedMatrix::Quantize(w, QuantFormat::kInt8, 32));
}

TEST(QuantizedMatrix, ZeroGroupsStayZero) {
  std::shared_ptr<float[]> zeros(new float[64]());
  const QuantizedMatrix q = QuantizedMatrix::Quantize(WeightMatrix::OwnedF32(2, 32, zeros), QuantFormat::kInt4, 32);
  for (int c = 0; c < 32; ++c) EXPECT_EQ(q.At(1, c), 0.0f);
}

}  // namespace
}  // namespace tandem::rt
