// The two-pass column quantizer of the int8 units (col_quant.cu), beside the
// three-pass one of quant.cu (launch::col_quantize_i8, gemm_launch.hpp): the
// same bits (ops::quantize_cols; cpu units::quantize_cols_i8), the matrix
// read twice and no launch that walks the per-chunk maxima alone. The engine
// reaches it through cuda::col_quantize (col_quant.hpp), which takes it only
// where its start-up gate cases passed (gate_col_quant.cpp).
//
//   pass 1, without column sums: each block folds a chunk of kColChunkRows
//     rows of 32 columns (col_fold.hpp: the specification's row-order absmax
//     fold, split into contiguous segments and joined in order), writing the
//     chunk's summary; with column sums (the bias gradient, ops::column_sums:
//     out[j] = +0 + x[0,j] + x[1,j] + ..., one sequential chain over all rows),
//     each block owns 8 whole columns and one thread per column walks every
//     row in order, running the chain and the fold together: dy is read once
//     for both, and the sum order is exactly the specification's;
//   pass 2: each block joins the chunk summaries of its 32 columns in row order
//     (m = max2(fold, floor), inv = 127 / m, step = m / 127), then quantizes
//     512 of their rows, q = clamp(floor(x * inv + 0.5), -127, 127), and
//     stores the codes transposed, codes[j * rows + n].
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

// The bugs a runtime mutant plants (mutant.hpp): none; the join of pass 2
// skips the last chunk of rows (a column whose absmax lies there is scaled
// too coarsely); the column sums add the rows in pairs, (x0 + x1) + ..., a
// reassociation only bits can see.
inline constexpr int kColQuantClean = 0, kColQuantLastChunkDropped = 1, kColQuantSumsInPairs = 2;

// Scratch floats col_quantize_i8_2p needs for x [rows, cols] (with or without sums).
std::size_t col_quantize_2p_scratch(std::size_t rows, std::size_t cols);
// codes[j * rows + n], step[j] as launch::col_quantize_i8; with col_sums (may
// be null) also col_sums[j] = the column's sequential sum over the rows.
// Asynchronous; `scratch` holds col_quantize_2p_scratch(rows, cols) floats.
void col_quantize_i8_2p(const float* x, std::size_t rows, std::size_t cols, float floor_x, std::int8_t* codes,
                        float* step, float* scratch, float* col_sums, int planted = kColQuantClean);

}  // namespace lockstep::cuda::launch
