#include "runtime/kernels/microscaled_matrix.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "runtime/kernels/cpu_features.hpp"
#include "runtime/kernels/microscaled_rows.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/numeric/dtype.hpp"
#include "runtime/numeric/microscaling.hpp"

namespace tandem::rt {

namespace {

constexpr std::int64_t kBlock = MicroscaledMatrix::kBlock;
constexpr std::int64_t kTileRows = 16;

// Where byte `byte` of FP4 row `row` is stored: whole tiles of 16 rows interleaved, 256 bytes
// a block in groups of 8 rows × 4 bytes (microscaled_rows.hpp), the rows past the last whole
// tile row by row.
std::size_t Fp4ByteAt(std::int64_t rows, std::int64_t cols, std::int64_t row, std::int64_t byte) {
  const std::int64_t row_bytes = cols / 2;
  if (row >= rows / kTileRows * kTileRows) return static_cast<std::size_t>(row * row_bytes + byte);
  const std::int64_t tile = row / kTileRows, r = row % kTileRows, block = byte / 16, j = byte % 16;
  const std::int64_t group = 2 * (j / 4) + r / 8;
  return static_cast<std::size_t>(tile * kTileRows * row_bytes + block * 256 + group * 32 + (r % 8) * 4 + j % 4);
}

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
    const auto& value = E4M3Values();  // a table: F8E4M3ToF32 goes through ldexp
    for (std::int64_t i = 0; i < kBlock; ++i) q[b * kBlock + i] = value[F32ToF8E4M3(std::clamp(v[i] / s, -448.0f, 448.0f))];
  }
}

// A row's product as the definition adds it: `Acc` float (the reference's fp32 running sum)
// or double (MatMulF64's).
template <class Acc>
Acc RowFp8(const MicroscaledMatrix& w, std::int64_t o, const double* q, const float* a_scale) {
  const auto& value = E4M3Values();
  const auto& pow2 = E8M0Values();
  const std::int64_t blocks = w.cols / kBlock;
  const std::uint8_t* codes = w.values.get() + o * w.cols;
  const std::uint8_t* scales = w.scales.get() + (o / kBlock) * blocks;
  Acc acc = 0;
  for (std::int64_t b = 0; b < blocks; ++b) {
    double partial = 0.0;
    for (std::int64_t i = 0; i < kBlock; ++i) partial += q[b * kBlock + i] * value[codes[b * kBlock + i]];
    acc += static_cast<Acc>(static_cast<float>(partial)) * static_cast<Acc>(a_scale[b]) * static_cast<Acc>(pow2[scales[b]]);
  }
  return acc;
}

template <class Acc>
Acc RowFp4(const MicroscaledMatrix& w, std::int64_t o, const double* q, const float* a_scale) {
  const auto& pairs = E2M1Pairs();
  const auto& pow2 = E8M0Values();
  const std::int64_t blocks = w.cols / kBlock;
  const std::uint8_t* scales = w.scales.get() + o * blocks;
  Acc acc = 0;
  for (std::int64_t b = 0; b < blocks; ++b) {
    double partial = 0.0;
    for (std::int64_t i = 0; i < kBlock / 2; ++i) {
      const auto& pair = pairs[w.values[Fp4ByteAt(w.rows, w.cols, o, b * kBlock / 2 + i)]];
      partial += q[b * kBlock + 2 * i] * pair[0];
      partial += q[b * kBlock + 2 * i + 1] * pair[1];
    }
    acc += static_cast<Acc>(static_cast<float>(partial)) * static_cast<Acc>(a_scale[b]) * static_cast<Acc>(pow2[scales[b]]);
  }
  return acc;
}

