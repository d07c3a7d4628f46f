#include "runtime/kernels/quantized_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/kernels/thread_pool.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tandem::rt {

std::string_view ToString(QuantFormat format) { return format == QuantFormat::kInt8 ? "int8" : "int4"; }

namespace {

int Levels(QuantFormat format) { return format == QuantFormat::kInt8 ? 127 : 7; }

}  // namespace

QuantizedMatrix QuantizedMatrix::Quantize(const WeightMatrix& w, QuantFormat format, int group) {
  if (group <= 0 || w.cols % group != 0) {
    throw std::invalid_argument(fmt::format("quantize: {} columns are not a multiple of the group size {}", w.cols, group));
  }
  if (format == QuantFormat::kInt4 && group % 2 != 0) throw std::invalid_argument(fmt::format("quantize: int4 needs an even group size, not {}", group));
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
        const auto level = static_cast<int>(std::clamp(std::nearbyint(v[i] / scale), static_cast<float>(-levels), static_cast<float>(levels)));
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
  QuantizedMatrix q = *this;
  q.rows = count;
  const auto row_bytes = static_cast<std::size_t>(format == QuantFormat::kInt8 ? cols : cols / 2);
  const auto row_scales = static_cast<std::size_t>(cols / group);
  q.values.assign(values.begin() + static_cast<std::ptrdiff_t>(first * row_bytes),
                  values.begin() + static_cast<std::ptrdiff_t>((first + count) * row_bytes));
  q.scales.assign(scales.begin() + static_cast<std::ptrdiff_t>(first * row_scales),
                  scales.begin() + static_cast<std::ptrdiff_t>((first + count) * row_scales));
  return q;
}

QuantizedMatrix QuantizedMatrix::Columns(std::int64_t begin, std::int64_t end) const {
  if (begin < 0 || end > cols || begin > end || begin % group != 0 || end % group != 0) {
    throw std::invalid_argument(fmt::format("quantized matrix: columns [{}, {}) of {} are not whole groups of {}", begin, end,
                                            cols, group));
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

namespace {

// One group's Σ q[i]·x[i] with sixteen lanes (the compiler vectorises them), then
// scaled: the sum of a row is the groups' scaled sums in order, so results do not
// depend on the batch or the thread.
#define TANDEM_QUANT_CLONES __attribute__((target_clones("arch=haswell", "fma", "default")))

// Σ over groups of scale[g] · Σ_i q[i]·x[i]: the portable form of a row's dot product,
// with q as int8 values or as int4 values unpacked to floats.
template <typename T>
__attribute__((always_inline)) inline float GroupDot(const T* q, const float* scale, const float* x, std::int64_t groups, std::int64_t group) {
  float total = 0;
  for (std::int64_t g = 0; g < groups; ++g) {
    float acc[16] = {};
    const std::int64_t base = g * group;
    for (std::int64_t i = 0; i < group; i += 16) {
      const std::int64_t lanes = std::min<std::int64_t>(16, group - i);
      for (std::int64_t l = 0; l < lanes; ++l) acc[l] += static_cast<float>(q[base + i + l]) * x[base + i + l];
    }
    for (int width = 8; width > 0; width /= 2) {
      for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
    }
    total += acc[0] * scale[g];
  }
  return total;
}

TANDEM_QUANT_CLONES void RowsInt8(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, std::int64_t begin,
                                  std::int64_t end) {
  const std::int64_t groups = w.cols / w.group;
  for (std::int64_t o = begin; o < end; ++o) {
    const auto* q = reinterpret_cast<const std::int8_t*>(w.values.data()) + o * w.cols;
    for (std::int64_t b = 0; b < batch; ++b) y[b * w.rows + o] = GroupDot(q, w.scales.data() + o * groups, x + b * w.cols, groups, w.group);
  }
}

TANDEM_QUANT_CLONES void RowsInt4(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, std::int64_t begin,
                                  std::int64_t end) {
  const std::int64_t groups = w.cols / w.group;
  float levels[256 * 2];  // byte → its two values, low nibble first
  for (int v = 0; v < 256; ++v) {
    const int lo = v & 0xF, hi = v >> 4;
    levels[2 * v] = static_cast<float>(lo >= 8 ? lo - 16 : lo);
    levels[2 * v + 1] = static_cast<float>(hi >= 8 ? hi - 16 : hi);
  }
  std::vector<float> row(static_cast<std::size_t>(w.cols));
  for (std::int64_t o = begin; o < end; ++o) {
    const std::uint8_t* q = w.values.data() + o * w.cols / 2;
    for (std::int64_t i = 0; i < w.cols / 2; ++i) {
      row[static_cast<std::size_t>(2 * i)] = levels[2 * q[i]];
      row[static_cast<std::size_t>(2 * i + 1)] = levels[2 * q[i] + 1];
    }
    for (std::int64_t b = 0; b < batch; ++b) {
      y[b * w.rows + o] = GroupDot(row.data(), w.scales.data() + o * groups, x + b * w.cols, groups, w.group);
    }
  }
}

#if defined(__x86_64__)
const bool kHasAvx2Fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");

__attribute__((target("avx2,fma"))) inline float HorizontalSum(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  return ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
}

// Eight signed 8-bit values widened to floats, times eight inputs, into `acc`.
__attribute__((target("avx2,fma"))) inline __m256 Fma8(__m128i q8, const float* x, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), _mm256_loadu_ps(x), acc);
}

// int8, group a multiple of 8: per group an 8-lane dot product, scaled into an
// 8-lane total, summed in a fixed tree at the end. Each (row, input) pair runs the
// same instructions whatever the batch, so results do not depend on it.
__attribute__((target("avx2,fma"))) void RowsInt8Avx2(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y,
                                                     std::int64_t begin, std::int64_t end) {
  const std::int64_t groups = w.cols / w.group;
  for (std::int64_t o = begin; o < end; ++o) {
    const auto* q = reinterpret_cast<const std::int8_t*>(w.values.data()) + o * w.cols;
    const float* scale = w.scales.data() + o * groups;
    for (std::int64_t b = 0; b < batch; ++b) {
      const float* xb = x + b * w.cols;
      __m256 total = _mm256_setzero_ps();
      for (std::int64_t g = 0; g < groups; ++g) {
        __m256 acc = _mm256_setzero_ps();
        for (std::int64_t i = g * w.group; i < (g + 1) * w.group; i += 8) {
          acc = Fma8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i)), xb + i, acc);
        }
        total = _mm256_fmadd_ps(acc, _mm256_set1_ps(scale[g]), total);
      }
      y[b * w.rows + o] = HorizontalSum(total);
    }
  }
}

