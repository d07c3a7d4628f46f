#include "runtime/kernels/matmul.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "runtime/kernels/attention_rows.hpp"
#include "runtime/kernels/cpu_features.hpp"
#include "runtime/kernels/dense_rows.hpp"
#include "runtime/kernels/quantized_input.hpp"
#include "runtime/kernels/quantized_matrix.hpp"
#include "runtime/kernels/thread_pool.hpp"
#include "runtime/kernels/workspace_memory.hpp"

namespace tandem::rt {

namespace {

// Reused across calls so the hot path does not allocate: the caller thread's copy
// of the inputs in the layout a kernel wants (read by every thread of the pool).
Workspace<float>& InputScratch() {
  thread_local Workspace<float> scratch;
  return scratch;
}

// fp8 rows [begin, end): each 128-row block of the scale grid gets the inputs
// multiplied by its column blocks' scales (times `multiplier`, which the SIMD
// kernels use to read e4m3 as half precision), then the block's rows run through
// `rows_fn` like any other type.
template <typename RowsFn>
void Fp8Rows(const WeightMatrix& w, const float* x, std::int64_t batch, std::int64_t begin, std::int64_t end, float multiplier,
             std::vector<float>& scaled, RowsFn rows_fn) {
  constexpr std::int64_t kBlock = WeightMatrix::kFp8Block;
  scaled.resize(static_cast<std::size_t>(batch * w.cols));
  for (std::int64_t first = begin; first < end;) {
    const std::int64_t block_row = (first + w.block_origin_row) / kBlock;
    const std::int64_t last = std::min(end, (block_row + 1) * kBlock - w.block_origin_row);
    const float* scale = w.block_scales + block_row * w.scale_cols;
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t c = 0; c < w.cols; ++c) {
        scaled[static_cast<std::size_t>(b * w.cols + c)] = x[b * w.cols + c] * scale[(c + w.block_origin_col) / kBlock] * multiplier;
      }
    }
    rows_fn(scaled.data(), first, last);
    first = last;
  }
}

}  // namespace

