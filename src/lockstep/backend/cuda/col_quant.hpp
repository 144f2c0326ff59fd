// The int8 units' column quantizer as the engine calls it (ops_units.cpp,
// ops_units_fused.cpp): per-column codes of x [rows, cols] stored transposed
// (ops::quantize_cols), and optionally the bias gradient's column sums of the
// same matrix (ops::column_sums) from the same read.
//
// Two kernels compute the same bits: the three-pass launch::col_quantize_i8
// (quant.cu, with launch::column_sums for the sums) and the two-pass
// launch::col_quantize_i8_2p (col_quant.cu, the sums folded into its first
// pass). The two-pass kernel is used only when every one of its start-up gate
// cases passed (gate_col_quant.cpp: ragged shapes, NaN, ±inf, -0, subnormal
// and floored columns, on a clean and a poisoned pool, against cpu
// units::quantize_cols_i8 and units::bias_gradient); otherwise the three-pass
// one is, and col_quantize_report() says why. A process whose start-up ran
// no gate runs the cases on first use (as the int8 GEMM's selection does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lockstep::cuda {

// Scratch floats col_quantize needs for x [rows, cols], whichever kernel runs.
std::size_t col_quantize_scratch(std::size_t rows, std::size_t cols);
// codes[j * rows + n], step[j] (launch::col_quantize_i8's contract); with
// col_sums not null, col_sums[j] = +0 + x[0, j] + x[1, j] + ... as well.
void col_quantize(const float* x, std::size_t rows, std::size_t cols, float floor_x, std::int8_t* codes,
                  float* step, float* scratch, float* col_sums = nullptr);

// Whether the two-pass kernel passed its every gate case (running them if
// this process has not), and the one-line verdict for logs and tests.
bool col_quantize_two_pass_admitted();
std::string col_quantize_report();

// The gate cases' bookkeeping: one outcome ("" = pass) of the two-pass kernel.
void col_quantize_gate_record(const std::string& difference, const std::string& where);
// Tests only: forget the outcomes; force a kernel (0: three-pass, 1: two-pass
// even if refused, -1: the gates' choice again).
void col_quantize_reset();
void col_quantize_force(int kernel);

// The bug the active mutant (mutant.hpp) plants in the two-pass kernel
// (launch::kColQuant*; kColQuantClean for none or another family's).
int col_quantize_planted();

}  // namespace lockstep::cuda