// An input row as the FP4 SIMD path reads it (microscaled_rows.hpp).
void SplitInput(const double* q, std::int64_t cols, std::int16_t* high, std::int16_t* low) {
  for (std::int64_t b = 0; b < cols / kBlock; ++b) {
    for (std::int64_t i = 0; i < kBlock; ++i) {
      // Evens first, then odds: the order of a block's low then high nibbles.
      const std::int64_t at = b * kBlock + (i % 2 == 0 ? i / 2 : kBlock / 2 + i / 2);
      const auto v = static_cast<std::int32_t>(q[b * kBlock + i] * 512.0);  // exact: E4M3 steps are 2^-9
      high[at] = static_cast<std::int16_t>(v >> 9);
      low[at] = static_cast<std::int16_t>(v & 511);
    }
  }
}

// An input row split as SplitInput does, in column order (the FP8 path's).
void SplitInputInOrder(const double* q, std::int64_t cols, std::int16_t* high, std::int16_t* low) {
  for (std::int64_t i = 0; i < cols; ++i) {
    const auto v = static_cast<std::int32_t>(q[i] * 512.0);  // exact: E4M3 steps are 2^-9
    high[i] = static_cast<std::int16_t>(v >> 9);
    low[i] = static_cast<std::int16_t>(v & 511);
  }
}

// An input row as the FP4 tiles' int16 path reads it (Fp4TileInput::words), from the
// column-order split.
void TileWords(const std::int16_t* high, const std::int16_t* low, std::int64_t cols, std::int64_t* words) {
  const auto pairs = [](const std::int16_t* v, std::int64_t c) {  // v[c], v[c + 2] | v[c + 4], v[c + 6]
    std::uint64_t out = 0;
    for (int k = 0; k < 4; ++k) out |= static_cast<std::uint64_t>(static_cast<std::uint16_t>(v[c + 2 * k])) << (16 * k);
    return static_cast<std::int64_t>(out);
  };
  for (std::int64_t c = 0; c < cols; c += 8) {
    std::int64_t* out = words + c / 2;  // four per eight columns
    out[0] = pairs(high, c);
    out[1] = pairs(high, c + 1);
    out[2] = pairs(low, c);
    out[3] = pairs(low, c + 1);
  }
}

// An input row as the FP4 tiles' byte path reads it (Fp4TileInput::bytes and offset).
void TileBytes(const double* q, std::int64_t cols, std::int8_t* bytes, std::int32_t* offset) {
  for (std::int64_t block = 0; block < cols / kBlock; ++block) {
    std::uint8_t parts[3][kBlock];  // a, b, c of each column, as bytes
    std::int32_t sum = 0;
    for (std::int64_t i = 0; i < kBlock; ++i) {
      const auto v = static_cast<std::int32_t>(q[block * kBlock + i] * 512.0);  // exact: E4M3 steps are 2^-9
      sum += v;
      const std::int32_t a = v >> 14, rest = v - a * 16384;  // a in [−14, 14], rest in [0, 2^14)
      parts[0][i] = static_cast<std::uint8_t>(a);
      parts[1][i] = static_cast<std::uint8_t>(rest >> 7);
      parts[2][i] = static_cast<std::uint8_t>(rest & 127);
    }
    offset[block] = 12 * sum;
    // Per 8 columns and part, 16 lanes of 4 bytes: lanes 0–7 the even columns', 8–15 the odd ones'.
    for (std::int64_t group = 0; group < 4; ++group) {
      for (int p = 0; p < 3; ++p) {
        const std::uint8_t* c = parts[p] + 8 * group;
        const std::uint32_t even = c[0] | (c[2] << 8) | (c[4] << 16) | (static_cast<std::uint32_t>(c[6]) << 24);
        const std::uint32_t odd = c[1] | (c[3] << 8) | (c[5] << 16) | (static_cast<std::uint32_t>(c[7]) << 24);
        std::uint32_t lanes[16];
        for (int m = 0; m < 8; ++m) {
          lanes[m] = even;
          lanes[8 + m] = odd;
        }
        std::memcpy(bytes + ((block * 4 + group) * 3 + p) * 64, lanes, sizeof(lanes));
      }
    }
  }
}

