// DeepSeek V4.1's FP8 and FP4 products (runtime/kernels/microscaled_matrix): every path this
// CPU has gives the bits of a plain computation of the reference's definition — each 32-wide
// block's exact sum rounded once to fp32, times the input's then the weight's scale, added
// block by block in fp32, rounded to bf16 — whatever the rows (whole tiles of 16 or not), the
// block count (odd or even), the batch, the threads, and inputs with E4M3 subnormals.
#include "runtime/kernels/microscaled_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/kernels/cpu_features.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/numeric/dtype.hpp"
#include "runtime/numeric/microscaling.hpp"

namespace tandem::rt {
namespace {

using Format = MicroscaledMatrix::Format;

MicroscaledMatrix Random(Format format, std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> values(static_cast<std::size_t>(format == Format::kFp8Block32 ? rows * cols : rows * cols / 2));
  for (std::uint8_t& v : values) {
    v = static_cast<std::uint8_t>(rng());
    if (format == Format::kFp8Block32 && (v & 0x7f) == 0x7f) v = static_cast<std::uint8_t>(v - 1);  // no NaN
  }
  const std::int64_t blocks = cols / 32;
  std::vector<std::uint8_t> scales(static_cast<std::size_t>(format == Format::kFp8Block32 ? (rows + 31) / 32 * blocks : rows * blocks));
  for (std::uint8_t& s : scales) s = static_cast<std::uint8_t>(110 + rng() % 30);
  if (!scales.empty()) scales[0] = 0;  // E8M0's smallest, 2^-127
  return MicroscaledMatrix::Copy(format, rows, cols, values, scales);
}

// The definition, computed plainly from At() and the input's E4M3 round trip: `Acc` float
// (MatMul: the fp32 running sum, rounded to bf16) or double (MatMulF64: not rounded).
template <class Acc = float>
std::vector<Acc> Expected(const MicroscaledMatrix& w, const std::vector<float>& x, std::int64_t batch) {
  const std::int64_t blocks = w.cols / 32;
  std::vector<Acc> y(static_cast<std::size_t>(batch * w.rows));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t o = 0; o < w.rows; ++o) {
      Acc acc = 0;
      for (std::int64_t k = 0; k < blocks; ++k) {
        const float* v = x.data() + b * w.cols + k * 32;
        float amax = 0.0f;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[i]));
        const float s = RoundScalePow2(std::max(amax, 1e-4f), 1.0f / 448.0f);
        // At() is the code times the weight's scale: a power of two, so the exact sum of
        // At() products rounded to fp32 is the definition's partial times that scale.
        double sum = 0.0;
        for (int i = 0; i < 32; ++i) {
          const std::int64_t c = k * 32 + i;
          const double q = F8E4M3ToF32(F32ToF8E4M3(std::clamp(v[i] / s, -448.0f, 448.0f)));
          sum += q * static_cast<double>(w.At(o, c));
        }
        acc += static_cast<Acc>(static_cast<float>(sum)) * static_cast<Acc>(s);
      }
      y[static_cast<std::size_t>(b * w.rows + o)] = std::is_same_v<Acc, float> ? Bf16ToF32(F32ToBf16(static_cast<float>(acc))) : acc;
    }
  }
  return y;
}

TEST(MicroscaledMatrix, EveryPathGivesTheDefinitionsBits) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  ThreadPool pool(2);
  for (const Format format : {Format::kFp4Row32, Format::kFp8Block32}) {
    for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{{16, 64}, {37, 96}, {64, 256}, {5, 32}}) {
      const MicroscaledMatrix w = Random(format, rows, cols, static_cast<unsigned>(rows * cols));
      const std::int64_t batch = 6;  // the tiles take inputs four at a time, then the rest (and below one alone)
      std::vector<float> x(static_cast<std::size_t>(batch * cols));
      for (std::size_t i = 0; i < x.size(); ++i) {
        // Blocks that mix one large value with tiny ones: E4M3 subnormals after the scale.
        x[i] = Bf16ToF32(F32ToBf16(i % 32 == 7 ? 300.0f * normal(rng) : normal(rng) * (i % 3 == 0 ? 1e-3f : 1.0f)));
      }
      const std::vector<float> expected = Expected(w, x, batch);
      for (const Isa isa : kAllIsas) {
        if (isa > DetectedIsa()) continue;
        const Isa previous = SetActiveIsa(isa);
        for (const bool bytes : {true, false}) {  // the FP4 tiles' byte path where the CPU has it, and the int16 one
          AllowFp4BytePath(bytes);
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            std::vector<float> y(expected.size());
            MatMul(w, x.data(), batch, y.data(), p);
            EXPECT_EQ(y, expected) << (format == Format::kFp4Row32 ? "fp4 " : "fp8 ") << rows << "×" << cols << " on " << ToString(isa)
                                   << (bytes ? "" : " (int16 tiles)");
            // One row alone: the same bits.
            std::vector<float> one(static_cast<std::size_t>(rows));
            MatMul(w, x.data() + cols, 1, one.data(), p);
            EXPECT_TRUE(std::equal(one.begin(), one.end(), expected.begin() + rows));
          }
        }
        AllowFp4BytePath(true);
        SetActiveIsa(previous);
      }
    }
  }
}

