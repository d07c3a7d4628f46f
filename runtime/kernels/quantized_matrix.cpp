#include "runtime/kernels/quantized_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
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

static_assert(QuantizedMatrix::kTileRows == kernels::kInt8TileRows);

namespace {

int Levels(QuantFormat format) { return format == QuantFormat::kInt8 ? 127 : 7; }

std::int64_t PaddedRows(QuantFormat format, std::int64_t rows) {
  constexpr std::int64_t kTile = QuantizedMatrix::kTileRows;
  return format == QuantFormat::kInt8 ? (rows + kTile - 1) / kTile * kTile : rows;
}

std::int64_t RowMajorBytes(QuantFormat format, std::int64_t cols) { return format == QuantFormat::kInt8 ? cols : cols / 2; }

// Where int8 value (row, col) and its group's scale are stored (the header's tile order).
std::size_t Int8Index(std::int64_t cols, std::int64_t row, std::int64_t col) {
  constexpr std::int64_t kTile = QuantizedMatrix::kTileRows;
  const std::int64_t tile = row / kTile, blocks = cols / kernels::kInputBlock;
  const std::int64_t block = col / kernels::kInputBlock, chunk = (col % kernels::kInputBlock) / 4;
  return static_cast<std::size_t>(((tile * blocks + block) * 8 + chunk) * kTile * 4 + (row % kTile) * 4 + col % 4);
}
std::size_t Int8ScaleIndex(std::int64_t groups, std::int64_t row, std::int64_t group_index) {
  constexpr std::int64_t kTile = QuantizedMatrix::kTileRows;
  return static_cast<std::size_t>((row / kTile * groups + group_index) * kTile + row % kTile);
}

// 4 int8 values from or to the tile layout (which stores q + 128).
void FlipChunk(const std::uint8_t* from, std::uint8_t* to) {
  std::uint32_t v;
  std::memcpy(&v, from, 4);
  v ^= 0x80808080u;
  std::memcpy(to, &v, 4);
}

// Rows [first, first + count) of a matrix in row-major order (values as a file has them).
struct RowMajor {
  std::vector<std::uint8_t> values;
  std::vector<float> scales;
};

RowMajor RowMajorRows(const QuantizedMatrix& q, std::int64_t first, std::int64_t count) {
  const std::int64_t row_bytes = RowMajorBytes(q.format, q.cols), groups = q.cols / q.group;
  RowMajor out;
  if (q.format == QuantFormat::kInt4) {
    out.values.assign(q.values.begin() + first * row_bytes, q.values.begin() + (first + count) * row_bytes);
    out.scales.assign(q.scales.begin() + first * groups, q.scales.begin() + (first + count) * groups);
    return out;
  }
  out.values.resize(static_cast<std::size_t>(count * row_bytes));
  out.scales.resize(static_cast<std::size_t>(count * groups));
  for (std::int64_t r = 0; r < count; ++r) {
    std::uint8_t* row = out.values.data() + r * q.cols;
    // A row's 4 bytes of each chunk lie 64 bytes apart within a tile's block.
    const std::uint8_t* chunk = q.values.data() + Int8Index(q.cols, first + r, 0);
    for (std::int64_t c = 0; c < q.cols; c += 4, chunk += QuantizedMatrix::kTileRows * 4) {
      FlipChunk(chunk, row + c);
    }
    for (std::int64_t g = 0; g < groups; ++g) {
      out.scales[static_cast<std::size_t>(r * groups + g)] = q.scales[Int8ScaleIndex(groups, first + r, g)];
    }
  }
  return out;
}

}  // namespace

QuantizedMatrix QuantizedMatrix::Quantize(const WeightMatrix& w, QuantFormat format, int group) {
  if (group <= 0 || group % 32 != 0) {
    throw std::invalid_argument(fmt::format("quantize: group size {} is not a multiple of 32, the kernels' input block", group));
  }
  if (w.cols % group != 0) {
    throw std::invalid_argument(fmt::format("quantize: {} columns are not a multiple of the group size {}", w.cols, group));
  }
  const std::int64_t groups = w.cols / group;
  std::vector<std::uint8_t> values(static_cast<std::size_t>(w.rows * RowMajorBytes(format, w.cols)), 0);
  std::vector<float> scales(static_cast<std::size_t>(w.rows * groups));
  const int levels = Levels(format);
  std::vector<float> row(static_cast<std::size_t>(w.cols));
  for (std::int64_t r = 0; r < w.rows; ++r) {
    for (std::int64_t c = 0; c < w.cols; ++c) row[static_cast<std::size_t>(c)] = w.At(r, c);
    for (std::int64_t g = 0; g < groups; ++g) {
      const float* v = row.data() + g * group;
      float amax = 0;
      for (int i = 0; i < group; ++i) amax = std::max(amax, std::abs(v[i]));
      const float scale = amax > 0 ? amax / static_cast<float>(levels) : 1.0f;
      scales[static_cast<std::size_t>(r * groups + g)] = scale;
      for (int i = 0; i < group; ++i) {
        const auto level =
            static_cast<int>(std::clamp(std::nearbyint(v[i] / scale), static_cast<float>(-levels), static_cast<float>(levels)));
        const std::int64_t index = r * w.cols + g * group + i;
        if (format == QuantFormat::kInt8) {
          values[static_cast<std::size_t>(index)] = static_cast<std::uint8_t>(static_cast<std::int8_t>(level));
        } else {
          values[static_cast<std::size_t>(index / 2)] |= static_cast<std::uint8_t>((level & 0xF) << (4 * (index % 2)));
        }
      }
    }
  }
  return FromRowMajor(format, w.rows, w.cols, group, values, scales);
}