// int4, group a multiple of 32: 16 packed bytes → 32 signed values in order (low
// nibble first), then as int8.
__attribute__((target("avx2,fma"))) void RowsInt4Avx2(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y,
                                                     std::int64_t begin, std::int64_t end) {
  const std::int64_t groups = w.cols / w.group;
  const __m128i low_nibbles = _mm_set1_epi8(0x0F), sign = _mm_set1_epi8(0x08);
  for (std::int64_t o = begin; o < end; ++o) {
    const std::uint8_t* q = w.values.data() + o * w.cols / 2;
    const float* scale = w.scales.data() + o * groups;
    for (std::int64_t b = 0; b < batch; ++b) {
      const float* xb = x + b * w.cols;
      __m256 total = _mm256_setzero_ps();
      for (std::int64_t g = 0; g < groups; ++g) {
        __m256 acc = _mm256_setzero_ps();
        for (std::int64_t i = g * w.group; i < (g + 1) * w.group; i += 32) {
          const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i / 2));
          // (n ^ 8) − 8 turns a 4-bit two's complement nibble into a signed byte.
          const __m128i lo = _mm_sub_epi8(_mm_xor_si128(_mm_and_si128(packed, low_nibbles), sign), sign);
          const __m128i hi = _mm_sub_epi8(_mm_xor_si128(_mm_and_si128(_mm_srli_epi16(packed, 4), low_nibbles), sign), sign);
          const __m128i first = _mm_unpacklo_epi8(lo, hi), second = _mm_unpackhi_epi8(lo, hi);
          acc = Fma8(first, xb + i, acc);
          acc = Fma8(_mm_srli_si128(first, 8), xb + i + 8, acc);
          acc = Fma8(second, xb + i + 16, acc);
          acc = Fma8(_mm_srli_si128(second, 8), xb + i + 24, acc);
        }
        total = _mm256_fmadd_ps(acc, _mm256_set1_ps(scale[g]), total);
      }
      y[b * w.rows + o] = HorizontalSum(total);
    }
  }
}
#endif

}  // namespace

void MatMul(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool) {
  const auto rows = [&](std::int64_t begin, std::int64_t end) {
#if defined(__x86_64__)
    if (kHasAvx2Fma && w.format == QuantFormat::kInt8 && w.group % 8 == 0) return RowsInt8Avx2(w, x, batch, y, begin, end);
    if (kHasAvx2Fma && w.format == QuantFormat::kInt4 && w.group % 32 == 0) return RowsInt4Avx2(w, x, batch, y, begin, end);
#endif
    if (w.format == QuantFormat::kInt8) {
      RowsInt8(w, x, batch, y, begin, end);
    } else {
      RowsInt4(w, x, batch, y, begin, end);
    }
  };
  const std::int64_t min_chunk = std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, w.cols * batch));
  if (pool == nullptr) {
    rows(0, w.rows);
  } else {
    pool->ParallelFor(w.rows, rows, min_chunk);
  }
}

void MatMulF64(const QuantizedMatrix& w, const float* x, std::int64_t batch, double* y, ThreadPool* pool) {
  thread_local std::vector<float> out;
  out.resize(static_cast<std::size_t>(batch * w.rows));
  MatMul(w, x, batch, out.data(), pool);
  std::copy(out.begin(), out.end(), y);
}

void MatMulPortable(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y) {
  if (w.format == QuantFormat::kInt8) {
    RowsInt8(w, x, batch, y, 0, w.rows);
  } else {
    RowsInt4(w, x, batch, y, 0, w.rows);
  }
}

}  // namespace tandem::rt
