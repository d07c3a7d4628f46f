#include "runtime/kernels/quantized_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/kernels/thread_pool.hpp"

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

namespace {

// One group's Σ q[i]·x[i] with sixteen lanes (the compiler vectorises them), then
// scaled: the sum of a row is the groups' scaled sums in order, so results do not
// depend on the batch or the thread.
#define TANDEM_QUANT_CLONES __attribute__((target_clones("arch=haswell", "fma", "default")))

TANDEM_QUANT_CLONES void RowsInt8(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, std::int64_t begin,
                                  std::int64_t end) {
  const std::int64_t groups = w.cols / w.group;
  for (std::int64_t o = begin; o < end; ++o) {
    const auto* q = reinterpret_cast<const std::int8_t*>(w.values.data()) + o * w.cols;
    const float* scale = w.scales.data() + o * groups;
    for (std::int64_t b = 0; b < batch; ++b) {
      const float* xb = x + b * w.cols;
      float total = 0;
      for (std::int64_t g = 0; g < groups; ++g) {
        float acc[16] = {};
        const std::int64_t base = g * w.group;
        for (std::int64_t i = 0; i < w.group; i += 16) {
          const std::int64_t lanes = std::min<std::int64_t>(16, w.group - i);
          for (std::int64_t l = 0; l < lanes; ++l) acc[l] += static_cast<float>(q[base + i + l]) * xb[base + i + l];
        }
        for (int width = 8; width > 0; width /= 2) {
          for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
        }
        total += acc[0] * scale[g];
      }
      y[b * w.rows + o] = total;
    }
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
    const float* scale = w.scales.data() + o * groups;
    for (std::int64_t b = 0; b < batch; ++b) {
      const float* xb = x + b * w.cols;
      float total = 0;
      for (std::int64_t g = 0; g < groups; ++g) {
        float acc[16] = {};
        const std::int64_t base = g * w.group;
        for (std::int64_t i = 0; i < w.group; i += 16) {
          const std::int64_t lanes = std::min<std::int64_t>(16, w.group - i);
          for (std::int64_t l = 0; l < lanes; ++l) acc[l] += row[static_cast<std::size_t>(base + i + l)] * xb[base + i + l];
        }
        for (int width = 8; width > 0; width /= 2) {
          for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
        }
        total += acc[0] * scale[g];
      }
      y[b * w.rows + o] = total;
    }
  }
}

}  // namespace

void MatMul(const QuantizedMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool) {
  const auto rows = [&](std::int64_t begin, std::int64_t end) {
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

}  // namespace tandem::rt