// Row-major bytes of rows [row_begin, row_end) and bytes [byte_begin, byte_end) of each.
std::vector<std::uint8_t> Fp4RowMajor(const MicroscaledMatrix& w, std::int64_t row_begin, std::int64_t row_end, std::int64_t byte_begin,
                                      std::int64_t byte_end) {
  std::vector<std::uint8_t> out;
  out.reserve(static_cast<std::size_t>((row_end - row_begin) * (byte_end - byte_begin)));
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    for (std::int64_t c = byte_begin; c < byte_end; ++c) out.push_back(w.values[Fp4ByteAt(w.rows, w.cols, r, c)]);
  }
  return out;
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
  const std::uint8_t byte = values[Fp4ByteAt(rows, cols, row, col / 2)];
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
  if (format == Format::kFp4Row32) {
    const std::int64_t row_bytes = cols / 2;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < row_bytes; ++c) v[Fp4ByteAt(rows, cols, r, c)] = values[static_cast<std::size_t>(r * row_bytes + c)];
    }
  } else {
    std::copy(values.begin(), values.end(), v.get());
  }
  auto s = std::make_shared<std::uint8_t[]>(scales.size());
  std::copy(scales.begin(), scales.end(), s.get());
  if (format == Format::kFp4Row32 && rows >= 16) {
    const std::int64_t tiles = rows / 16;
    auto t = std::make_shared<std::uint8_t[]>(static_cast<std::size_t>(tiles * blocks * 16));
    for (std::int64_t tile = 0; tile < tiles; ++tile) {
      for (std::int64_t b = 0; b < blocks; ++b) {
        for (std::int64_t r = 0; r < 16; ++r)
          t[static_cast<std::size_t>((tile * blocks + b) * 16 + r)] = s[static_cast<std::size_t>((tile * 16 + r) * blocks + b)];
      }
    }
    m.tile_scales = std::move(t);
  }
  m.values = std::move(v);
  m.scales = std::move(s);
  return m;
}

MicroscaledMatrix MicroscaledMatrix::Rows(std::int64_t begin, std::int64_t end) const {
  const std::int64_t granule = format == Format::kFp8Block32 ? kBlock : 1;  // FP8's scales cover 32 rows
  if (begin < 0 || end > rows || begin >= end || begin % granule != 0 || (end % granule != 0 && end != rows)) {
    throw std::invalid_argument(
        fmt::format("rows [{}, {}) of a {} × {} microscaled matrix: not a range of whole scale blocks", begin, end, rows, cols));
  }
  const std::int64_t blocks = cols / kBlock;
  const std::int64_t scale_begin = format == Format::kFp8Block32 ? begin / kBlock * blocks : begin * blocks;
  const std::int64_t scale_end = format == Format::kFp8Block32 ? (end + kBlock - 1) / kBlock * blocks : end * blocks;
  const std::span<const std::uint8_t> kept_scales{scales.get() + scale_begin, static_cast<std::size_t>(scale_end - scale_begin)};
  if (format == Format::kFp4Row32) return Copy(format, end - begin, cols, Fp4RowMajor(*this, begin, end, 0, cols / 2), kept_scales);
  return Copy(format, end - begin, cols, {values.get() + begin * cols, static_cast<std::size_t>((end - begin) * cols)}, kept_scales);
}

MicroscaledMatrix MicroscaledMatrix::Columns(std::int64_t begin, std::int64_t end) const {
  if (begin < 0 || end > cols || begin >= end || begin % kBlock != 0 || end % kBlock != 0) {
    throw std::invalid_argument(
        fmt::format("columns [{}, {}) of a {} × {} microscaled matrix: not a range of whole 32-column blocks", begin, end, rows, cols));
  }
  const std::int64_t blocks = cols / kBlock, kept = (end - begin) / kBlock;
  const bool fp8 = format == Format::kFp8Block32;
  const std::int64_t row_bytes = fp8 ? cols : cols / 2, kept_bytes = fp8 ? end - begin : (end - begin) / 2;
  const std::int64_t first_byte = fp8 ? begin : begin / 2;
  std::vector<std::uint8_t> v;
  if (fp8) {
    v.resize(static_cast<std::size_t>(rows * kept_bytes));
    for (std::int64_t r = 0; r < rows; ++r) std::copy_n(values.get() + r * row_bytes + first_byte, kept_bytes, v.data() + r * kept_bytes);
  } else {
    v = Fp4RowMajor(*this, 0, rows, first_byte, first_byte + kept_bytes);
  }
  const std::int64_t scale_rows = fp8 ? (rows + kBlock - 1) / kBlock : rows;
  std::vector<std::uint8_t> sc(static_cast<std::size_t>(scale_rows * kept));
  for (std::int64_t r = 0; r < scale_rows; ++r) std::copy_n(scales.get() + r * blocks + begin / kBlock, kept, sc.data() + r * kept);
  return Copy(format, rows, end - begin, v, sc);
}

