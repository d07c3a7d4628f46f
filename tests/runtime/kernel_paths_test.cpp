// The dense kernels on every instruction-set path this CPU has: the same bits on
// every path, in every batch, on any thread count, and the right values. The paths
// that round inputs (AVX-512 BF16 and AMX, for bf16 weights) are checked against the
// exact paths within that rounding, and for their own batch and thread invariance.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runtime/kernels/attention_rows.hpp"
#include "runtime/kernels/cpu_features.hpp"
#include "runtime/kernels/dense_rows.hpp"
#include "runtime/kernels/latent_attention.hpp"
#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/ops.hpp"
#include "runtime/kernels/quantized_matrix.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/numeric/dtype.hpp"

namespace tandem::rt {
namespace {

enum class Format { kF32, kBf16, kFp8 };

// A random [rows × cols] matrix; fp8 with a 128 × 128 block-scale grid of varied scales.
WeightMatrix RandomMatrix(Format format, std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  const auto n = static_cast<std::size_t>(rows * cols);
  if (format == Format::kF32) {
    std::shared_ptr<float[]> v(new float[n]);
    for (std::size_t i = 0; i < n; ++i) v[i] = normal(rng);
    return WeightMatrix::OwnedF32(rows, cols, v);
  }
  if (format == Format::kBf16) {
    std::shared_ptr<std::uint16_t[]> v(new std::uint16_t[n]);
    for (std::size_t i = 0; i < n; ++i) v[i] = F32ToBf16(normal(rng));
    return WeightMatrix::OwnedBf16(rows, cols, v);
  }
  std::shared_ptr<std::uint8_t[]> bytes(new std::uint8_t[n]);
  for (std::size_t i = 0; i < n; ++i) bytes[i] = F32ToF8E4M3(normal(rng) * 40.0f);
  const auto grid = static_cast<std::size_t>(((rows + 127) / 128) * ((cols + 127) / 128));
  std::shared_ptr<float[]> scales(new float[grid]);
  for (std::size_t i = 0; i < grid; ++i) scales[i] = 0.0025f * static_cast<float>(i + 1);
  return WeightMatrix::OwnedF8E4M3(rows, cols, bytes, scales);
}

std::vector<float> RandomInputs(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<Isa> AvailablePaths() {
  std::vector<Isa> paths;
  for (Isa isa : kAllIsas) {
    if (isa <= DetectedIsa()) paths.push_back(isa);
  }
  return paths;
}

// Row o of W · x[b] in double, with x rounded to bf16 first when asked, and the
// magnitude Σ|w·x| of the unrounded products (what error bounds scale with).
struct ExactRow {
  double sum = 0, magnitude = 0;
};
ExactRow Exact(const WeightMatrix& w, const std::vector<float>& x, std::int64_t b, std::int64_t o, bool bf16_inputs) {
  ExactRow r;
  for (std::int64_t i = 0; i < w.cols; ++i) {
    const float xi = x[static_cast<std::size_t>(b * w.cols + i)];
    const double wi = w.At(o, i);
    r.sum += wi * (bf16_inputs ? Bf16ToF32(F32ToBf16(xi)) : xi);
    r.magnitude += std::abs(wi * xi);
  }
  return r;
}

// The highest path whose results are the shared fixed-lane sums of fp32 inputs.
Isa ExactPath() { return std::min(DetectedIsa(), Isa::kAvx512); }

std::vector<float> Product(const WeightMatrix& w, const std::vector<float>& x, std::int64_t batch, ThreadPool* pool, Isa isa) {
  const Isa before = SetActiveIsa(isa);
  std::vector<float> y(static_cast<std::size_t>(batch * w.rows));
  MatMul(w, x.data(), batch, y.data(), pool);
  SetActiveIsa(before);
  return y;
}

class DensePaths : public ::testing::TestWithParam<Format> {};

TEST_P(DensePaths, EveryPathBatchAndThreadCountGivesTheSameBitsAndTheRightValues) {
  ThreadPool pool(3);
  // 512 columns (whole blocks), 200 (a tail of 8), 37 (less than one block), 96 (an odd
  // number of the bf16 dot-product path's 32-column blocks);
  // 300 rows cross fp8 row blocks and split over the pool's threads.
  for (const std::int64_t cols : {512, 200, 37, 96}) {
    const WeightMatrix w = RandomMatrix(GetParam(), 300, cols, static_cast<unsigned>(cols));
    constexpr std::int64_t kBatch = 37;  // the AMX path's inputs in groups of 16: two, then a partial one
    const std::vector<float> x = RandomInputs(kBatch * cols, 7);
    const std::vector<float> reference = Product(w, x, kBatch, &pool, ExactPath());
    for (std::int64_t b = 0; b < kBatch; ++b) {
      for (std::int64_t o = 0; o < w.rows; ++o) {
        const ExactRow e = Exact(w, x, b, o, false);
        ASSERT_NEAR(reference[static_cast<std::size_t>(b * w.rows + o)], e.sum, 1e-5 * e.magnitude + 1e-7) << cols << " cols, row " << o;
      }
    }
    for (Isa isa : AvailablePaths()) {
      // Paths that run the plain C++ loops (portable; fp8 on AVX+FMA, whose loop
      // reads e4m3 through a table) are only close: the compiler decides where it
      // fuses multiply-adds there. Every hand-written SIMD path is exact to the bit.
      const std::vector<float> y = Product(w, x, kBatch, nullptr, isa);
      if (isa >= Isa::kAvx512Bf16 && GetParam() == Format::kBf16) {
        // Products of bf16 weights and bf16-rounded inputs: right to fp32 summation
        // error, and within the inputs' rounding (2^-9 of Σ|w·x|) of the exact paths.
        for (std::int64_t b = 0; b < kBatch; ++b) {
          for (std::int64_t o = 0; o < w.rows; ++o) {
            const ExactRow e = Exact(w, x, b, o, true);
            const auto at = static_cast<std::size_t>(b * w.rows + o);
            ASSERT_NEAR(y[at], e.sum, 1e-5 * e.magnitude + 1e-7) << cols << " cols, row " << o;
            ASSERT_NEAR(y[at], reference[at], (std::ldexp(1.0, -9) + 1e-5) * e.magnitude + 1e-7) << cols << " cols, row " << o;
          }
        }
        // Not the exact paths' bits: rounding the inputs must show somewhere.
        EXPECT_NE(y, reference);
      } else if (isa == Isa::kPortable || (isa == Isa::kAvxFma && GetParam() == Format::kFp8)) {
        for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], reference[i], 1e-5f * (1 + std::abs(reference[i])));
      } else {
        EXPECT_EQ(y, reference) << ToString(isa) << ", " << cols << " columns";
      }
      for (std::int64_t batch : {1, 2, 3, 4, 5, 20}) {
        const std::vector<float> part(x.begin() + 2 * cols, x.begin() + (2 + batch) * cols);
        const std::vector<float> alone = Product(w, part, batch, &pool, isa);
        for (std::int64_t b = 0; b < batch; ++b) {
          for (std::int64_t o = 0; o < w.rows; ++o) {
            ASSERT_EQ(alone[static_cast<std::size_t>(b * w.rows + o)], y[static_cast<std::size_t>((2 + b) * w.rows + o)])
                << ToString(isa) << ": a row's result does not depend on its batch";
          }
        }
      }
    }
  }
}

TEST_P(DensePaths, RowSlicesReadTheFullMatrixsScales) {
  const WeightMatrix w = RandomMatrix(GetParam(), 300, 256, 3);
  const std::vector<float> x = RandomInputs(256, 4);
  for (Isa isa : AvailablePaths()) {
    const std::vector<float> full = Product(w, x, 1, nullptr, isa);
    const WeightMatrix slice = w.RowSlice(100, 150);  // crosses the fp8 row block at 128
    const std::vector<float> part = Product(slice, x, 1, nullptr, isa);
    for (std::int64_t o = 0; o < 150; ++o)
      EXPECT_EQ(part[static_cast<std::size_t>(o)], full[static_cast<std::size_t>(100 + o)]) << ToString(isa);
  }
}

// One input over a range of at least 256 KiB reads it in four streams (a row from
// each quarter of the range side by side, the rows a quarter leaves over one by
// one: matmul_avx2.cpp); a smaller range row by row. 1027 rows of 160 columns are
// 321 KiB of bf16 (four quarters of 256 rows and 3 left over); each row read alone
// must give the same bits, on one thread and on three (ranges too small to spread).
TEST_P(DensePaths, RowsReadInFourStreamsGiveTheBitsOfEachRowAlone) {
  const WeightMatrix w = RandomMatrix(GetParam(), 1027, 160, 9);
  const std::vector<float> x = RandomInputs(3 * 160, 10);
  ThreadPool pool(3);
  for (Isa isa : AvailablePaths()) {
    for (const std::int64_t batch : {1, 3}) {
      const std::vector<float> whole = Product(w, x, batch, nullptr, isa), shared = Product(w, x, batch, &pool, isa);
      EXPECT_EQ(shared, whole) << ToString(isa) << ", batch " << batch;
      for (std::int64_t o = 0; o < w.rows; ++o) {
        const std::vector<float> alone = Product(w.RowSlice(o, 1), x, batch, nullptr, isa);
        for (std::int64_t b = 0; b < batch; ++b) {
          ASSERT_EQ(alone[static_cast<std::size_t>(b)], whole[static_cast<std::size_t>(b * w.rows + o)])
              << ToString(isa) << ", batch " << batch << ", row " << o;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, DensePaths, ::testing::Values(Format::kF32, Format::kBf16, Format::kFp8), [](const auto& p) {
  return std::string(p.param == Format::kF32 ? "f32" : p.param == Format::kBf16 ? "bf16" : "fp8");
});

// MatMul gives one bf16 input to the AVX2 kernel or to the AVX-512 tiles by the CPU's
// maker (matmul.cpp), so either may go untested through MatMul: both called directly,
// whole and cut row ranges, with and without a next range to prefetch into. Outputs
// outside the range must stay as they were.
TEST(MatMul, OneBf16InputGivesTheSameBitsOnAvx2AndAvx512) {
  if (DetectedIsa() < Isa::kAvx512) return;                  // nothing to compare: MatMul takes the AVX2 kernel
  for (const std::int64_t cols : {512, 128, 100, 37, 16}) {  // whole cache-line pairs, whole registers, tails
    constexpr std::int64_t kRows = 38;
    const WeightMatrix w = RandomMatrix(Format::kBf16, kRows, cols, 22), next = RandomMatrix(Format::kBf16, 8, cols, 23);
    const auto* data = static_cast<const std::uint16_t*>(w.data);
    const std::vector<float> x = RandomInputs(cols, 24);
    std::vector<float> prepared(x.size());
    kernels::PrepareBf16InputAvx2(x.data(), 1, cols, prepared.data());
    for (const auto& [begin, end] : {std::pair<std::int64_t, std::int64_t>{0, kRows}, {3, 30}, {5, 6}, {0, 4}, {33, 38}}) {
      for (const bool with_next : {false, true}) {
        const kernels::RowStream stream{with_next ? static_cast<const char*>(next.data) : nullptr,
                                        with_next ? static_cast<std::int64_t>(next.bytes()) : 0, false};
        std::vector<float> avx2(kRows, -1.0f), avx512(kRows, -1.0f);
        kernels::RowsBf16Avx2(data, cols, prepared.data(), 1, avx2.data(), kRows, begin, end, stream);
        kernels::RowsBf16ManyAvx512(data, cols, x.data(), 1, avx512.data(), kRows, begin, end, stream);
        EXPECT_EQ(avx512, avx2) << "cols " << cols << ", rows [" << begin << ", " << end << ")" << (with_next ? ", next range" : "");
        for (std::int64_t o = 0; o < kRows; ++o) {
          if (o < begin || o >= end) {
            ASSERT_EQ(avx512[static_cast<std::size_t>(o)], -1.0f) << "cols " << cols << ", row " << o;
          }
        }
      }
    }
  }
}

// The AMX path computes 32 rows a pass: a range's last rows short of a pass take the
// pass over the matrix's 32 rows that end with them, or a zero-padded copy where the
// matrix is shorter than 32 rows. Either way each row must get its own bits: the whole
// matrix, on threads (ranges cut anywhere), and each row alone (a one-row slice: the
// copy), for batches of one, two and three groups of 16 inputs.
TEST(MatMul, AmxPassesGiveEachRowItsOwnBitsWhereverARangeEnds) {
  if (DetectedIsa() < Isa::kAmx) return;  // no AMX here: the path is never taken
  ThreadPool pool(3);
  for (const std::int64_t rows : {5, 31, 32, 45, 100}) {
    for (const std::int64_t cols : {64, 512}) {
      const WeightMatrix w = RandomMatrix(Format::kBf16, rows, cols, static_cast<unsigned>(rows + cols));
      for (const std::int64_t batch : {1, 17, 40}) {
        const std::vector<float> x = RandomInputs(batch * cols, 25);
        const std::vector<float> whole = Product(w, x, batch, nullptr, Isa::kAmx), shared = Product(w, x, batch, &pool, Isa::kAmx);
        const std::string what = fmt::format("rows {} cols {} batch {}", rows, cols, batch);
        ASSERT_EQ(shared, whole) << what << ", three threads";
        for (std::int64_t o = 0; o < rows; ++o) {
          const std::vector<float> alone = Product(w.RowSlice(o, 1), x, batch, nullptr, Isa::kAmx);
          for (std::int64_t b = 0; b < batch; ++b) {
            ASSERT_EQ(alone[static_cast<std::size_t>(b)], whole[static_cast<std::size_t>(b * rows + o)])
                << what << ", row " << o << " alone";
          }
        }
      }
    }
  }
}

TEST(MatMulMany, GivesWhatEachProductGivesAlone) {
  ThreadPool pool(2);
  const WeightMatrix a = RandomMatrix(Format::kBf16, 128, 512, 1), b = RandomMatrix(Format::kFp8, 130, 512, 2),
                     c = RandomMatrix(Format::kF32, 64, 96, 3);
  const std::vector<float> xa = RandomInputs(3 * 512, 5), xc = RandomInputs(3 * 96, 6);
  std::vector<float> ya(3 * 128), yb(3 * 130), yc(3 * 64);
  std::vector<double> yb64(3 * 130), ya64(3 * 128);
  const MatMulTask tasks[] = {{&a, xa.data(), 3, ya.data(), ya64.data()},  // both outputs of one product
                              {&b, xa.data(), 3, yb.data(), nullptr},
                              {&b, xa.data(), 3, nullptr, yb64.data()},
                              {&c, xc.data(), 3, yc.data(), nullptr}};
  MatMulMany(tasks, &pool);
  EXPECT_EQ(ya, Product(a, xa, 3, nullptr, ActiveIsa()));
  EXPECT_EQ(yb, Product(b, xa, 3, nullptr, ActiveIsa()));
  EXPECT_EQ(yc, Product(c, xc, 3, nullptr, ActiveIsa()));
  std::vector<double> alone(yb64.size());
  MatMulF64(b, xa.data(), 3, alone.data(), nullptr);
  EXPECT_EQ(yb64, alone);
  std::vector<double> a64(ya64.size());
  MatMulF64(a, xa.data(), 3, a64.data(), nullptr);
  EXPECT_EQ(ya64, a64);
}

// MatMulMany rearranges a bf16 input once for every product with that input, batch
// and width (AVX2 CPUs): products that share only the pointer must not share it.
// Consecutive bf16 products also hand their prefetch streams on to each other
// (RowStream); results must not notice, at any batch (5: the four-input tiles,
// then one more row).
TEST(MatMulMany, SharesARearrangedInputOnlyWhereInputBatchAndWidthMatch) {
  ThreadPool pool(2);
  const WeightMatrix gate = RandomMatrix(Format::kBf16, 128, 512, 21), up = RandomMatrix(Format::kBf16, 64, 512, 22),
                     other = RandomMatrix(Format::kBf16, 48, 512, 23), narrow = RandomMatrix(Format::kBf16, 32, 72, 24);
  const std::vector<float> x = RandomInputs(3 * 512, 25), x2 = RandomInputs(3 * 512, 26);
  std::vector<float> y_gate(3 * 128), y_up(3 * 64), y_batch2(2 * 48), y_narrow(3 * 32), y_x2(3 * 64);
  const MatMulTask tasks[] = {{&gate, x.data(), 3, y_gate.data(), nullptr},
                              {&up, x.data(), 3, y_up.data(), nullptr},          // shares gate's copy
                              {&other, x.data(), 2, y_batch2.data(), nullptr},   // same pointer, other batch
                              {&narrow, x.data(), 3, y_narrow.data(), nullptr},  // same pointer, other width (not whole blocks of 16)
                              {&up, x2.data(), 3, y_x2.data(), nullptr}};
  const std::vector<float> x5 = RandomInputs(5 * 512, 27);
  std::vector<float> y_gate5(5 * 128), y_up5(5 * 64);
  const MatMulTask batch5[] = {{&gate, x5.data(), 5, y_gate5.data(), nullptr}, {&up, x5.data(), 5, y_up5.data(), nullptr}};
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    MatMulMany(batch5, p);
    EXPECT_EQ(y_gate5, Product(gate, x5, 5, nullptr, ActiveIsa()));
    EXPECT_EQ(y_up5, Product(up, x5, 5, nullptr, ActiveIsa()));
    MatMulMany(tasks, p);
    EXPECT_EQ(y_gate, Product(gate, x, 3, nullptr, ActiveIsa()));
    EXPECT_EQ(y_up, Product(up, x, 3, nullptr, ActiveIsa()));
    EXPECT_EQ(y_batch2, Product(other, std::vector<float>(x.begin(), x.begin() + 2 * 512), 2, nullptr, ActiveIsa()));
    EXPECT_EQ(y_narrow, Product(narrow, std::vector<float>(x.begin(), x.begin() + 3 * 72), 3, nullptr, ActiveIsa()));
    EXPECT_EQ(y_x2, Product(up, x2, 3, nullptr, ActiveIsa()));
  }
}

// SwiGLU's and softmax's exp is a polynomial the compiler vectorises
// (activations.cpp): within a few ulp of double wherever the result is at least
// 1e-36 (below that SwiGLU, like silu in float with libm's exp, gives a zero or a
// value within 1e-36 of it), and the same bits for a value whether it falls in a
// vector or in the scalar tail of the loop.
TEST(SwiGlu, IsSiluTimesUpWithinAFewUlpAndTheSameInAndOutOfAVector) {
  std::vector<float> gate = {-1e30f, -120.0f, 1e30f};
  for (float g = -100.0f; g <= 100.0f; g += 0.000977f) gate.push_back(g);
  std::mt19937 rng(16);
  std::uniform_real_distribution<float> factor(0.5f, 2.0f);
  std::vector<float> up;
  for (std::size_t i = 0; i < gate.size(); ++i) up.push_back(factor(rng));
  std::vector<float> all = gate;
  SwiGlu(all.data(), up.data(), static_cast<std::int64_t>(all.size()));
  double worst = 0.0;
  for (std::size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    const double expected = g / (1.0 + std::exp(-g)) * up[i];
    if (std::fabs(expected) >= 1e-36) {
      worst = std::max(worst, std::fabs(all[i] - expected) / std::fabs(expected));
    } else {
      ASSERT_LE(std::fabs(all[i] - expected), 1e-36) << "gate " << gate[i];
    }
    float alone = gate[i];
    SwiGlu(&alone, &up[i], 1);
    ASSERT_EQ(alone, all[i]) << "gate " << gate[i];
  }
  EXPECT_LT(worst, 4.0 * 0x1p-23) << "worst relative error " << worst;
  float nan = std::nanf(""), one = 1.0f;
  SwiGlu(&nan, &one, 1);
  EXPECT_TRUE(std::isnan(nan));
}

TEST(Softmax, IsWithinAFewUlpOfDoubleAndExactlyZeroWhereExpWouldBeSubnormal) {
  constexpr float kLnSmallestNormal = -87.3365447f;
  for (const std::int64_t n : {1, 7, 8, 96, 1001}) {
    std::mt19937 rng(static_cast<unsigned>(17 + n));
    std::normal_distribution<float> normal(0.0f, 8.0f);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& v : x) v = normal(rng);
    if (n > 2) {
      x[1] = x[0] - 200.0f;  // far below the smallest normal float
      x[2] = x[0] - 80.0f;   // small but normal: not flushed
    }
    std::vector<float> p = x;
    Softmax(p.data(), n);
    // The differences from the max are taken in float, as the kernel does: what is
    // measured is the error of its exp and normalisation.
    const float max = *std::max_element(x.begin(), x.end());
    double sum = 0.0;
    for (float v : x) sum += std::exp(static_cast<double>(v - max));
    for (std::int64_t i = 0; i < n; ++i) {
      const float d = x[static_cast<std::size_t>(i)] - max;
      const double expected = std::exp(static_cast<double>(d)) / sum;
      const float got = p[static_cast<std::size_t>(i)];
      if (d < kLnSmallestNormal) {
        EXPECT_EQ(got, 0.0f) << "n " << n << ", i " << i;
      } else {
        EXPECT_LT(std::fabs(got - expected) / expected, 6.0 * 0x1p-23) << "n " << n << ", i " << i;
      }
    }
  }
}

TEST(LatentAttention, IsSoftmaxWeightedLatents) {
  constexpr std::int64_t kLatent = 128, kRope = 32, kStride = kLatent + kRope, kLen = 37;
  const std::vector<float> cache = RandomInputs(kLen * kStride, 8), q = RandomInputs(kLatent + kRope, 9);
  std::vector<float> scores(kLen), out(kLatent);
  LatentAttention(q.data(), q.data() + kLatent, cache.data(), kStride, kLen, kLatent, kRope, 0.1f, scores.data(), out.data());
  std::vector<double> p(kLen);
  double max = -1e300, sum = 0;
  for (std::int64_t t = 0; t < kLen; ++t) {
    double s = 0;
    for (std::int64_t i = 0; i < kStride; ++i)
      s += static_cast<double>(q[static_cast<std::size_t>(i)]) * cache[static_cast<std::size_t>(t * kStride + i)];
    p[static_cast<std::size_t>(t)] = s * 0.1;
    max = std::max(max, p[static_cast<std::size_t>(t)]);
  }
  for (double& v : p) sum += (v = std::exp(v - max));
  for (std::int64_t c = 0; c < kLatent; ++c) {
    double expected = 0;
    for (std::int64_t t = 0; t < kLen; ++t)
      expected += p[static_cast<std::size_t>(t)] / sum * cache[static_cast<std::size_t>(t * kStride + c)];
    EXPECT_NEAR(out[static_cast<std::size_t>(c)], expected, 1e-5);
  }
}

// The loops LatentAttention stands for, written out: a score as one Dot over the query's
// and the entry's latent and rope floats, the weighted sum fusing each product into its
// output (std::fma) over t ascending. (MatMulTransposed's loop, below, rounds each product
// before adding it: this file is compiled for the baseline target, which has no fused
// multiply-add to contract into.)
void AttentionAsLoops(const float* q_latent, const float* q_rope, const float* cache, std::int64_t stride, std::int64_t len,
                      std::int64_t latent, std::int64_t rope, float scale, float* out) {
  std::vector<float> q(q_latent, q_latent + latent);
  q.insert(q.end(), q_rope, q_rope + rope);
  std::vector<float> s(static_cast<std::size_t>(len));
  for (std::int64_t t = 0; t < len; ++t) s[static_cast<std::size_t>(t)] = Dot(q.data(), cache + t * stride, latent + rope) * scale;
  Softmax(s.data(), len);
  for (std::int64_t c = 0; c < latent; ++c) out[c] = 0.0f;
  for (std::int64_t t = 0; t < len; ++t) {
    for (std::int64_t c = 0; c < latent; ++c) out[c] = std::fma(s[static_cast<std::size_t>(t)], cache[t * stride + c], out[c]);
  }
}

TEST(LatentAttention, GivesTheBitsOfItsPlainLoopsForEveryShape) {
  // Latent widths with and without whole blocks of 64, 16 and 8; rope widths with a
  // tail past 16; lengths around the four entries the scores take at a time.
  for (const std::int64_t latent : {128, 512, 72, 20, 5}) {
    for (const std::int64_t rope : {32, 8, 0}) {
      for (const std::int64_t len : {1, 3, 4, 5, 37, 96}) {
        const std::int64_t stride = latent + rope + 3;  // entries not packed back to back
        const std::vector<float> cache = RandomInputs(len * stride, 10), q = RandomInputs(latent + rope, 11);
        std::vector<float> scores(static_cast<std::size_t>(len)), out(static_cast<std::size_t>(latent)),
            expected(static_cast<std::size_t>(latent));
        LatentAttention(q.data(), q.data() + latent, cache.data(), stride, len, latent, rope, 0.125f, scores.data(), out.data());
        AttentionAsLoops(q.data(), q.data() + latent, cache.data(), stride, len, latent, rope, 0.125f, expected.data());
        ASSERT_EQ(out, expected) << "latent " << latent << ", rope " << rope << ", len " << len;
      }
    }
  }
}

TEST(LatentAttention, HeadsTogetherGiveEachHeadItsOwnBits) {
  // Lengths within one block of cache entries and across several (a block is about
  // 16 KiB: 24 entries of the small preset's 160 floats; the strides here are 133–547
  // floats, 28–4 entries), queries not packed back to back.
  for (const std::int64_t latent : {128, 512, 72}) {
    for (const std::int64_t rope : {32, 0}) {
      for (const std::int64_t heads : {1, 3, 6, 8}) {  // AVX-512 tiles of 4 heads and each remainder
        for (const std::int64_t len : {1, 5, 24, 25, 97, 300}) {
          const std::int64_t stride = latent + rope + 3, q_stride = latent + rope + 5;
          const std::vector<float> cache = RandomInputs(len * stride, 14), q = RandomInputs(heads * q_stride, 15);
          std::vector<float> scores(static_cast<std::size_t>(heads * len)), out(static_cast<std::size_t>(heads * latent));
          LatentAttentionHeads(q.data(), q_stride, q.data() + latent, q_stride, heads, cache.data(), stride, len, latent, rope, 0.125f,
                               scores.data(), out.data());
          for (std::int64_t h = 0; h < heads; ++h) {
            std::vector<float> alone(static_cast<std::size_t>(latent)), loops(alone.size()), s(static_cast<std::size_t>(len));
            const float* qh = q.data() + h * q_stride;
            LatentAttention(qh, qh + latent, cache.data(), stride, len, latent, rope, 0.125f, s.data(), alone.data());
            AttentionAsLoops(qh, qh + latent, cache.data(), stride, len, latent, rope, 0.125f, loops.data());
            const std::vector<float> got(out.begin() + h * latent, out.begin() + (h + 1) * latent);
            ASSERT_EQ(got, alone) << "latent " << latent << ", rope " << rope << ", heads " << heads << ", len " << len << ", head " << h;
            ASSERT_EQ(got, loops) << "latent " << latent << ", rope " << rope << ", heads " << heads << ", len " << len << ", head " << h;
          }
        }
      }
    }
  }
}

// The AVX2 and AVX-512 forms called directly (LatentAttention picks the widest the CPU
// has, so on an AVX-512 machine the AVX2 forms would go untested): scores and weighted
// sums bit for bit against the loops they stand for, over one block of entries.
TEST(LatentAttention, SimdFormsGiveTheBitsOfTheirLoops) {
  const bool avx2 = DetectedIsa() >= Isa::kAvx2, avx512 = DetectedIsa() >= Isa::kAvx512;
  for (const std::int64_t dims : {160, 104, 37, 16, 5}) {  // whole registers of 16 and tails
    for (const std::int64_t heads : {1, 3, 4, 6}) {
      for (const std::int64_t len : {1, 3, 4, 9, 24}) {
        const std::int64_t stride = dims + 3, q_stride = dims + 5, latent = dims - dims / 5;
        const std::vector<float> cache = RandomInputs(len * stride, 18), q = RandomInputs(heads * q_stride, 19),
                                 p = RandomInputs(heads * len, 20), start = RandomInputs(heads * latent, 21);
        std::vector<float> scores(static_cast<std::size_t>(heads * len)), sums(static_cast<std::size_t>(heads * latent));
        for (std::int64_t h = 0; h < heads; ++h) {
          for (std::int64_t t = 0; t < len; ++t) {
            scores[static_cast<std::size_t>(h * len + t)] = Dot(q.data() + h * q_stride, cache.data() + t * stride, dims) * 0.125f;
          }
          for (std::int64_t c = 0; c < latent; ++c) {
            float acc = start[static_cast<std::size_t>(h * latent + c)];
            for (std::int64_t t = 0; t < len; ++t)
              acc = std::fma(p[static_cast<std::size_t>(h * len + t)], cache[static_cast<std::size_t>(t * stride + c)], acc);
            sums[static_cast<std::size_t>(h * latent + c)] = acc;
          }
        }
        const std::string what = fmt::format("dims {} heads {} len {}", dims, heads, len);
        if (avx2) {
          std::vector<float> got_scores(scores.size()), got_sums = start;
          for (std::int64_t h = 0; h < heads; ++h) {
            kernels::LatentScoresAvx2(q.data() + h * q_stride, cache.data(), stride, len, dims, 0.125f, got_scores.data() + h * len);
            kernels::AddWeightedSumAvx2(p.data() + h * len, cache.data(), stride, len, latent, got_sums.data() + h * latent);
          }
          ASSERT_EQ(got_scores, scores) << what << ", AVX2";
          ASSERT_EQ(got_sums, sums) << what << ", AVX2";
        }
        if (avx512) {
          std::vector<float> got_scores(scores.size()), got_sums = start;
          kernels::LatentScoresHeadsAvx512(q.data(), q_stride, heads, cache.data(), stride, len, dims, 0.125f, got_scores.data(), len);
          kernels::AddWeightedSumHeadsAvx512(p.data(), len, heads, cache.data(), stride, len, latent, got_sums.data(), latent);
          ASSERT_EQ(got_scores, scores) << what << ", AVX-512";
          ASSERT_EQ(got_sums, sums) << what << ", AVX-512";
        }
      }
    }
  }
}

TEST(MatMulTransposed, GivesTheBitsOfItsPlainLoop) {
  for (const std::int64_t cols : {128, 512, 200, 13}) {
    for (const std::int64_t batch : {1, 3, 4, 9, 16}) {  // AVX-512: inputs in fours, then the rest
      constexpr std::int64_t kRows = 64;
      const std::vector<float> values = RandomInputs(kRows * cols, 12), x = RandomInputs(batch * kRows, 13);
      std::shared_ptr<std::uint16_t[]> bf16(new std::uint16_t[static_cast<std::size_t>(kRows * cols)]);
      std::shared_ptr<float[]> f32(new float[static_cast<std::size_t>(kRows * cols)]);
      for (std::size_t i = 0; i < values.size(); ++i) {
        bf16[i] = F32ToBf16(values[i]);
        f32[i] = values[i];
      }
      ThreadPool pool(2);
      for (const WeightMatrix& w : {WeightMatrix::OwnedBf16(kRows, cols, bf16), WeightMatrix::OwnedF32(kRows, cols, f32)}) {
        std::vector<float> y(static_cast<std::size_t>(batch * cols)), expected(y.size());
        for (std::int64_t b = 0; b < batch; ++b) {
          for (std::int64_t c = 0; c < cols; ++c) {
            float acc = 0.0f;
            for (std::int64_t r = 0; r < kRows; ++r) acc += w.At(r, c) * x[static_cast<std::size_t>(b * kRows + r)];
            expected[static_cast<std::size_t>(b * cols + c)] = acc;
          }
        }
        MatMulTransposed(w, x.data(), batch, y.data(), nullptr);
        EXPECT_EQ(y, expected) << "cols " << cols << ", batch " << batch;
        MatMulTransposed(w, x.data(), batch, y.data(), &pool);
        EXPECT_EQ(y, expected) << "cols " << cols << ", batch " << batch << ", two threads";
        if (w.type != WeightMatrix::Type::kBF16) continue;
        // Each SIMD path the CPU has, on column ranges that cut its passes: the range's
        // outputs are the plain loop's, every other output is left alone.
        const auto* data = static_cast<const std::uint16_t*>(w.data);
        for (const auto& [begin, end] : {std::pair<std::int64_t, std::int64_t>{0, cols}, {cols / 3, cols - cols / 5}}) {
          for (const std::string_view path : {"AVX2", "AVX-512"}) {
            if ((path == "AVX2" && DetectedIsa() < Isa::kAvx2) || (path == "AVX-512" && DetectedIsa() < Isa::kAvx512)) continue;
            std::vector<float> part(y.size(), -1.0f);
            if (path == "AVX2") {
              kernels::TransposedBf16Avx2(data, kRows, cols, x.data(), batch, part.data(), begin, end);
            } else {
              kernels::TransposedBf16Avx512(data, kRows, cols, x.data(), batch, part.data(), begin, end);
            }
            for (std::int64_t b = 0; b < batch; ++b) {
              for (std::int64_t c = 0; c < cols; ++c) {
                const auto i = static_cast<std::size_t>(b * cols + c);
                ASSERT_EQ(part[i], c >= begin && c < end ? expected[i] : -1.0f)
                    << path << ", cols " << cols << ", batch " << batch << ", columns [" << begin << ", " << end << "), column " << c;
              }
            }
          }
        }
      }
    }
  }
}

// A group-quantized W (attention's absorbed key projection of a `--layers all`
// checkpoint): every path gives the bits of q · (scale · x) added over rows in order,
// for shapes with and without a padded last tile, every group, and column ranges that
// cut blocks (what the AVX2 kernel hands to the portable loop).
TEST(MatMulTransposed, QuantizedGivesTheBitsOfItsPlainLoopOnEveryPath) {
  const bool avx2 = DetectedIsa() >= Isa::kAvx2, avx512 = DetectedIsa() >= Isa::kAvx512;
  for (const QuantFormat format : {QuantFormat::kInt8, QuantFormat::kInt4}) {
    for (const std::int64_t rows : {64, 40, 16, 5}) {
      for (const std::int64_t cols : {128, 256, 96, 160}) {
        for (const int group : {32, 64, 128}) {
          if (cols % group != 0) continue;
          const std::vector<float> values = RandomInputs(rows * cols, 16);
          std::shared_ptr<float[]> f32(new float[values.size()]);
          std::copy(values.begin(), values.end(), f32.get());
          const auto q =
              std::make_shared<const QuantizedMatrix>(QuantizedMatrix::Quantize(WeightMatrix::OwnedF32(rows, cols, f32), format, group));
          const WeightMatrix w = WeightMatrix::FromQuantized(q);
          for (const std::int64_t batch : {1, 3, 4}) {  // 3: a pair and one alone
            const std::vector<float> x = RandomInputs(batch * rows, 17);
            std::vector<float> expected(static_cast<std::size_t>(batch * cols));
            for (std::int64_t b = 0; b < batch; ++b) {
              for (std::int64_t c = 0; c < cols; ++c) {
                float acc = 0.0f;
                for (std::int64_t r = 0; r < rows; ++r) {
                  acc += static_cast<float>(q->Level(r, c)) * (q->Scale(r, c) * x[static_cast<std::size_t>(b * rows + r)]);
                }
                expected[static_cast<std::size_t>(b * cols + c)] = acc;
              }
            }
            const std::string what = fmt::format("{} rows {} cols {} group {} batch {}", ToString(format), rows, cols, group, batch);
            std::vector<float> y(expected.size());
            ThreadPool pool(2);
            MatMulTransposed(w, x.data(), batch, y.data(), nullptr);
            ASSERT_EQ(y, expected) << what;
            MatMulTransposed(w, x.data(), batch, y.data(), &pool);
            ASSERT_EQ(y, expected) << what << ", two threads";
            for (const auto& [begin, end] : {std::pair<std::int64_t, std::int64_t>{0, cols}, {5, cols - 7}, {33, 63}, {40, 50}, {0, 32}}) {
              for (const std::string_view path : {"portable", "AVX2", "AVX-512"}) {
                if ((path == "AVX2" && !avx2) || (path == "AVX-512" && !avx512)) continue;
                std::vector<float> part(expected.size(), -1.0f);
                if (path == "AVX2")
                  kernels::TransposedQuantizedAvx2(*q, x.data(), batch, part.data(), begin, end);
                else if (path == "AVX-512")
                  kernels::TransposedQuantizedAvx512(*q, x.data(), batch, part.data(), begin, end);
                else
                  kernels::TransposedQuantizedPortable(*q, x.data(), batch, part.data(), begin, end);
                for (std::int64_t b = 0; b < batch; ++b) {
                  for (std::int64_t c = 0; c < cols; ++c) {
                    const std::size_t i = static_cast<std::size_t>(b * cols + c);
                    ASSERT_EQ(part[i], c >= begin && c < end ? expected[i] : -1.0f)
                        << what << ", " << path << ", columns [" << begin << ", " << end << "), column " << c;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tandem::rt