namespace kernels {

float ReduceLanes(float* lanes) {
  for (int width = 16 / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

}  // namespace kernels

namespace {

// bf16 with two inputs or more on AVX-512: the register-tile kernel, which reads x in
// natural order and the weights once for all inputs (the same bits as the AVX2
// kernel's, which passes over the weights once per input). One input goes to whichever
// of the two reads faster on the CPU (the same bits either way): on AMD (Zen 4 and
// Zen 5) the AVX2 kernel, one row at a time (four rows' streams read 15-25% slower from
// memory, and widening by vpmovzxwd cost 10-20% of decode); on Intel the AVX-512
// tiles of four rows (Emerald Rapids, 2 vCPUs: a decode step's expert products 25-26
// against 23-24 GB/s, whole bf16 decode x1.00-1.16 on one thread, x1.03-1.08 on two;
// docs/performance.md, "bf16 against one input").
bool OnAvx512Tiles(Isa isa, std::int64_t batch) {
  if (isa != Isa::kAvx512) return false;
  return batch >= 2 || (batch == 1 && IsIntelCpu());
}

// bf16 by dot products of bf16 pairs (AVX-512 BF16, or AMX tiles), for every batch:
// inputs rounded to bf16 once per product (dense_rows.hpp).
bool Bf16Dots(Isa isa) { return isa >= Isa::kAvx512Bf16; }

// Of those, the AMX tiles take rows of whole 64-byte blocks; other widths stay on the
// AVX-512 BF16 kernel (a choice by the matrix, so a row's bits never depend on its batch).
bool AmxTiles(Isa isa, std::int64_t cols) { return isa == Isa::kAmx && cols % 32 == 0; }

// Rows [begin, end) of one product with fp32 output; `x` as PrepareInput left it.
// Returns whether the kernel prefetched the head of `stream.next` (the bf16 kernels of
// AVX2, AVX-512 with many inputs and AVX-512 BF16 follow a stream across products).
bool RowsOf(const WeightMatrix& w, Isa isa, const float* x, std::int64_t batch, float* y, std::int64_t begin, std::int64_t end,
            const kernels::RowStream& stream) {
  const std::int64_t rows = w.rows, cols = w.cols;
  switch (w.type) {
    case WeightMatrix::Type::kBF16: {
      const auto* data = static_cast<const std::uint16_t*>(w.data);
      if (AmxTiles(isa, cols)) {
        // x as PrepareBf16InputAmx wrote it into the float scratch.
        kernels::RowsBf16Amx(data, rows, cols, reinterpret_cast<const std::uint16_t*>(x), batch, y, rows, begin, end);
        return false;
      }
      if (Bf16Dots(isa)) {
        // x as PrepareBf16InputDpbf16 wrote it into the float scratch.
        return kernels::RowsBf16Dpbf16(data, cols, reinterpret_cast<const std::uint16_t*>(x), batch, y, rows, begin, end, stream);
      }
      if (OnAvx512Tiles(isa, batch)) return kernels::RowsBf16ManyAvx512(data, cols, x, batch, y, rows, begin, end, stream);
      if (isa >= Isa::kAvx2) return kernels::RowsBf16Avx2(data, cols, x, batch, y, rows, begin, end, stream);
      if (isa == Isa::kAvxFma) {
        kernels::RowsBf16AvxFma(data, cols, x, batch, y, rows, begin, end);
      } else {
        kernels::RowsBf16Portable(data, cols, x, batch, y, rows, begin, end);
      }
      return false;
    }
    case WeightMatrix::Type::kF32: {
      const auto* data = static_cast<const float*>(w.data);
      if (isa >= Isa::kAvx512) {
        kernels::RowsF32Avx512(data, cols, x, batch, y, rows, begin, end);
      } else if (isa == Isa::kAvx2) {
        kernels::RowsF32Avx2(data, cols, x, batch, y, rows, begin, end);
      } else if (isa == Isa::kAvxFma) {
        kernels::RowsF32AvxFma(data, cols, x, batch, y, rows, begin, end);
      } else {
        kernels::RowsF32Portable(data, cols, x, batch, y, rows, begin, end);
      }
      return false;
    }
    case WeightMatrix::Type::kF8E4M3: {
      const auto* data = static_cast<const std::uint8_t*>(w.data);
      thread_local std::vector<float> scaled;
      Fp8Rows(w, x, batch, begin, end, isa >= Isa::kAvx2 ? 256.0f : 1.0f, scaled, [&](const float* xs, std::int64_t b, std::int64_t e) {
        if (isa >= Isa::kAvx512) return kernels::RowsFp8Avx512(data, cols, xs, batch, y, rows, b, e);
        if (isa == Isa::kAvx2) return kernels::RowsFp8Avx2(data, cols, xs, batch, y, rows, b, e);
        if (isa == Isa::kAvxFma) return kernels::RowsFp8AvxFma(data, cols, xs, batch, y, rows, b, e);
        kernels::RowsFp8Portable(data, cols, xs, batch, y, rows, b, e);
      });
      return false;
    }
    case WeightMatrix::Type::kQuantized:
      return false;  // MatMulMany runs these itself
  }
  return false;
}

// Rows [begin, end) of one product with double accumulation and output.
void RowsOfF64(const WeightMatrix& w, Isa isa, const float* x, std::int64_t batch, double* y, std::int64_t begin, std::int64_t end) {
  // Products of these weights and fp32 inputs are exact in double, so every path gives
  // the same bits; the AVX + FMA kernels serve the wider instruction sets too.
  const bool avx_fma = isa >= Isa::kAvxFma;
  switch (w.type) {
    case WeightMatrix::Type::kF32: {
      const auto* data = static_cast<const float*>(w.data);
      if (avx_fma) return kernels::RowsF32F64AvxFma(data, w.cols, x, batch, y, w.rows, begin, end);
      return kernels::RowsF32F64Portable(data, w.cols, x, batch, y, w.rows, begin, end);
    }
    case WeightMatrix::Type::kBF16: {
      const auto* data = static_cast<const std::uint16_t*>(w.data);
      if (avx_fma) return kernels::RowsBf16F64AvxFma(data, w.cols, x, batch, y, w.rows, begin, end);
      return kernels::RowsBf16F64Portable(data, w.cols, x, batch, y, w.rows, begin, end);
    }
    case WeightMatrix::Type::kF8E4M3: {
      const auto* data = static_cast<const std::uint8_t*>(w.data);
      thread_local std::vector<float> scaled;
      return Fp8Rows(w, x, batch, begin, end, 1.0f, scaled, [&](const float* xs, std::int64_t b, std::int64_t e) {
        if (avx_fma) return kernels::RowsFp8F64AvxFma(data, w.cols, xs, batch, y, w.rows, b, e);
        kernels::RowsFp8F64Portable(data, w.cols, xs, batch, y, w.rows, b, e);
      });
    }
    case WeightMatrix::Type::kQuantized:
      return;
  }
}

// Whether the kernel that reads t's rows follows a RowStream (the bf16 kernels of AVX2,
// AVX-512 with many inputs, and AVX-512 BF16).
bool FollowsRowStream(const MatMulTask& t, Isa isa) {
  return isa >= Isa::kAvx2 && t.y != nullptr && t.w->type == WeightMatrix::Type::kBF16 && !t.w->quantized;
}

// Whether a product's fp32 kernel wants its input rearranged (AVX2 bf16: see
// PrepareBf16InputAvx2) or rounded to bf16 (PrepareBf16InputDpbf16): all of those
// but AVX-512's many-input tiles, which read x as given.
bool NeedsPreparedInput(const MatMulTask& t, Isa isa) { return FollowsRowStream(t, isa) && !OnAvx512Tiles(isa, t.batch); }

// The floats of scratch a prepared input takes (bf16 values, two to a float, for
// the dot-product path).
std::size_t PreparedFloats(const MatMulTask& t, Isa isa) {
  if (AmxTiles(isa, t.w->cols)) return static_cast<std::size_t>(kernels::Bf16AmxInputValues(t.batch, t.w->cols) / 2);
  if (Bf16Dots(isa)) return static_cast<std::size_t>(t.batch * kernels::Bf16DotStride(t.w->cols) / 2);
  return static_cast<std::size_t>(t.batch * t.w->cols);
}

void PrepareInput(const MatMulTask& t, Isa isa, float* out) {
  if (AmxTiles(isa, t.w->cols)) {
    kernels::PrepareBf16InputAmx(t.x, t.batch, t.w->cols, reinterpret_cast<std::uint16_t*>(out));
  } else if (Bf16Dots(isa)) {
    kernels::PrepareBf16InputDpbf16(t.x, t.batch, t.w->cols, reinterpret_cast<std::uint16_t*>(out));
  } else {
    kernels::PrepareBf16InputAvx2(t.x, t.batch, t.w->cols, out);
  }
}

}  // namespace

void MatMulMany(std::span<const MatMulTask> tasks, ThreadPool* pool) {
  const Isa isa = ActiveIsa();
  // Inputs some kernels want rearranged: laid out one after the other in the
  // caller's scratch, which the pool's threads read. Quantized products get their
  // inputs quantized once (a product sharing its input and format with an earlier
  // one, like an MLP's up with its gate, reuses that).
  Workspace<float>& scratch = InputScratch();
  std::size_t scratch_size = 0;
  for (const MatMulTask& t : tasks) {
    if (NeedsPreparedInput(t, isa)) scratch_size += PreparedFloats(t, isa);
  }
  scratch.resize(scratch_size);
  thread_local std::vector<const float*> inputs;
  thread_local std::vector<std::int64_t> first_row, first_work;
  thread_local std::vector<kernels::PreparedQuantizedInput> quantized_inputs;
  thread_local std::vector<const kernels::PreparedQuantizedInput*> quantized_of;
  inputs.assign(tasks.size(), nullptr);
  // Sized up front: quantized_of points into it.
  if (quantized_inputs.size() < tasks.size()) quantized_inputs.resize(tasks.size());
  quantized_of.assign(tasks.size(), nullptr);
  first_row.assign(tasks.size() + 1, 0);
  first_work.assign(tasks.size() + 1, 0);  // multiply-adds before each product
  std::size_t offset = 0, quantized_used = 0;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const MatMulTask& t = tasks[i];
    inputs[i] = t.x;
    if (t.w->quantized) {
      const QuantizedMatrix& q = *t.w->quantized;
      for (std::size_t j = 0; j < quantized_used && quantized_of[i] == nullptr; ++j) {
        const kernels::PreparedQuantizedInput& p = quantized_inputs[j];
        if (p.Serves(q, t.x, t.batch, isa)) quantized_of[i] = &p;
      }
      if (quantized_of[i] == nullptr) {
        kernels::PreparedQuantizedInput& p = quantized_inputs[quantized_used++];
        p.source = nullptr;
        p.Prepare(q, t.x, t.batch, isa);
        quantized_of[i] = &p;
      }
    } else if (NeedsPreparedInput(t, isa)) {
      // A product sharing its input with an earlier one (an MLP's up with its gate,
      // experts given the same row) reuses that one's rearranged copy.
      for (std::size_t j = 0; j < i && inputs[i] == t.x; ++j) {
        const MatMulTask& u = tasks[j];
        if (u.x == t.x && u.batch == t.batch && u.w->cols == t.w->cols && inputs[j] != u.x) inputs[i] = inputs[j];
      }
      if (inputs[i] == t.x) {
        float* prepared = scratch.data() + offset;
        PrepareInput(t, isa, prepared);
        inputs[i] = prepared;
        offset += PreparedFloats(t, isa);
      }
    }
    first_row[i + 1] = first_row[i] + t.w->rows;
    first_work[i + 1] = first_work[i] + t.w->rows * t.w->cols * t.batch;
  }
  const std::int64_t total = first_row.back();
  if (total == 0) return;
  // The threads split the work, not the rows: a product's row costs batch × cols
  // multiply-adds, and the experts of a prompt chunk have very different batches, so
  // equal counts of rows left one thread with most of the work. The pool splits units
  // of about 16k multiply-adds (small enough to balance, large enough that tiny layers
  // stay on few threads); a unit range maps to the rows whose work starts in it.
  constexpr std::int64_t kUnit = 16384;
  const std::int64_t work = first_work.back();
  const std::int64_t units = std::max<std::int64_t>(1, (work + kUnit - 1) / kUnit);
  const std::vector<const float*>& in = inputs;
  const std::vector<std::int64_t>& starts = first_row;
  const std::vector<const kernels::PreparedQuantizedInput*>& quantized = quantized_of;
  // (The pool's threads read the caller's thread_local vectors through these references.)
  const std::vector<std::int64_t>& work_at = first_work;
  // The rows whose work starts before w (rows of one product start cols · batch apart).
  const auto rows_before = [&](std::int64_t w) -> std::int64_t {
    const auto i = static_cast<std::size_t>(std::lower_bound(work_at.begin(), work_at.end() - 1, w) - work_at.begin());
    if (i == 0) return 0;
    const MatMulTask& t = tasks[i - 1];
    const std::int64_t per = t.w->cols * t.batch;
    const std::int64_t in_task = per == 0 ? t.w->rows : std::min(t.w->rows, (w - work_at[i - 1] + per - 1) / per);
    return starts[i - 1] + in_task;
  };
  ForShares(pool, units, 1, [&](std::int64_t first_unit, std::int64_t end_unit) {
    const std::int64_t begin = rows_before(first_unit * kUnit);
    const std::int64_t end = end_unit == units ? total : rows_before(end_unit * kUnit);
    auto i = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin()) - 1;
    bool head_warm = false;  // the previous product prefetched this one's head
    for (; i < tasks.size() && starts[i] < end; ++i) {
      const MatMulTask& t = tasks[i];
      const std::int64_t b = std::max(begin, starts[i]) - starts[i], e = std::min(end, starts[i + 1]) - starts[i];
      if (b >= e) continue;
      kernels::RowStream stream;
      stream.head_warm = std::exchange(head_warm, false);
      // The next product this thread reads, if the same kernel reads it (its rows
      // in this share start at its first row: the shares are contiguous).
      if (i + 1 < tasks.size() && starts[i + 1] < end && tasks[i + 1].batch > 0 && FollowsRowStream(tasks[i + 1], isa)) {
        const WeightMatrix& next = *tasks[i + 1].w;
        stream.next = static_cast<const char*>(next.data);
        stream.next_bytes = (std::min(end, starts[i + 2]) - starts[i + 1]) * next.cols * static_cast<std::int64_t>(sizeof(std::uint16_t));
      }
      if (t.w->quantized) {
        const QuantizedMatrix& q = *t.w->quantized;
        if (t.y != nullptr) kernels::QuantizedRows(q, *quantized[i], t.y + b, q.rows, b, e, isa);
        if (t.y64 != nullptr) {
          thread_local std::vector<float> rows;
          rows.resize(static_cast<std::size_t>(t.batch * (e - b)));
          kernels::QuantizedRows(q, *quantized[i], rows.data(), e - b, b, e, isa);
          for (std::int64_t r = 0; r < t.batch; ++r) {
            for (std::int64_t o = b; o < e; ++o) t.y64[r * q.rows + o] = rows[static_cast<std::size_t>(r * (e - b) + o - b)];
          }
        }
        continue;
      }
      if (t.y != nullptr) head_warm = RowsOf(*t.w, isa, in[i], t.batch, t.y, b, e, stream);
      if (t.y64 != nullptr) RowsOfF64(*t.w, isa, t.x, t.batch, t.y64, b, e);  // the double kernels read x as given
    }
  });
}