QuantizedMatrix QuantizedMatrix::FromRowMajor(QuantFormat format, std::int64_t rows, std::int64_t cols, int group,
                                              std::span<const std::uint8_t> values, std::span<const float> scales) {
  if (rows < 0 || cols < 0 || group <= 0 || group % kernels::kInputBlock != 0 || cols % group != 0) {
    throw std::invalid_argument(
        fmt::format("quantized matrix: {} × {} with group {}: the group must be a multiple of 32 dividing the columns", rows, cols, group));
  }
  const std::int64_t groups = cols / group;
  if (values.size() != static_cast<std::size_t>(rows * RowMajorBytes(format, cols)) ||
      scales.size() != static_cast<std::size_t>(rows * groups)) {
    throw std::invalid_argument(
        fmt::format("quantized matrix: {} bytes and {} scales for a {} × {} {} matrix with group {} (expected {} and {})", values.size(),
                    scales.size(), rows, cols, ToString(format), group, rows * RowMajorBytes(format, cols), rows * groups));
  }
  QuantizedMatrix q;
  q.format = format;
  q.rows = rows;
  q.cols = cols;
  q.group = group;
  if (format == QuantFormat::kInt4) {
    q.values.assign(values.begin(), values.end());
    q.scales.assign(scales.begin(), scales.end());
    return q;
  }
  // Padding rows: level 0 (stored 128) with scale 0.
  const std::int64_t padded = PaddedRows(format, rows);
  q.values.assign(static_cast<std::size_t>(padded * cols), 0x80);
  q.scales.assign(static_cast<std::size_t>(padded * groups), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint8_t* row = values.data() + r * cols;
    std::uint8_t* chunk = q.values.data() + Int8Index(cols, r, 0);  // then every 64 bytes (RowMajorRows)
    for (std::int64_t c = 0; c < cols; c += 4, chunk += kTileRows * 4) {
      FlipChunk(row + c, chunk);
    }
    for (std::int64_t g = 0; g < groups; ++g) q.scales[Int8ScaleIndex(groups, r, g)] = scales[static_cast<std::size_t>(r * groups + g)];
  }
  return q;
}

std::vector<std::uint8_t> QuantizedMatrix::RowMajorValues() const { return RowMajorRows(*this, 0, rows).values; }

std::vector<float> QuantizedMatrix::RowMajorScales() const { return RowMajorRows(*this, 0, rows).scales; }

int QuantizedMatrix::Level(std::int64_t row, std::int64_t col) const {
  if (format == QuantFormat::kInt8) return static_cast<int>(values[Int8Index(cols, row, col)]) - 128;
  const std::int64_t index = row * cols + col;
  const int nibble = (values[static_cast<std::size_t>(index / 2)] >> (4 * (index % 2))) & 0xF;
  return nibble >= 8 ? nibble - 16 : nibble;
}

float QuantizedMatrix::Scale(std::int64_t row, std::int64_t col) const {
  const std::int64_t groups = cols / group;
  if (format == QuantFormat::kInt8) return scales[Int8ScaleIndex(groups, row, col / group)];
  return scales[static_cast<std::size_t>(row * groups + col / group)];
}

QuantizedMatrix QuantizedMatrix::Rows(std::int64_t first, std::int64_t count) const {
  const RowMajor part = RowMajorRows(*this, first, count);
  return FromRowMajor(format, count, cols, group, part.values, part.scales);
}

QuantizedMatrix QuantizedMatrix::StackRows(const QuantizedMatrix& a, const QuantizedMatrix& b) {
  if (a.cols != b.cols || a.format != b.format || a.group != b.group) {
    throw std::invalid_argument(fmt::format("quantized matrix: cannot stack {} × {} {} (group {}) on {} × {} {} (group {})", b.rows, b.cols,
                                            ToString(b.format), b.group, a.rows, a.cols, ToString(a.format), a.group));
  }
  RowMajor both = RowMajorRows(a, 0, a.rows);
  const RowMajor second = RowMajorRows(b, 0, b.rows);
  both.values.insert(both.values.end(), second.values.begin(), second.values.end());
  both.scales.insert(both.scales.end(), second.scales.begin(), second.scales.end());
  return FromRowMajor(a.format, a.rows + b.rows, a.cols, a.group, both.values, both.scales);
}