std::vector<float> Input(std::int64_t batch, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(batch * cols));
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = Bf16ToF32(F32ToBf16(i % 32 == 7 ? 300.0f * normal(rng) : normal(rng) * (i % 3 == 0 ? 1e-3f : 1.0f)));
  }
  return x;
}

// The unrounded product: the definition's terms summed in double, on every path.
TEST(MicroscaledMatrix, F64ProductIsTheDefinitionsUnroundedSum) {
  ThreadPool pool(2);
  for (const Format format : {Format::kFp4Row32, Format::kFp8Block32}) {
    for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{{16, 64}, {37, 96}, {64, 256}, {5, 32}}) {
      const MicroscaledMatrix w = Random(format, rows, cols, static_cast<unsigned>(rows + cols));
      const std::int64_t batch = 7;
      const std::vector<float> x = Input(batch, cols, 11);
      const std::vector<double> expected = Expected<double>(w, x, batch);
      for (const Isa isa : kAllIsas) {
        if (isa > DetectedIsa()) continue;
        const Isa previous = SetActiveIsa(isa);
        for (const bool bytes : {true, false}) {
          AllowFp4BytePath(bytes);
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            std::vector<double> y(expected.size());
            MatMulF64(w, x.data(), batch, y.data(), p);
            EXPECT_EQ(y, expected) << (format == Format::kFp4Row32 ? "fp4 " : "fp8 ") << rows << "×" << cols << " on " << ToString(isa)
                                   << (bytes ? "" : " (int16 tiles)");
          }
        }
        AllowFp4BytePath(true);
        SetActiveIsa(previous);
      }
    }
  }
}

// A rank holding some rows of gate/up and the matching columns of down: its rows are the
// whole matrix's rows, and the column slices' unrounded products add up to the whole's.
TEST(MicroscaledMatrix, SlicesAddUpToTheWhole) {
  for (const Format format : {Format::kFp4Row32, Format::kFp8Block32}) {
    const std::int64_t rows = 48, cols = 256, batch = 2;
    const MicroscaledMatrix w = Random(format, rows, cols, 5);
    const std::vector<float> x = Input(batch, cols, 12);
    std::vector<double> whole(static_cast<std::size_t>(batch * rows));
    MatMulF64(w, x.data(), batch, whole.data(), nullptr);
    std::vector<double> sum(whole.size(), 0.0);
    for (const auto& [begin, end] : std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 64}, {64, 192}, {192, 256}}) {
      const MicroscaledMatrix part = w.Columns(begin, end);
      std::vector<float> xs;
      for (std::int64_t b = 0; b < batch; ++b) xs.insert(xs.end(), x.begin() + b * cols + begin, x.begin() + b * cols + end);
      std::vector<double> y(whole.size());
      MatMulF64(part, xs.data(), batch, y.data(), nullptr);
      for (std::size_t i = 0; i < y.size(); ++i) sum[i] += y[i];
    }
    EXPECT_EQ(sum, whole);
    std::vector<float> all(static_cast<std::size_t>(batch * rows));
    MatMul(w, x.data(), batch, all.data(), nullptr);
    const MicroscaledMatrix top = w.Rows(32, 48);
    std::vector<float> some(static_cast<std::size_t>(batch * 16));
    MatMul(top, x.data(), batch, some.data(), nullptr);
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t r = 0; r < 16; ++r) {
        EXPECT_EQ(some[static_cast<std::size_t>(b * 16 + r)], all[static_cast<std::size_t>(b * rows + 32 + r)]);
      }
    }
  }
  const MicroscaledMatrix fp8 = Random(Format::kFp8Block32, 64, 64, 1);
  EXPECT_THROW(fp8.Rows(16, 64), std::invalid_argument) << "cuts a 32-row scale block";
  EXPECT_THROW(fp8.Columns(0, 48), std::invalid_argument);
}

TEST(MicroscaledMatrix, SizesThatDoNotFitAreRefused) {
  const std::vector<std::uint8_t> bytes(64);
  EXPECT_THROW(MicroscaledMatrix::Copy(Format::kFp4Row32, 2, 48, bytes, bytes), std::invalid_argument);
  EXPECT_THROW(MicroscaledMatrix::Copy(Format::kFp4Row32, 2, 64, bytes, bytes), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::rt