void PrefetchWeights(const WeightMatrix& w) {
  // (Not kernels/prefetch.hpp's PrefetchRange: that is x86-only, for the SIMD files;
  // this file is built for every target.)
  const auto lines = [](const void* data, std::size_t bytes) {
    const auto* p = static_cast<const char*>(data);
    for (std::size_t at = 0; at < bytes; at += 64) __builtin_prefetch(p + at, 0, 2);  // prefetcht1: into L2
  };
  if (w.quantized) {
    lines(w.quantized->values.data(), w.quantized->values.size());
    lines(w.quantized->scales.data(), w.quantized->scales.size() * sizeof(float));
    return;
  }
  lines(w.data, static_cast<std::size_t>(w.rows * w.cols) * w.element_size());
}

void MatMul(const WeightMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool) {
  const MatMulTask task{&w, x, batch, y, nullptr};
  MatMulMany(std::span<const MatMulTask>(&task, 1), pool);
}

void MatMulF64(const WeightMatrix& w, const float* x, std::int64_t batch, double* y, ThreadPool* pool) {
  const MatMulTask task{&w, x, batch, nullptr, y};
  MatMulMany(std::span<const MatMulTask>(&task, 1), pool);
}

void MatMulTransposed(const WeightMatrix& w, const float* x, std::int64_t batch, float* y, ThreadPool* pool) {
  const std::int64_t min_chunk = std::max<std::int64_t>(16, 16384 / std::max<std::int64_t>(1, w.rows * batch));
  // By the CPU, not TANDEM_ISA: the AVX2 loops give the same bits (attention_rows.hpp).
  static const bool avx2 = DetectedIsa() >= Isa::kAvx2, avx512 = DetectedIsa() >= Isa::kAvx512;
  ForShares(pool, w.cols, min_chunk, [&](std::int64_t begin, std::int64_t end) {
    switch (w.type) {
      case WeightMatrix::Type::kF32:
        if (avx2) return kernels::TransposedF32Avx2(static_cast<const float*>(w.data), w.rows, w.cols, x, batch, y, begin, end);
        return kernels::TransposedF32Portable(static_cast<const float*>(w.data), w.rows, w.cols, x, batch, y, begin, end);
      case WeightMatrix::Type::kBF16:
        if (avx512) {
          return kernels::TransposedBf16Avx512(static_cast<const std::uint16_t*>(w.data), w.rows, w.cols, x, batch, y, begin, end);
        }
        if (avx2) {
          return kernels::TransposedBf16Avx2(static_cast<const std::uint16_t*>(w.data), w.rows, w.cols, x, batch, y, begin, end);
        }
        return kernels::TransposedBf16Portable(static_cast<const std::uint16_t*>(w.data), w.rows, w.cols, x, batch, y, begin, end);
      case WeightMatrix::Type::kQuantized:
        if (avx512) return kernels::TransposedQuantizedAvx512(*w.quantized, x, batch, y, begin, end);
        if (avx2) return kernels::TransposedQuantizedAvx2(*w.quantized, x, batch, y, begin, end);
        return kernels::TransposedQuantizedPortable(*w.quantized, x, batch, y, begin, end);
      case WeightMatrix::Type::kF8E4M3:
        // Small (attention's absorbed key projection), so element by element.
        for (std::int64_t b = 0; b < batch; ++b) {
          float* out = y + b * w.cols;
          for (std::int64_t c = begin; c < end; ++c) out[c] = 0.0f;
          for (std::int64_t r = 0; r < w.rows; ++r) {
            const float xr = x[b * w.rows + r];
            for (std::int64_t c = begin; c < end; ++c) out[c] += w.At(r, c) * xr;
          }
        }
        return;
    }
  });
}

float Dot(const float* a, const float* b, std::int64_t n) {
  // By the CPU, not TANDEM_ISA, as attention (whose AVX2 loops give these bits) chooses.
  static const bool avx_fma = DetectedIsa() >= Isa::kAvxFma;
  return avx_fma ? kernels::DotAvxFma(a, b, n) : kernels::DotPortable(a, b, n);
}

}  // namespace tandem::rt
