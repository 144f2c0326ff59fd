// The int8 units' quantizers and epilogue on the CPU (defined in ops.cpp, the
// unit linear's kernels; also used by the fused paths of ops_units_fused.cpp,
// so that both compute every code with the same function). Rows (or runs of
// columns) on `threads` threads; the bits depend on neither.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cpu::units {

// One row xr [cols] to codes q[j], returning its step m / 127 (abs_scratch:
// cols floats, overwritten).
float quantize_row_i8(const float* xr, std::size_t cols, float floor_value, std::int8_t* q, float* abs_scratch);
// Row n of x [rows, cols] to codes q[n*cols + j] and step[n] = m / 127
// (ops::quantize_rows: m = max(max_j |x[n,j]|, floor_value), inv = 127 / m).
void quantize_rows_i8(const float* x, std::size_t rows, std::size_t cols, float floor_value, std::int8_t* q,
                      float* step, int threads);
// Column j of x [rows, cols] over the rows to codes stored transposed,
// q[j*rows + n], and step[j] (ops::quantize_cols).
void quantize_cols_i8(const float* x, std::size_t rows, std::size_t cols, float floor_value, std::int8_t* q,
                      float* step, int threads);
// out[i*J + j] = ((f32(acc[i*J + j]) * sa[i]) * sb[j]) (+ bias[j]).
void unit_epilogue(const std::int32_t* acc, const float* sa, const float* sb, const float* bias, std::size_t I,
                   std::size_t J, float* out, int threads);
// db[m] = +0 + dy[0,m] + dy[1,m] + ... (ops::column_sums).
void bias_gradient(const float* dy, std::size_t N, std::size_t M, float* db, int threads);
// out[n*cols + j] = q[n*cols + j] * step[n].
void dequantize_rows(const std::int8_t* q, const float* step, std::size_t rows, std::size_t cols, float* out,
                     int threads);

}  // namespace lockstep::cpu::units
