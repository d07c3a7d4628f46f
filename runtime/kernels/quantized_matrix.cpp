#include "runtime/kernels/quantized_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/kernels/cpu_features.hpp"
#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/quantized_input.hpp"
#include "runtime/kernels/quantized_rows.hpp"

namespace tandem::rt {

std::string_view ToString(QuantFormat format) { return format == QuantFormat::kInt8 ? "int8" : "int4"; }

namespace {

int Levels(QuantFormat format) { return format == QuantFormat::kInt8 ? 127 : 7; }

}  // namespace

QuantizedMatrix QuantizedMatrix::Quantize(const WeightMatrix& w, QuantFormat format, int group) {
  if (group <= 0 || group % 32 != 0) {
    throw std::invalid_argument(fmt::format("quantize: group size {} is not a multiple of 32, the kernels' input block", group));
  }
  if (w.cols % group != 0) {
    throw std::invalid_argument(fmt::format("quantize: {} columns are not a multiple of the group size {}", w.cols, group));
  }
  QuantizedMatrix q;
  q.format = format;
  q.rows = w.rows;
  q.cols = w.cols;
  q.group = group;
  const std::int64_t groups = w.cols / group;
  const auto n = static_cast<std::size_t>(w.rows * w.cols);
  q.values.assign(format == QuantFormat::kInt8 ? n : n / 2, 0);
  q.scales.resize(static_cast<std::size_t>(w.rows * groups));
  const int levels = Levels(format);
  std::vector<float> row(static_cast<std::size_t>(w.cols));
  for (std::int64_t r = 0; r < w.rows; ++r) {
    for (std::int64_t c = 0; c < w.cols; ++c) row[static_cast<std::size_t>(c)] = w.At(r, c);
    for (std::int64_t g = 0; g < groups; ++g) {
      const float* v = row.data() + g * group;
      float amax = 0;
      for (int i = 0; i < group; ++i) amax = std::max(amax, std::abs(v[i]));
      const float scale = amax > 0 ? amax / static_cast<float>(levels) : 1.0f;
      q.scales[static_cast<std::size_t>(r * groups + g)] = scale;
      for (int i = 0; i < group; ++i) {
        const auto level =
            static_cast<int>(std::clamp(std::nearbyint(v[i] / scale), static_cast<float>(-levels), static_cast<float>(levels)));
        const std::int64_t index = r * w.cols + g * group + i;
        if (format == QuantFormat::kInt8) {
          q.values[static_cast<std::size_t>(index)] = static_cast<std::uint8_t>(static_cast<std::int8_t>(level));
        } else {
          q.values[static_cast<std::size_t>(index / 2)] |= static_cast<std::uint8_t>((level & 0xF) << (4 * (index % 2)));
        }
      }
    }
  }
  return q;
}

float QuantizedMatrix::At(std::int64_t row, std::int64_t col) const {
  const std::int64_t index = row * cols + col;
  int level;
  if (format == QuantFormat::kInt8) {
    level = static_cast<std::int8_t>(values[static_cast<std::size_t>(index)]);
  } else {
    const int nibble = (values[static_cast<std::size_t>(index / 2)] >> (4 * (index % 2))) & 0xF;
    level = nibble >= 8 ? nibble - 16 : nibble;
  }
  return static_cast<float>(level) * scales[static_cast<std::size_t>(row * (cols / group) + col / group)];
}

QuantizedMatrix QuantizedMatrix::Rows(std::int64_t first, std::int64_t count) const {
  // Built empty, not copied: a copy's storage would keep the whole matrix's size.
  QuantizedMatrix q;
  q.format = format;
  q.rows = count;
  q.cols = cols;
  q.group = group;
  const auto row_bytes = static_cast<std::size_t>(format == QuantFormat::kInt8 ? cols : cols / 2);
  const auto row_scales = static_cast<std::size_t>(cols / group);
  q.values.assign(values.begin() + static_cast<std::ptrdiff_t>(first * row_bytes),
                  values.begin() + static_cast<std::ptrdiff_t>((first + count) * row_bytes));
  q.scales.assign(scales.begin() + static_cast<std::ptrdiff_t>(first * row_scales),
                  scales.begin() + static_cast<std::ptrdiff_t>((first + count) * row_scales));
  return q;
}

QuantizedMatrix QuantizedMatrix::StackRows(const QuantizedMatrix& a, const QuantizedMatrix& b) {
  if (a.cols != b.cols || a.format != b.format || a.group != b.group) {
    throw std::invalid_argument(fmt::format("quantized matrix: cannot stack {} × {} {} (group {}) on {} × {} {} (group {})", b.rows, b.cols,
                                            ToString(b.format), b.group, a.rows, a.cols, ToString(a.format), a.group));
  }
  QuantizedMatrix q;
  q.format = a.format;
  q.rows = a.rows + b.rows;
  q.cols = a.cols;
  q.group = a.group;
  q.values.reserve(a.values.size() + b.values.size());
  q.values.insert(q.values.end(), a.values.begin(), a.values.end());
  q.values.insert(q.values.end(), b.values.begin(), b.values.end());
  q.scales.reserve(a.scales.size() + b.scales.size());
  q.scales.insert(q.scales.end(), a.scales.begin(), a.scales.end());
  q.scales.insert(q.scales.end(), b.scales.begin(), b.scales.end());
  return q;
}

QuantizedMatrix QuantizedMatrix::Columns(std::int64_t begin, std::int64_t end) const {
  if (begin < 0 || end > cols || begin > end || begin % group != 0 || end % group != 0) {
    throw std::invalid_argument(
        fmt::format("quantized matrix: columns [{}, {}) of {} are not whole groups of {}", begin, end, cols, group));
  }
  QuantizedMatrix q;
  q.format = format;
  q.rows = rows;
  q.cols = end - begin;
  q.group = group;
  const bool int8 = format == QuantFormat::kInt8;
  // Bytes of a row and where the range starts in it (int4: begin and cols are even, groups being even).
  const auto row_bytes = static_cast<std::size_t>(int8 ? cols : cols / 2);
  const auto first_byte = static_cast<std::size_t>(int8 ? begin : begin / 2);
  const auto slice_bytes = static_cast<std::size_t>(int8 ? q.cols : q.cols / 2);
  const auto row_scales = static_cast<std::size_t>(cols / group);
  const auto first_scale = static_cast<std::size_t>(begin / group);
  const auto slice_scales = static_cast<std::size_t>(q.cols / group);
  q.values.resize(static_cast<std::size_t>(rows) * slice_bytes);
  q.scales.resize(static_cast<std::size_t>(rows) * slice_scales);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(r * row_bytes + first_byte), slice_bytes,
                q.values.begin() + static_cast<std::ptrdiff_t>(r * slice_bytes));
    std::copy_n(scales.begin() + static_cast<std::ptrdiff_t>(r * row_scales + first_scale), slice_scales,
                q.scales.begin() + static_cast<std::ptrdiff_t>(r * slice_scales));
  }
  return q;
}