namespace {

bool fp4_byte_path_allowed = true;

}  // namespace

bool AllowFp4BytePath(bool allow) { return std::exchange(fp4_byte_path_allowed, allow); }

namespace {

// What a product writes: bf16 of the fp32 running sum (MatMul), or the double sum (MatMulF64).
float Finish(float acc) { return Bf16ToF32(F32ToBf16(acc)); }
double Finish(double acc) { return acc; }

template <class Out>
void Product(const MicroscaledMatrix& w, const float* x, std::int64_t batch, Out* y, ThreadPool* pool) {
  constexpr bool kF64 = std::is_same_v<Out, double>;
  const std::int64_t blocks = w.cols / kBlock;
  std::vector<double> q(static_cast<std::size_t>(batch * w.cols));
  std::vector<float> a_scale(static_cast<std::size_t>(batch * blocks));
  for (std::int64_t b = 0; b < batch; ++b) QuantizeInput(x + b * w.cols, w.cols, q.data() + b * w.cols, a_scale.data() + b * blocks);
  const bool fp8 = w.format == MicroscaledMatrix::Format::kFp8Block32;
  const std::int64_t tiles = ActiveIsa() >= Isa::kAvx512 ? w.rows / 16 : 0;  // rows of whole 16-row tiles take the SIMD path
  if (fp8 && !kF64 && tiles > 0) {
    std::vector<std::int16_t> high(q.size()), low(q.size());
    for (std::int64_t b = 0; b < batch; ++b)
      SplitInputInOrder(q.data() + b * w.cols, w.cols, high.data() + b * w.cols, low.data() + b * w.cols);
    ForShares(pool, tiles, 1, [&](std::int64_t begin, std::int64_t end) {
      alignas(64) float out[16];
      for (std::int64_t t = begin; t < end; ++t) {
        for (std::int64_t b = 0; b < batch; ++b) {
          kernels::Fp8Rows16Avx512(w.values.get() + t * 16 * w.cols, w.cols, w.scales.get() + (t / 2) * blocks,
                                   {high.data() + b * w.cols, low.data() + b * w.cols, blocks}, a_scale.data() + b * blocks, out);
          for (int r = 0; r < 16; ++r) y[b * w.rows + t * 16 + r] = Finish(out[r]);
        }
      }
    });
  }
  if (!fp8 && ActiveIsa() >= Isa::kAvx512) {
    const bool by_bytes = fp4_byte_path_allowed && HasAvx512VnniGfni();
    std::vector<std::int16_t> high(q.size()), low(q.size());
    std::vector<std::int8_t> bytes(by_bytes ? q.size() * 24 : 0);  // 4 groups × 3 parts × 64 bytes per 32 columns
    std::vector<std::int32_t> offset(by_bytes ? static_cast<std::size_t>(batch * blocks) : 0);
    std::vector<std::int64_t> words(by_bytes ? 0 : q.size() / 2);
    std::vector<kernels::Fp4TileInput> inputs(static_cast<std::size_t>(batch));
    for (std::int64_t b = 0; b < batch; ++b) {
      kernels::Fp4TileInput& in = inputs[static_cast<std::size_t>(b)];
      in.a_scale = a_scale.data() + b * blocks;
      if (by_bytes) {
        TileBytes(q.data() + b * w.cols, w.cols, bytes.data() + b * w.cols * 24, offset.data() + b * blocks);
        in.bytes = bytes.data() + b * w.cols * 24;
        in.offset = offset.data() + b * blocks;
      } else {
        SplitInputInOrder(q.data() + b * w.cols, w.cols, high.data() + b * w.cols, low.data() + b * w.cols);
        TileWords(high.data() + b * w.cols, low.data() + b * w.cols, w.cols, words.data() + b * w.cols / 2);
        in.words = words.data() + b * w.cols / 2;
      }
    }
    ForShares(pool, tiles, 1, [&](std::int64_t begin, std::int64_t end) {
      std::vector<Out> out(static_cast<std::size_t>(16 * batch));
      const std::uint8_t* stream_end = w.values.get() + end * 16 * (w.cols / 2);
      for (std::int64_t t = begin; t < end; ++t) {
        const std::uint8_t* tile = w.values.get() + t * 16 * (w.cols / 2);
        const std::uint8_t* scales = w.tile_scales.get() + t * blocks * 16;
        if constexpr (kF64) {
          (by_bytes ? kernels::Fp4Tile16F64Vnni : kernels::Fp4Tile16F64Avx512)(tile, blocks, scales, inputs.data(), batch, stream_end,
                                                                               out.data());
        } else {
          (by_bytes ? kernels::Fp4Tile16Vnni : kernels::Fp4Tile16Avx512)(tile, blocks, scales, inputs.data(), batch, stream_end,
                                                                         out.data());
        }
        for (std::int64_t b = 0; b < batch; ++b) {
          for (int r = 0; r < 16; ++r) y[b * w.rows + t * 16 + r] = Finish(out[static_cast<std::size_t>(b * 16 + r)]);
        }
      }
    });
    // Rows past the last whole tile (stored row by row), one at a time.
    for (std::int64_t b = 0; b < batch; ++b) SplitInput(q.data() + b * w.cols, w.cols, high.data() + b * w.cols, low.data() + b * w.cols);
    const auto& pow2 = E8M0Values();
    ForShares(pool, w.rows - tiles * 16, 16, [&](std::int64_t begin, std::int64_t end) {
      std::vector<std::int32_t> sums(static_cast<std::size_t>(blocks));
      for (std::int64_t o = tiles * 16 + begin; o < tiles * 16 + end; ++o) {
        const std::uint8_t* packed = w.values.get() + o * (w.cols / 2);
        const std::uint8_t* scales = w.scales.get() + o * blocks;
        for (std::int64_t b = 0; b < batch; ++b) {
          kernels::Fp4RowSumsAvx512(packed, {high.data() + b * w.cols, low.data() + b * w.cols, blocks}, sums.data());
          const float* sb = a_scale.data() + b * blocks;
          Out acc = 0;
          for (std::int64_t k = 0; k < blocks; ++k) {
            const float partial = static_cast<float>(sums[static_cast<std::size_t>(k)]) * 0x1p-10f;
            acc += static_cast<Out>(partial) * static_cast<Out>(sb[k]) * static_cast<Out>(pow2[scales[k]]);
          }
          y[b * w.rows + o] = Finish(acc);
        }
      }
    });
    return;
  }
  // Rows the FP8 tiles did not take (all of them on the portable path).
  const std::int64_t first = fp8 && !kF64 ? tiles * 16 : 0;
  ForShares(pool, w.rows - first, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = first + begin; o < first + end; ++o) {
      for (std::int64_t b = 0; b < batch; ++b) {
        const double* qb = q.data() + b * w.cols;
        const float* sb = a_scale.data() + b * blocks;
        y[b * w.rows + o] = Finish(fp8 ? RowFp8<Out>(w, o, qb, sb) : RowFp4<Out>(w, o, qb, sb));
      }
    }
  });
}

}  // namespace

void MatMul(const MicroscaledMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool) { Product(w, x, batch, y, pool); }

void MatMulF64(const MicroscaledMatrix& w, const float* x, std::int64_t batch, double* y, ThreadPool* pool) {
  Product(w, x, batch, y, pool);
}

}  // namespace tandem::rt
