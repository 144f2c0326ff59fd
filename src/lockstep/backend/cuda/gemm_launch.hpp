// Launchers of the canonical float GEMM (gemm.cu) and the BitLinear
// quantizers (quant.cu), callable from g++ code (no CUDA headers here). Every
// pointer is a device pointer; every launch goes on the default stream, in
// call order, and none synchronizes with the host.
//
// The product (docs/NUMERICS.md, "Matrix products: the sequential fma chain
// over k"), bit for bit cpu::gemm (backend/cpu/gemm.hpp):
//   C[i*ldc + j] = chain over k = 0..K-1 of A(i,k)·B(k,j)
//   chain: acc = +0; acc = fma(A(i,k), B(k,j), acc) for k ascending; a NaN
//   result is written as the canonical NaN 0x7FC00000.
// then the epilogue (Epilogue below), each step one correctly rounded
// operation, in the order the CPU kernels apply it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

// What happens to a cell after its chain (all optional, device pointers):
//   v = canonical_nan(acc)
//   bias:       v = v + bias[j]                      (linear_fwd)
//   row_scale:  v = (v * row_scale[i]) * scale[0]    (bitlinear_fwd; both set)
struct GemmEpilogue {
  const float* bias = nullptr;
  const float* row_scale = nullptr;
  const float* scale = nullptr;
};

// The general product, with cpu::gemm's strides: A(i,k) = A[i*sai + k*sak],
// B(k,j) = B[k*sbk + j*sbj]. One stride of each operand must be 1 (sak == 1
// or sai == 1; sbk == 1 or sbj == 1). I, J, K may be any size (K == 0 gives +0
// cells); nothing outside [0, I) × [0, J) of C is written.
void gemm(std::size_t I, std::size_t J, std::size_t K, const float* A, std::size_t sai, std::size_t sak,
          const float* B, std::size_t sbk, std::size_t sbj, float* C, std::size_t ldc, const GemmEpilogue& epi = {});

// The three products of a linear layer (nn.Linear layout, W is [M, K]),
// as cpu::gemm_xwt / gemm_dyw / gemm_dytx:
// Y = X·Wᵀ [N, M], dX = dY·W [N, K], dW = dYᵀ·X [M, K] (chain over rows n).
void gemm_xwt(std::size_t N, std::size_t M, std::size_t K, const float* X, const float* W, float* Y,
              const GemmEpilogue& epi = {});
void gemm_dyw(std::size_t N, std::size_t M, std::size_t K, const float* dY, const float* W, float* dX);
void gemm_dytx(std::size_t N, std::size_t M, std::size_t K, const float* dY, const float* X, float* dW);

// Benchmarks and tests only: forces one block tile (0, the default, lets the
// launcher choose by the output's shape). 1: 64×64 and 2: 128×128 (gemm.cu);
// the shape-fitted tiles of gemm_tiled.cu: 3: 144×128, 4: 112×128, 5: 48×128,
// 6: 128×144 (until v2: 128×128 with k tiles of 8), 7: 128×128 with 8×4-thread
// warps and k tiles of 16. Every tile gives the same bits (the per-cell chain
// does not depend on the tiling).
constexpr int kGemmTiles = 7;
void gemm_tile_override(int tile);
// Benchmarks and tests only: how many launches ran on block tile `tile`
// (1..kGemmTiles, the override numbers) since the last reset — what the rule
// (or the override) actually ran, the gates' mutants included.
long gemm_tile_launches(int tile);
void gemm_tile_launches_reset();

// out[j] = +0 + a[0, j] + a[1, j] + ... (rows ascending) of a row-major
// [N, D] matrix: the bias gradient (cpu ops.cpp column_sums).
void column_sums(const float* a, std::size_t N, std::size_t D, float* out);

