#include "runtime/kernels/microscaled_matrix.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "runtime/kernels/thread_pool.hpp"
#include "runtime/numeric/dtype.hpp"
#include "runtime/numeric/microscaling.hpp"

namespace tandem::rt {

namespace {

constexpr std::int64_t kBlock = MicroscaledMatrix::kBlock;

const std::array<double, 256>& E4M3Values() {
  static const std::array<double, 256> table = [] {
    std::array<double, 256> t{};
    for (int c = 0; c < 256; ++c) t[static_cast<std::size_t>(c)] = F8E4M3ToF32(static_cast<std::uint8_t>(c));
    return t;
  }();
  return table;
}

// Both nibbles of a byte, the even (low) one first.
const std::array<std::array<double, 2>, 256>& E2M1Pairs() {
  static const std::array<std::array<double, 2>, 256> table = [] {
    std::array<std::array<double, 2>, 256> t{};
    for (int b = 0; b < 256; ++b) {
      t[static_cast<std::size_t>(b)] = {E2M1ToF32(static_cast<std::uint8_t>(b & 0xf)), E2M1ToF32(static_cast<std::uint8_t>(b >> 4))};
    }
    return t;
  }();
  return table;
}

const std::array<float, 256>& E8M0Values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[static_cast<std::size_t>(c)] = E8M0ToF32(static_cast<std::uint8_t>(c));
    return t;
  }();
  return table;
}

// One input row as act_quant makes it: E4M3 values (exact, as doubles) and a
// power-of-two scale per 32 columns.
void QuantizeInput(const float* x, std::int64_t cols, double* q, float* scale) {
  for (std::int64_t b = 0; b < cols / kBlock; ++b) {
    const float* v = x + b * kBlock;
    float amax = 0.0f;
    for (std::int64_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float s = RoundScalePow2(std::max(amax, 1e-4f), 1.0f / 448.0f);
    scale[b] = s;
    for (std::int64_t i = 0; i < kBlock; ++i) q[b * kBlock + i] = F8E4M3ToF32(F32ToF8E4M3(std::clamp(v[i] / s, -448.0f, 448.0f)));
  }
}

float RowFp8(const MicroscaledMatrix& w, std::int64_t o, const double* q, const float* a_scale) {
  const auto& value = E4M3Values();
  const auto& pow2 = E8M0Values();
  const std::int64_t blocks = w.cols / kBlock;
  const std::uint8_t* codes = w.values.get() + o * w.cols;
  const std::uint8_t* scales = w.scales.get() + (o / kBlock) * blocks;
  float acc = 0.0f;
  for (std::int64_t b = 0; b < blocks; ++b) {
    double partial = 0.0;
    for (std::int64_t i = 0; i < kBlock; ++i) partial += q[b * kBlock + i] * value[codes[b * kBlock + i]];
    acc += static_cast<float>(partial) * a_scale[b] * pow2[scales[b]];
  }
  return acc;
}

float RowFp4(const MicroscaledMatrix& w, std::int64_t o, const double* q, const float* a_scale) {
  const auto& pairs = E2M1Pairs();
  const auto& pow2 = E8M0Values();
  const std::int64_t blocks = w.cols / kBlock;
  const std::uint8_t* packed = w.values.get() + o * (w.cols / 2);
  const std::uint8_t* scales = w.scales.get() + o * blocks;
  float acc = 0.0f;
  for (std::int64_t b = 0; b < blocks; ++b) {
    double partial = 0.0;
    for (std::int64_t i = 0; i < kBlock / 2; ++i) {
      const auto& pair = pairs[packed[b * kBlock / 2 + i]];
      partial += q[b * kBlock + 2 * i] * pair[0];
      partial += q[b * kBlock + 2 * i + 1] * pair[1];
    }
    acc += static_cast<float>(partial) * a_scale[b] * pow2[scales[b]];
  }
  return acc;
}

}  // namespace

std::size_t MicroscaledMatrix::bytes() const {
  const std::int64_t blocks = cols / kBlock;
  if (format == Format::kFp8Block32) return static_cast<std::size_t>(rows * cols + (rows + kBlock - 1) / kBlock * blocks);
  return static_cast<std::size_t>(rows * cols / 2 + rows * blocks);
}

float MicroscaledMatrix::At(std::int64_t row, std::int64_t col) const {
  const std::int64_t blocks = cols / kBlock;
  if (format == Format::kFp8Block32) {
    return F8E4M3ToF32(values[static_cast<std::size_t>(row * cols + col)]) *
           E8M0ToF32(scales[static_cast<std::size_t>((row / kBlock) * blocks + col / kBlock)]);
  }
  const std::uint8_t byte = values[static_cast<std::size_t>(row * (cols / 2) + col / 2)];
  return E2M1ToF32(static_cast<std::uint8_t>(col % 2 == 0 ? byte & 0xf : byte >> 4)) *
         E8M0ToF32(scales[static_cast<std::size_t>(row * blocks + col / kBlock)]);
}

MicroscaledMatrix MicroscaledMatrix::Copy(Format format, std::int64_t rows, std::int64_t cols, std::span<const std::uint8_t> values,
                                          std::span<const std::uint8_t> scales) {
  if (rows <= 0 || cols <= 0 || cols % kBlock != 0) {
    throw std::invalid_argument(fmt::format("a microscaled matrix of {} × {}: the columns must be a positive multiple of 32", rows, cols));
  }
  MicroscaledMatrix m;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  const std::int64_t blocks = cols / kBlock;
  const auto want_values = static_cast<std::size_t>(format == Format::kFp8Block32 ? rows * cols : rows * cols / 2);
  const auto want_scales = static_cast<std::size_t>(format == Format::kFp8Block32 ? (rows + kBlock - 1) / kBlock * blocks : rows * blocks);
  if (values.size() != want_values || scales.size() != want_scales) {
    throw std::invalid_argument(fmt::format("a microscaled matrix of {} × {} needs {} value and {} scale bytes, not {} and {}", rows, cols,
                                            want_values, want_scales, values.size(), scales.size()));
  }
  auto v = std::make_shared<std::uint8_t[]>(values.size());
  std::copy(values.begin(), values.end(), v.get());
  auto s = std::make_shared<std::uint8_t[]>(scales.size());
  std::copy(scales.begin(), scales.end(), s.get());
  m.values = std::move(v);
  m.scales = std::move(s);
  return m;
}

void MatMul(const MicroscaledMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool) {
  const std::int64_t blocks = w.cols / kBlock;
  std::vector<double> q(static_cast<std::size_t>(batch * w.cols));
  std::vector<float> a_scale(static_cast<std::size_t>(batch * blocks));
  for (std::int64_t b = 0; b < batch; ++b) QuantizeInput(x + b * w.cols, w.cols, q.data() + b * w.cols, a_scale.data() + b * blocks);
  const bool fp8 = w.format == MicroscaledMatrix::Format::kFp8Block32;
  ForShares(pool, w.rows, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = begin; o < end; ++o) {
      for (std::int64_t b = 0; b < batch; ++b) {
        const double* qb = q.data() + b * w.cols;
        const float* sb = a_scale.data() + b * blocks;
        const float v = fp8 ? RowFp8(w, o, qb, sb) : RowFp4(w, o, qb, sb);
        y[b * w.rows + o] = Bf16ToF32(F32ToBf16(v));
      }
    }
  });
}

}  // namespace tandem::rt
