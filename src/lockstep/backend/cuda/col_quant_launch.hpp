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
//     stores the codes transposed, codes[j * rows + n] (two kernels of the
//     same bits, col_quant_codes_kernel below: col_quant.cu's, and
//     col_quant_codes.cu's with the next sub-tile's loads overlapped).
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

// The bugs a runtime mutant plants (mutant.hpp): none; the join of pass 2
// skips the last chunk of rows (a column whose absmax lies there is scaled
// too coarsely); the column sums add the rows in pairs, (x0 + x1) + ..., a
// reassociation only bits can see (both sums kernels); the tiled sums kernel
// adds a full tile's rows 64..127 before its rows 0..63 (a reassociation);
// the tiled kernel leaves out a partial last tile of rows (sums and maxima;
// planted by the host emulator test only, no runtime mutant); the overlapped
// pass 2 (v2) quantizes a sub-tile from the previous sub-tile's registers, or
// keeps one code tile for two so a sub-tile's codes overwrite the tile its
// predecessor's store still reads (both: the host emulator test only). The
// last-chunk bug is planted in both pass 2 kernels.
inline constexpr int kColQuantClean = 0, kColQuantLastChunkDropped = 1, kColQuantSumsInPairs = 2,
                     kColQuantSumsTileRowsSwapped = 3, kColQuantSumsLastTileDropped = 4,
                     kColQuantCodesStaleSubTile = 5, kColQuantCodesOneTile = 6;

// Which kernel runs pass 1 where the column sums are asked (the bias
// gradient), by LOCKSTEP_COL_SUMS (read once; anything else is refused with
// an error naming the variable): v2, the tiled one with 8 columns a block
// (col_quant_sums.cu, the default); v3, the tiled one with 32 columns a
// block (128-byte row pieces, a quarter of the blocks); v1, the strip kernel
// of session 7 (col_quant.cu). All three give the same bits; v1 and v3 are
// kept selectable until the device has timed them. Tests may force one (1, 2
// or 3; 0: the environment's choice again).
int col_quant_sums_kernel();
void col_quant_sums_kernel_force(int kernel);

// Which kernel runs pass 2 (the steps and codes), by LOCKSTEP_COL_CODES (read
// once; anything else is refused with an error naming the variable): v1,
// col_quant.cu's codes_2p (the default until the device has timed both); v2,
// col_quant_codes.cu's, the next sub-tile's loads in flight while one is
// quantized and stored. Both give the same bits; the gate cases
// (gate_col_quant.cpp) run through col_quantize_i8_2p, so they gate the one
// selected. Tests may force one (1 or 2; 0: the environment's choice again).
int col_quant_codes_kernel();
void col_quant_codes_kernel_force(int kernel);

// Pass 2 alone, the v2 kernel: the steps and codes of x [rows, cols] from
// pass 1's `chunks` summaries a column (partial[c * cols + j], has_nan[...]).
void col_steps_codes_overlapped(const float* x, std::size_t rows, std::size_t cols, std::size_t chunks,
                                const float* partial, const std::uint32_t* has_nan, float floor_x, float* step,
                                std::int8_t* codes, int planted = kColQuantClean);

// The tiled pass 1 with sums: one summary per column (chunk count 1,
// partial[j], has_nan[j]) and sums[j], the same bits as the strip kernel;
// block_cols 8 (v2) or 32 (v3).
void col_maxima_sums_tiled(const float* x, std::size_t rows, std::size_t cols, float* partial,
                           std::uint32_t* has_nan, float* sums, int planted = kColQuantClean, int block_cols = 8);

// Scratch floats col_quantize_i8_2p needs for x [rows, cols] (with or without sums).
std::size_t col_quantize_2p_scratch(std::size_t rows, std::size_t cols);
// codes[j * rows + n], step[j] as launch::col_quantize_i8; with col_sums (may
// be null) also col_sums[j] = the column's sequential sum over the rows.
// Asynchronous; `scratch` holds col_quantize_2p_scratch(rows, cols) floats.
void col_quantize_i8_2p(const float* x, std::size_t rows, std::size_t cols, float floor_x, std::int8_t* codes,
                        float* step, float* scratch, float* col_sums, int planted = kColQuantClean);

}  // namespace lockstep::cuda::launch