namespace kernels {

void QuantizeInput(const float* x, std::int64_t batch, std::int64_t cols, std::int8_t* q, float* d) {
  const std::int64_t blocks = cols / kInputBlock;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t k = 0; k < blocks; ++k) {
      const float* in = x + b * cols + k * kInputBlock;
      float amax = 0;
      for (int i = 0; i < kInputBlock; ++i) amax = std::max(amax, std::abs(in[i]));
      // Below the smallest normal float, 127 / amax overflows: such a block counts as zero.
      const bool zero = !(amax >= std::numeric_limits<float>::min());
      const float inv = zero ? 0.0f : 127.0f / amax;
      d[b * blocks + k] = zero ? 0.0f : amax / 127.0f;
      std::int8_t* out = q + b * cols + k * kInputBlock;
      for (int i = 0; i < kInputBlock; ++i) out[i] = static_cast<std::int8_t>(std::clamp(std::nearbyint(in[i] * inv), -127.0f, 127.0f));
    }
  }
}

namespace {

// The portable form of quantized_rows.hpp's order, one (row, input) at a time.
// `level(k, p)` is the weight at position p (0–31) of block k in lane order.
template <typename Level>
float QuantizedDot(Level level, const float* ws, std::int64_t blocks, int per_group, const QuantizedInput& in) {
  float acc[8] = {};
  for (std::int64_t k = 0; k < blocks; ++k) {
    const float scale = ws[k / per_group] * in.d[k];
    const std::int8_t* x = in.q + k * kInputBlock;
    for (int l = 0; l < 8; ++l) {
      std::int32_t sum = 0;
      for (int j = 0; j < 4; ++j) sum += level(k, 4 * l + j) * x[4 * l + j];
      acc[l] = std::fma(static_cast<float>(sum), scale, acc[l]);
    }
  }
  for (int width = 4; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

}  // namespace

void RowsInt8Portable(const std::int8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                      std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  const std::int64_t blocks = cols / kInputBlock, groups = cols / group;
  for (std::int64_t o = begin; o < end; ++o) {
    const std::int8_t* w = values + o * cols;
    const auto level = [w](std::int64_t k, int p) { return static_cast<std::int32_t>(w[k * kInputBlock + p]); };
    for (std::int64_t b = 0; b < batch; ++b) {
      y[b * y_stride + o] = QuantizedDot(level, scales + o * groups, blocks, group / kInputBlock, inputs[b]);
    }
  }
}

void PairInt4Input(const std::int8_t* q, const float* d, std::int64_t blocks, std::int8_t* pair_q, std::int32_t* pair_sums, float* pair_d) {
  const std::int64_t pairs = (blocks + 1) / 2;
  std::fill_n(pair_q, pairs * 64, std::int8_t{0});  // a missing second block stays zero
  std::fill_n(pair_d, pairs * 8, 0.0f);
  for (std::int64_t k = 0; k < blocks; ++k) {
    const std::int64_t p = k / 2, second = k % 2;
    for (int j = 0; j < 16; ++j) {
      pair_q[p * 64 + second * 16 + j] = q[k * kInputBlock + 2 * j];           // even columns
      pair_q[p * 64 + 32 + second * 16 + j] = q[k * kInputBlock + 2 * j + 1];  // odd columns
    }
    for (int i = 0; i < 4; ++i) pair_d[p * 8 + second * 4 + i] = d[k];
  }
  // Lane sums, times 8: each lane's eight inputs (four even, four odd columns), as
  // the kernels group them.
  for (std::int64_t p = 0; p < pairs; ++p) {
    for (int lane = 0; lane < 8; ++lane) {
      int sum = 0;
      for (int j = 0; j < 4; ++j) sum += pair_q[p * 64 + 4 * lane + j] + pair_q[p * 64 + 32 + 4 * lane + j];
      pair_sums[p * 8 + lane] = 8 * sum;
    }
  }
}

void RowsInt4Portable(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                      std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  const std::int64_t blocks = cols / kInputBlock, pairs = (blocks + 1) / 2, groups = cols / group, per_group = group / kInputBlock;
  const auto level = [](int nibble) { return nibble >= 8 ? nibble - 16 : nibble; };
  for (std::int64_t o = begin; o < end; ++o) {
    const std::uint8_t* w = values + o * cols / 2;
    const float* ws = scales + o * groups;
    for (std::int64_t b = 0; b < batch; ++b) {
      const QuantizedInput& in = inputs[b];
      float acc[8] = {};
      for (std::int64_t p = 0; p < pairs; ++p) {
        for (int lane = 0; lane < 8; ++lane) {
          const int second = lane / 4, l = lane % 4;
          const std::int64_t k = 2 * p + second;
          std::int32_t sum = 0;
          float scale = 0.0f;
          if (k < blocks) {
            for (int j = 0; j < 4; ++j) {
              const std::uint8_t byte = w[k * 16 + 4 * l + j];  // columns 2(4l + j) and 2(4l + j) + 1
              sum += level(byte & 0xF) * in.q[p * 64 + second * 16 + 4 * l + j] +
                     level(byte >> 4) * in.q[p * 64 + 32 + second * 16 + 4 * l + j];
            }
            scale = ws[k / per_group] * in.pair_d[p * 8 + second * 4];
          }
          acc[lane] = std::fma(static_cast<float>(sum), scale, acc[lane]);
        }
      }
      y[b * y_stride + o] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
  }
}

}  // namespace kernels

namespace kernels {

namespace {

// Whether the quantized products run the VNNI kernels (quantized_vnni.cpp).
bool VnniKernels(Isa isa) { return isa >= Isa::kAvx512 && HasAvx512Vnni(); }

}  // namespace

void PreparedQuantizedInput::Prepare(const QuantizedMatrix& w, const float* x, std::int64_t batch_rows, Isa isa) {
  const bool w_int4 = w.format == QuantFormat::kInt4;
  const bool w_lane_sums = !w_int4 && VnniKernels(isa);
  if (source == x && batch == batch_rows && cols == w.cols && int4 == w_int4 && int8_lane_sums == w_lane_sums)
    return;  // gate and up share their input
  source = x;
  batch = batch_rows;
  cols = w.cols;
  int4 = w_int4;
  int8_lane_sums = w_lane_sums;
  const std::int64_t blocks = cols / kInputBlock, pairs = (blocks + 1) / 2;
  q.resize(static_cast<std::size_t>(batch * cols));
  d.resize(static_cast<std::size_t>(batch * blocks));
  if (isa >= Isa::kAvx2) {
    QuantizeInputAvx2(x, batch, cols, q.data(), d.data());
  } else {
    QuantizeInput(x, batch, cols, q.data(), d.data());
  }
  rows.resize(static_cast<std::size_t>(batch));
  if (!int4) {
    // With VNNI, −128 × each lane's input sum (lane l of a block: its inputs 4l … 4l+3),
    // where the kernel starts a block's lane sums of (w + 128)·x; the other paths read none.
    if (int8_lane_sums) {
      sums.resize(static_cast<std::size_t>(batch * blocks * 8));
      for (std::int64_t i = 0; i < batch * blocks * 8; ++i) {
        const std::int8_t* lane = q.data() + i * 4;
        sums[static_cast<std::size_t>(i)] = -128 * (lane[0] + lane[1] + lane[2] + lane[3]);
      }
    }
    for (std::int64_t b = 0; b < batch; ++b) {
      rows[static_cast<std::size_t>(b)] = {q.data() + b * cols, d.data() + b * blocks,
                                           int8_lane_sums ? sums.data() + b * blocks * 8 : nullptr, nullptr};
    }
    return;
  }
  pair_q.resize(static_cast<std::size_t>(batch * pairs * 64));
  sums.resize(static_cast<std::size_t>(batch * pairs * 8));
  pair_d.resize(static_cast<std::size_t>(batch * pairs * 8));
  for (std::int64_t b = 0; b < batch; ++b) {
    PairInt4Input(q.data() + b * cols, d.data() + b * blocks, blocks, pair_q.data() + b * pairs * 64, sums.data() + b * pairs * 8,
                  pair_d.data() + b * pairs * 8);
    rows[static_cast<std::size_t>(b)] = {pair_q.data() + b * pairs * 64, d.data() + b * blocks, sums.data() + b * pairs * 8,
                                         pair_d.data() + b * pairs * 8};
  }
}

void QuantizedRows(const QuantizedMatrix& w, const PreparedQuantizedInput& in, float* y, std::int64_t y_stride, std::int64_t begin,
                   std::int64_t end, Isa isa) {
  // The rows [begin, end) as a matrix of their own, so outputs start at y.
  const std::int64_t groups = w.cols / w.group;
  const float* scales = w.scales.data() + begin * groups;
  const std::int64_t n = end - begin, batch = in.batch;
  const QuantizedInput* x = in.rows.data();
  if (w.format == QuantFormat::kInt8) {
    const auto* values = reinterpret_cast<const std::int8_t*>(w.values.data()) + begin * w.cols;
    if (VnniKernels(isa)) return RowsInt8Vnni(values, scales, w.cols, w.group, x, batch, y, y_stride, 0, n);
    if (isa >= Isa::kAvx2) return RowsInt8Avx2(values, scales, w.cols, w.group, x, batch, y, y_stride, 0, n);
    return RowsInt8Portable(values, scales, w.cols, w.group, x, batch, y, y_stride, 0, n);
  }
  const std::uint8_t* values = w.values.data() + begin * w.cols / 2;
  if (VnniKernels(isa)) return RowsInt4Vnni(values, scales, w.cols, w.group, x, batch, y, y_stride, 0, n);
  if (isa >= Isa::kAvx2) return RowsInt4Avx2(values, scales, w.cols, w.group, x, batch, y, y_stride, 0, n);
  RowsInt4Portable(values, scales, w.cols, w.group, x, batch, y, y_stride, 0, n);
}

}  // namespace kernels

namespace {

// A QuantizedMatrix as a kQuantized WeightMatrix that does not own it (an aliasing
// shared_ptr with no owner: nothing is allocated or counted).
WeightMatrix View(const QuantizedMatrix& q) {
  return WeightMatrix::FromQuantized(std::shared_ptr<const QuantizedMatrix>(std::shared_ptr<const QuantizedMatrix>(), &q));
}

}  // namespace

void MatMul(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool) {
  MatMul(View(w), x, batch, y, pool);
}

void MatMulF64(const QuantizedMatrix& w, const float* x, std::int64_t batch, double* y, ThreadPool* pool) {
  MatMulF64(View(w), x, batch, y, pool);
}

}  // namespace tandem::rt
