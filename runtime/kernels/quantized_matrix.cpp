#include "runtime/kernels/quantized_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "runtime/kernels/cpu_features.hpp"
#include "runtime/kernels/matmul.hpp"
#include "runtime/kernels/quantized_input.hpp"
#include "runtime/kernels/quantized_rows.hpp"

namespace tandem::rt {

std::string_view ToString(QuantFormat format) { return format == QuantFormat::kInt8 ? "int8" : "int4"; }

static_assert(QuantizedMatrix::kTileRows == kernels::kTileRows);

namespace {

int Levels(QuantFormat format) { return format == QuantFormat::kInt8 ? 127 : 7; }

constexpr std::int64_t kTile = QuantizedMatrix::kTileRows;

std::int64_t PaddedRows(std::int64_t rows) { return (rows + kTile - 1) / kTile * kTile; }

std::int64_t RowMajorBytes(QuantFormat format, std::int64_t cols) { return format == QuantFormat::kInt8 ? cols : cols / 2; }

// The tile order (quantized_matrix.hpp): a row's 4 bytes of a chunk, chunk after chunk
// 64 bytes apart, from the row's first chunk here.
std::size_t RowStart(const QuantizedMatrix& q, std::int64_t row) {
  return static_cast<std::size_t>(row / kTile * kTile * RowMajorBytes(q.format, q.cols) + row % kTile * 4);
}
constexpr std::size_t kChunkStride = kTile * 4;
std::size_t ScaleIndex(std::int64_t groups, std::int64_t row, std::int64_t group_index) {
  return static_cast<std::size_t>((row / kTile * groups + group_index) * kTile + row % kTile);
}

// One row's chunk between a file's row-major bytes and the tile's: int8 4 columns (q
// and q + 128), int4 8 columns (file: byte m holds columns 2m and 2m + 1, low nibble
// first, two's complement; tile: byte i holds columns i and 4 + i as q + 8).
void ToTile(QuantFormat format, const std::uint8_t* file, std::uint8_t* tile) {
  if (format == QuantFormat::kInt8) {
    for (int i = 0; i < 4; ++i) tile[i] = static_cast<std::uint8_t>(file[i] ^ 0x80);
    return;
  }
  std::uint8_t n[8];
  for (int m = 0; m < 4; ++m) {
    n[2 * m] = file[m] & 0xF;
    n[2 * m + 1] = file[m] >> 4;
  }
  for (int i = 0; i < 4; ++i) tile[i] = static_cast<std::uint8_t>((n[i] ^ 8) | (n[4 + i] ^ 8) << 4);  // n ^ 8 = q + 8
}
void FromTile(QuantFormat format, const std::uint8_t* tile, std::uint8_t* file) {
  if (format == QuantFormat::kInt8) {
    for (int i = 0; i < 4; ++i) file[i] = static_cast<std::uint8_t>(tile[i] ^ 0x80);
    return;
  }
  std::uint8_t n[8];
  for (int i = 0; i < 4; ++i) {
    n[i] = (tile[i] & 0xF) ^ 8;
    n[4 + i] = (tile[i] >> 4) ^ 8;
  }
  for (int m = 0; m < 4; ++m) file[m] = static_cast<std::uint8_t>(n[2 * m] | n[2 * m + 1] << 4);
}

// Rows [first, first + count) of a matrix in row-major order (values as a file has them).
RowMajorQuantized RowMajorRows(const QuantizedMatrix& q, std::int64_t first, std::int64_t count) {
  const std::int64_t row_bytes = RowMajorBytes(q.format, q.cols), groups = q.cols / q.group;
  RowMajorQuantized out;
  out.values.resize(static_cast<std::size_t>(count * row_bytes));
  out.scales.resize(static_cast<std::size_t>(count * groups));
  for (std::int64_t r = 0; r < count; ++r) {
    std::uint8_t* row = out.values.data() + r * row_bytes;
    const std::uint8_t* chunk = q.values.data() + RowStart(q, first + r);
    for (std::int64_t byte = 0; byte < row_bytes; byte += 4, chunk += kChunkStride) FromTile(q.format, chunk, row + byte);
    for (std::int64_t g = 0; g < groups; ++g) {
      out.scales[static_cast<std::size_t>(r * groups + g)] = q.scales[ScaleIndex(groups, first + r, g)];
    }
  }
  return out;
}

}  // namespace

QuantizedMatrix QuantizedMatrix::Quantize(const WeightMatrix& w, QuantFormat format, int group) {
  const RowMajorQuantized q = QuantizeRowMajor(w, format, group);
  return FromRowMajor(format, w.rows, w.cols, group, q.values, q.scales);
}

RowMajorQuantized QuantizedMatrix::QuantizeRowMajor(const WeightMatrix& w, QuantFormat format, int group) {
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
  return {std::move(values), std::move(scales)};
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
  // Padding rows: level 0 (stored 128, int4 0x88) with scale 0.
  const std::int64_t padded = PaddedRows(rows), row_bytes = RowMajorBytes(format, cols);
  q.values.assign(static_cast<std::size_t>(padded * row_bytes), format == QuantFormat::kInt8 ? 0x80 : 0x88);
  q.scales.assign(static_cast<std::size_t>(padded * groups), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint8_t* row = values.data() + r * row_bytes;
    std::uint8_t* chunk = q.values.data() + RowStart(q, r);
    for (std::int64_t byte = 0; byte < row_bytes; byte += 4, chunk += kChunkStride) ToTile(format, row + byte, chunk);
    for (std::int64_t g = 0; g < groups; ++g) q.scales[ScaleIndex(groups, r, g)] = scales[static_cast<std::size_t>(r * groups + g)];
  }
  return q;
}

RowMajorQuantized QuantizedMatrix::RowMajor() const { return RowMajorRows(*this, 0, rows); }

int QuantizedMatrix::Level(std::int64_t row, std::int64_t col) const {
  if (format == QuantFormat::kInt8) return static_cast<int>(values[RowStart(*this, row) + col / 4 * kChunkStride + col % 4]) - 128;
  const std::uint8_t byte = values[RowStart(*this, row) + col / 8 * kChunkStride + col % 4];
  return ((col % 8 < 4 ? byte : byte >> 4) & 0xF) - 8;
}

float QuantizedMatrix::Scale(std::int64_t row, std::int64_t col) const { return scales[ScaleIndex(cols / group, row, col / group)]; }

QuantizedMatrix QuantizedMatrix::Rows(std::int64_t first, std::int64_t count) const {
  if (first % kTile == 0 && (count % kTile == 0 || first + count == rows)) {
    // Whole tiles (the last may be this matrix's padded one): copied as they are.
    QuantizedMatrix q;
    q.format = format;
    q.rows = count;
    q.cols = cols;
    q.group = group;
    const std::int64_t tile_bytes = kTile * RowMajorBytes(format, cols), tile_scales = kTile * (cols / group);
    const std::int64_t tiles = PaddedRows(count) / kTile, at = first / kTile;
    q.values.assign(values.begin() + at * tile_bytes, values.begin() + (at + tiles) * tile_bytes);
    q.scales.assign(scales.begin() + at * tile_scales, scales.begin() + (at + tiles) * tile_scales);
    return q;
  }
  const RowMajorQuantized part = RowMajorRows(*this, first, count);
  return FromRowMajor(format, count, cols, group, part.values, part.scales);
}

QuantizedMatrix QuantizedMatrix::StackRows(const QuantizedMatrix& a, const QuantizedMatrix& b) {
  if (a.cols != b.cols || a.format != b.format || a.group != b.group) {
    throw std::invalid_argument(fmt::format("quantized matrix: cannot stack {} × {} {} (group {}) on {} × {} {} (group {})", b.rows, b.cols,
                                            ToString(b.format), b.group, a.rows, a.cols, ToString(a.format), a.group));
  }
  if (a.rows % kTile == 0) {
    // a ends on a whole tile: b's tiles follow as they are.
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
  RowMajorQuantized both = a.RowMajor();
  const RowMajorQuantized second = b.RowMajor();
  both.values.insert(both.values.end(), second.values.begin(), second.values.end());
  both.scales.insert(both.scales.end(), second.scales.begin(), second.scales.end());
  return FromRowMajor(a.format, a.rows + b.rows, a.cols, a.group, both.values, both.scales);
}

QuantizedMatrix QuantizedMatrix::Columns(std::int64_t begin, std::int64_t end) const {
  if (begin < 0 || end > cols || begin > end || begin % group != 0 || end % group != 0) {
    throw std::invalid_argument(
        fmt::format("quantized matrix: columns [{}, {}) of {} are not whole groups of {}", begin, end, cols, group));
  }
  const RowMajorQuantized all = RowMajor();
  // Bytes of a row and where the range starts in it (int4: begin and cols are even, groups being even).
  const auto row_bytes = static_cast<std::size_t>(RowMajorBytes(format, cols));
  const auto first_byte = static_cast<std::size_t>(RowMajorBytes(format, begin));
  const auto slice_bytes = static_cast<std::size_t>(RowMajorBytes(format, end - begin));
  const auto row_scales = static_cast<std::size_t>(cols / group);
  const auto first_scale = static_cast<std::size_t>(begin / group);
  const auto slice_scales = static_cast<std::size_t>((end - begin) / group);
  RowMajorQuantized slice;
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

void RowsPortable(QuantFormat format, const std::uint8_t* values, const float* scales, std::int64_t cols, int group,
                  const QuantizedInput* inputs, std::int64_t batch, float* y, std::int64_t y_stride, std::int64_t begin, std::int64_t end) {
  constexpr std::int64_t kTile = QuantizedMatrix::kTileRows;
  const bool int8 = format == QuantFormat::kInt8;
  const std::int64_t blocks = cols / kInputBlock, groups = cols / group, per_group = group / kInputBlock;
  const std::int64_t block_bytes = kTile * (int8 ? kInputBlock : kInputBlock / 2);  // a tile's block: 8 or 4 chunks
  for (std::int64_t o = begin; o < end; ++o) {
    const std::uint8_t* tile = values + o / kTile * blocks * block_bytes;
    const float* ws = scales + o / kTile * kTile * groups;
    const std::int64_t r = o % kTile;
    for (std::int64_t b = 0; b < batch; ++b) {
      const QuantizedInput& in = inputs[b];
      float acc = 0.0f;
      for (std::int64_t k = 0; k < blocks; ++k) {
        const std::int8_t* x = in.q + k * kInputBlock;
        std::int32_t sum = 0;
        for (std::int64_t j = 0; j < block_bytes / (kTile * 4); ++j) {
          const std::uint8_t* w = tile + k * block_bytes + j * kTile * 4 + r * 4;
          for (int i = 0; i < 4; ++i) {
            if (int8) {
              sum += (static_cast<std::int32_t>(w[i]) - 128) * x[4 * j + i];
            } else {  // columns 8j + i (low nibble) and 8j + 4 + i (high), stored q + 8
              sum += ((w[i] & 0xF) - 8) * x[8 * j + i] + ((w[i] >> 4) - 8) * x[8 * j + 4 + i];
            }
          }
        }
        acc = std::fma(static_cast<float>(sum), ws[k / per_group * kTile + r] * in.d[k], acc);
      }
      y[b * y_stride + o - begin] = acc;
    }
  }
}

}  // namespace kernels

namespace kernels {

namespace {

// Whether the quantized products run the VNNI kernels (quantized_vnni.cpp).
bool VnniKernels(Isa isa) { return isa >= Isa::kAvx512 && HasAvx512Vnni(); }

// Whether the kernels read the inputs' block sums: those that start from the stored
// offset (int8 + 128 with VNNI; int4 + 8 on every SIMD path).
bool ReadsBlockSums(const QuantizedMatrix& w, Isa isa) { return w.format == QuantFormat::kInt4 ? isa >= Isa::kAvx2 : VnniKernels(isa); }

}  // namespace

bool PreparedQuantizedInput::Serves(const QuantizedMatrix& w, const float* x, std::int64_t batch_rows, Isa isa) const {
  return source == x && batch == batch_rows && cols == w.cols && (block_sums || !ReadsBlockSums(w, isa));
}

void PreparedQuantizedInput::Prepare(const QuantizedMatrix& w, const float* x, std::int64_t batch_rows, Isa isa) {
  if (Serves(w, x, batch_rows, isa)) return;  // gate and up share their input
  source = x;
  batch = batch_rows;
  cols = w.cols;
  block_sums = ReadsBlockSums(w, isa);
  const std::int64_t blocks = cols / kInputBlock;
  q.resize(static_cast<std::size_t>(batch * cols));
  d.resize(static_cast<std::size_t>(batch * blocks));
  if (isa >= Isa::kAvx2) {
    QuantizeInputAvx2(x, batch, cols, q.data(), d.data());
  } else {
    QuantizeInput(x, batch, cols, q.data(), d.data());
  }
  if (block_sums) {
    sums.resize(static_cast<std::size_t>(batch * blocks));
    for (std::int64_t i = 0; i < batch * blocks; ++i) {
      const std::int8_t* block = q.data() + i * kInputBlock;
      std::int32_t sum = 0;
      for (int j = 0; j < kInputBlock; ++j) sum += block[j];
      sums[static_cast<std::size_t>(i)] = sum;
    }
  }
  rows.resize(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) {
    rows[static_cast<std::size_t>(b)] = {q.data() + b * cols, d.data() + b * blocks, block_sums ? sums.data() + b * blocks : nullptr};
  }
}

void QuantizedRows(const QuantizedMatrix& w, const PreparedQuantizedInput& in, float* y, std::int64_t y_stride, std::int64_t begin,
                   std::int64_t end, Isa isa) {
  const std::int64_t batch = in.batch;
  const QuantizedInput* x = in.rows.data();
  const std::uint8_t* values = w.values.data();
  const float* scales = w.scales.data();
  if (w.format == QuantFormat::kInt8) {
    if (VnniKernels(isa)) return RowsInt8Vnni(values, scales, w.cols, w.group, x, batch, y, y_stride, begin, end);
    if (isa >= Isa::kAvx2) return RowsInt8Avx2(values, scales, w.cols, w.group, x, batch, y, y_stride, begin, end);
  } else {
    if (VnniKernels(isa)) return RowsInt4Vnni(values, scales, w.cols, w.group, x, batch, y, y_stride, begin, end);
    if (isa >= Isa::kAvx2) return RowsInt4Avx2(values, scales, w.cols, w.group, x, batch, y, y_stride, begin, end);
  }
  RowsPortable(w.format, values, scales, w.cols, w.group, x, batch, y, y_stride, begin, end);
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