// --- Internal: gemm.cu's launcher into gemm_tiled.cu ---------------------------
namespace detail {
struct TiledArgs {
  int I, J, K;
  const float* A;
  std::size_t lda;  // A(i,k) = A[i*lda + k] when akc, else A[k*lda + i]
  const float* B;
  std::size_t ldb;  // B(k,j) = B[j*ldb + k] when bkc, else B[k*ldb + j]
  float* C;
  std::size_t ldc;
  bool akc, bkc;    // operand contiguous along k
  bool va, vb;      // 16-byte loads allowed (both, or neither is used)
  const float* bias;
  const float* row_scale;
  const float* scale;
};
// The block tile (rows, columns) of configuration cfg (3..7); false if none.
bool tiled_shape(int cfg, int& bm, int& bn);
// Launches configuration cfg; false (nothing launched) if it cannot take the
// shape (grid rows beyond 65535).
bool gemm_tiled(int cfg, const TiledArgs& args);
// The gemm mutants of mutant.hpp as the kernels name them.
enum Mut : int { kClean = 0, kAssign, kNoGuard, kSkipLast, kNoBarrier };
// As gemm_tiled, with the bug `mut` (not kClean) planted in the kernel
// (gemm_tiled_mutant.cu; only while a gemm mutant is active).
bool gemm_tiled_mutant(int cfg, const TiledArgs& args, int mut);
// The launch trace's name of a GEMM kernel path (trace.hpp; interned, valid
// for the process): the tile, each operand's contiguous index (A(i,k) along k
// or i, B(k,j) along k or j) and load width: "gemm tile 6 [A i-major 16B, B
// j-major 16B]".
const char* gemm_path(int tile, bool akc, bool bkc, bool va, bool vb, bool mutant);
}  // namespace detail

// --- BitLinear quantizers (quant.cu; ops/quant.hpp, cpu ops.cpp) ------------

// Scratch floats the ternary quantizer needs for n weights.
std::size_t ternary_scratch(std::size_t n);
// Per-tensor absmean ternary weights: m = max2(sum(|w|) / n_f, floor_w) with
// the canonical sum (num/reduce.hpp); inv = 1 / m;
// q = min2(max2(floor(w*inv + 0.5), -1), 1); codes[i] = q; dequant[i] = q*m.
// params[0] = m, params[1] = inv afterwards. `scratch` holds
// ternary_scratch(n) floats.
void ternary_quantize(const float* w, std::size_t n, float n_f, float floor_w, float* codes, float* dequant,
                      float* params, float* scratch);
// Per-row absmax int8 activations of x [N, K]: m = max2(max_k |x|, floor_x);
// inv = 127 / m; st = m / 127; q = min2(max2(floor(x*inv + 0.5), -127), 127);
// codes = q; dequant = q*st; step[n] = st.
void row_quantize(const float* x, std::size_t N, std::size_t K, float floor_x, float* codes, float* dequant,
                  float* step);

// --- the int8 units' quantizers and epilogue (quant.cu; ops/units.hpp, cpu ops.cpp) ---

// Per-row int8 codes of x [N, K] as row_quantize computes them (max |x| by
// num::reduce::max's rules), into std::int8_t codes[N*K] and step[N]; with
// dequant (may be null), q * step too (cpu quantize_rows_i8, dequantize_rows).
void row_quantize_i8(const float* x, std::size_t N, std::size_t K, float floor_x, std::int8_t* codes, float* step,
                     float* dequant);
// Scratch floats col_quantize_i8 needs for x [rows, cols].
std::size_t col_quantize_scratch(std::size_t rows, std::size_t cols);
// Per-column int8 codes of x [rows, cols] (cpu quantize_cols_i8): column j's
// max |x| is the fold acc = max2(acc, |x[n, j]|) from +0 in row order;
// m = max2(acc, floor_x), inv = 127 / m, step[j] = m / 127, and the codes
// stored transposed, codes[j*rows + n] (each contraction vector contiguous).
void col_quantize_i8(const float* x, std::size_t rows, std::size_t cols, float floor_x, std::int8_t* codes,
                     float* step, float* scratch);
// out[i*J + j] = ((f32(acc[i*J + j]) * sa[i]) * sb[j]) (+ bias[j] when bias is
// not null): the units' epilogue (ops::unit_epilogue), one rounding a step.
void unit_epilogue(const std::int32_t* acc, const float* sa, const float* sb, const float* bias, std::size_t I,
                   std::size_t J, float* out);

}  // namespace lockstep::cuda::launch