QuantizedMatrix QuantizedMatrix::Columns(std::int64_t begin, std::int64_t end) const {
  if (begin < 0 || end > cols || begin > end || begin % group != 0 || end % group != 0) {
    throw std::invalid_argument(
        fmt::format("quantized matrix: columns [{}, {}) of {} are not whole groups of {}", begin, end, cols, group));
  }
  const RowMajor all = RowMajorRows(*this, 0, rows);
  // Bytes of a row and where the range starts in it (int4: begin and cols are even, groups being even).
  const auto row_bytes = static_cast<std::size_t>(RowMajorBytes(format, cols));
  const auto first_byte = static_cast<std::size_t>(RowMajorBytes(format, begin));
  const auto slice_bytes = static_cast<std::size_t>(RowMajorBytes(format, end - begin));
  const auto row_scales = static_cast<std::size_t>(cols / group);
  const auto first_scale = static_cast<std::size_t>(begin / group);
  const auto slice_scales = static_cast<std::size_t>((end - begin) / group);
  RowMajor slice;
  slice.values.resize(static_cast<std::size_t>(rows) * slice_bytes);
  slice.scales.resize(static_cast<std::size_t>(rows) * slice_scales);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    std::copy_n(all.values.begin() + static_cast<std::ptrdiff_t>(r * row_bytes + first_byte), slice_bytes,
                slice.values.begin() + static_cast<std::ptrdiff_t>(r * slice_bytes));
    std::copy_n(all.scales.begin() + static_cast<std::ptrdiff_t>(r * row_scales + first_scale), slice_scales,
                slice.scales.begin() + static_cast<std::ptrdiff_t>(r * slice_scales));
  }
  return FromRowMajor(format, rows, end - begin, group, slice.values, slice.scales);
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

void RowsInt8Portable(const std::uint8_t* values, const float* scales, std::int64_t cols, int group, const QuantizedInput* inputs,
                      std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  constexpr std::int64_t kTile = QuantizedMatrix::kTileRows;
  const std::int64_t blocks = cols / kInputBlock, groups = cols / group, per_group = group / kInputBlock;
  for (std::int64_t o = begin; o < end; ++o) {
    const std::uint8_t* tile = values + o / kTile * kTile * cols;
    const float* ws = scales + o / kTile * kTile * groups;
    const std::int64_t r = o % kTile;
    for (std::int64_t b = 0; b < batch; ++b) {
      const QuantizedInput& in = inputs[b];
      float acc = 0.0f;
      for (std::int64_t k = 0; k < blocks; ++k) {
        std::int32_t sum = 0;
        for (int j = 0; j < 8; ++j) {
          const std::uint8_t* w = tile + (k * 8 + j) * kTile * 4 + r * 4;
          for (int i = 0; i < 4; ++i) sum += (static_cast<std::int32_t>(w[i]) - 128) * in.q[k * kInputBlock + 4 * j + i];
        }
        acc = std::fma(static_cast<float>(sum), ws[k / per_group * kTile + r] * in.d[k], acc);
      }
      y[b * y_stride + o - begin] = acc;
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
  const bool w_block_sums = !w_int4 && VnniKernels(isa);
  if (source == x && batch == batch_rows && cols == w.cols && int4 == w_int4 && int8_block_sums == w_block_sums)
    return;  // gate and up share their input
  source = x;
  batch = batch_rows;
  cols = w.cols;
  int4 = w_int4;
  int8_block_sums = w_block_sums;
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
    // With VNNI, −128 × each block's input sum, where the kernel starts the block's
    // sum of (w + 128)·x; the other paths read none.
    if (int8_block_sums) {
      sums.resize(static_cast<std::size_t>(batch * blocks));
      for (std::int64_t i = 0; i < batch * blocks; ++i) {
        const std::int8_t* block = q.data() + i * kInputBlock;
        std::int32_t sum = 0;
        for (int j = 0; j < kInputBlock; ++j) sum += block[j];
        sums[static_cast<std::size_t>(i)] = -128 * sum;
      }
    }
    for (std::int64_t b = 0; b < batch; ++b) {
      rows[static_cast<std::size_t>(b)] = {q.data() + b * cols, d.data() + b * blocks, int8_block_sums ? sums.data() + b * blocks : nullptr,
                                           nullptr};
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
  const std::int64_t batch = in.batch;
  const QuantizedInput* x = in.rows.data();
  if (w.format == QuantFormat::kInt8) {
    // Whole tiles: the kernels take the matrix and the row range.
    const std::uint8_t* values = w.values.data();
    const float* scales = w.scales.data();
    if (VnniKernels(isa)) return RowsInt8Vnni(values, scales, w.cols, w.group, x, batch, y, y_stride, begin, end);
    if (isa >= Isa::kAvx2) return RowsInt8Avx2(values, scales, w.cols, w.group, x, batch, y, y_stride, begin, end);
    return RowsInt8Portable(values, scales, w.cols, w.group, x, batch, y, y_stride, begin, end);
  }
  // The rows [begin, end) as a matrix of their own, so outputs start at y.
  const std::int64_t groups = w.cols / w.group, n = end - begin;
  const float* scales = w.scales.data() + begin * groups;
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
