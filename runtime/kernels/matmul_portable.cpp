// The portable row kernels (see dense_rows.hpp): plain_rows.hpp's loops compiled for
// the baseline target, whatever the compiler vectorises there.

#include "runtime/kernels/dense_rows.hpp"
#include "runtime/kernels/plain_rows.hpp"

namespace tandem::rt::kernels {

void RowsBf16Portable(const std::uint16_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                      std::int64_t begin, std::int64_t end) {
  PlainRows(w, cols, x, batch, y, y_stride, begin, end);
}

void RowsF32Portable(const float* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                     std::int64_t begin, std::int64_t end) {
  PlainRows(w, cols, x, batch, y, y_stride, begin, end);
}

void RowsFp8Portable(const std::uint8_t* w, std::int64_t cols, const float* x, std::int64_t batch, float* y, std::int64_t y_stride,
                     std::int64_t begin, std::int64_t end) {
  PlainRows(w, cols, x, batch, y, y_stride, begin, end);
}

void RowsBf16F64Portable(const std::uint16_t* w, std::int64_t cols, const float* x, std::int64_t batch, double* y, std::int64_t y_stride,
                         std::int64_t begin, std::int64_t end) {
  PlainRowsF64(w, cols, x, batch, y, y_stride, begin, end);
}

void RowsF32F64Portable(const float* w, std::int64_t cols, const float* x, std::int64_t batch, double* y, std::int64_t y_stride,
                        std::int64_t begin, std::int64_t end) {
  PlainRowsF64(w, cols, x, batch, y, y_stride, begin, end);
}

void RowsFp8F64Portable(const std::uint8_t* w, std::int64_t cols, const float* x, std::int64_t batch, double* y, std::int64_t y_stride,
                        std::int64_t begin, std::int64_t end) {
  PlainRowsF64(w, cols, x, batch, y, y_stride, begin, end);
}

float DotPortable(const float* a, const float* b, std::int64_t n) { return PlainDot(a, b, n); }

void TransposedF32Portable(const float* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t batch, float* y,
                           std::int64_t begin, std::int64_t end) {
  PlainTransposedCols(w, rows, cols, x, batch, y, begin, end);
}

void TransposedBf16Portable(const std::uint16_t* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t batch, float* y,
                            std::int64_t begin, std::int64_t end) {
  PlainTransposedCols(w, rows, cols, x, batch, y, begin, end);
}

}  // namespace tandem::rt::kernels
