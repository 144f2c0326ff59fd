// Launchers of the decode projections (decode_linear.cu), callable from g++
// code (the CUDA model's decode backend, model/cuda_model.cpp). Plain
// pointers and sizes; every launch goes on the default stream, in order, and
// none waits for the device (except f16_pack, once per weight per session).
//
// A decode pass multiplies a few rows (one token of each sequence) by every
// weight matrix, so it reads each matrix once: these GEMVs read as few bytes
// as the canonical expressions allow.
//   * BitLinear (ops::BitLinear, ops/quant.hpp): the weights' ternary codes
//     packed 2 bits a code once per session (ternary_pack), the activations
//     quantized per pass by the training kernels' row quantizer
//     (row_quantize_i8 of gemm_launch.hpp, the CPU's ops::quantize_rows),
//     then ternary_gemv: the exact int32 sum (any order: integers) and the
//     op's epilogue (f32(acc) * step_n) * scale. CPU reference: the
//     spec's ops::BitLinear::forward and DecodeBackend<cpu::OpKernels>::linear.
//   * Linear (ops::Linear, the LM head first of all): chain_gemv, one thread
//     per output cell, acc = +0, acc = fma(x_k, w_k, acc) k ascending, then
//     the canonical NaN and the bias: ops::matmul's dot_seq, the CPU GEMM's
//     chain. The weights are read as f16 where f16 holds every value exactly
//     (f16_pack says; a tied F16 embedding loaded as f32 does) — the same
//     products, half the bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

// Known bugs switched on by the kernel tests (tests/infer/decode_kernels_gpu_test.cpp)
// to show that the comparisons catch them; never set otherwise.
enum class DecodeLinearMutant {
  none,
  ternary_last_unit_dropped,  // ternary_gemv skips each row's last 64 codes
  chain_mul_add,              // chain_gemv rounds the product before the add (no fma)
  ternary_v2_half_warp_join,  // ternary_gemv v2's join sums each half-warp only (lanes 16-31 or 0-15 lost)
  ternary_residual_contracted,  // a residual epilogue's last product and add as one fma (ternary_epilogue.cuh)
};
void set_decode_linear_mutant(DecodeLinearMutant m);

// Codes per packed unit (one 16-byte load): a row of K codes takes
// ternary_units(K) units, K rounded up to a multiple of 64.
inline constexpr std::size_t kTernaryUnitCodes = 64;
inline std::size_t ternary_units(std::size_t K) { return (K + kTernaryUnitCodes - 1) / kTernaryUnitCodes; }

// codes [M, K] floats in {-1, 0, 1} (ternary_quantize's) to words [M, 4 · ternary_units(K)]:
// word g of row m holds codes k = 16g + 4j + i (j, i in 0..3) as the field code + 1
// at bits 8i + 2j; the codes past K are 0 (field 1).
void ternary_pack(const float* codes, std::size_t M, std::size_t K, std::uint32_t* words);

// y[n, m] = (f32(acc[n, m]) * step[n]) * scale[0], acc the exact sum over k of
// xq[n, k] · code[m, k], for n < N rows of xq [N, K] int8 and the packed words.
void ternary_gemv(const std::uint32_t* words, std::size_t M, std::size_t K, const std::int8_t* xq, std::size_t N,
                  const float* step, const float* scale, float* y);

// Several BitLinears that read the same activation codes xq [N, K] (q, k and v;
// gate and up) in one launch: part p's y [N, M_p] exactly as ternary_gemv of
// that part alone (the same expression per cell). 1 to kTernaryMaxParts parts.
//
// A part may carry the residual add after it (the decode pass's o_proj and
// down_proj, DecodeBackend<cuda::OpKernels>::residual): with sum set, each
// cell v of y is still written, and sum[n, m] = add[n, m] + v (add_first) or
// v + add[n, m] — ops::ResidualAdd's a + b, the same __fadd_rn residual_fwd
// runs (ternary_epilogue.cuh). sum may be add (in place) or y; add must not
// overlap y.
struct TernaryPart {
  const std::uint32_t* words = nullptr;  // ternary_pack's, [M, 4 · ternary_units(K)]
  std::size_t M = 0;
  const float* scale = nullptr;  // the weight scale, scale[0]
  float* y = nullptr;            // [N, M]
  const float* add = nullptr;    // the residual's other operand [N, M], or null: no residual
  float* sum = nullptr;          // the residual's output [N, M] (set exactly when add is)
  bool add_first = true;         // add is the residual's a (y = a + b with b this part's output)
};
inline constexpr std::size_t kTernaryMaxParts = 3;
void ternary_gemv_parts(const TernaryPart* parts, std::size_t count, std::size_t K, const std::int8_t* xq,
                        std::size_t N, const float* step);

// Which kernel ternary_gemv and ternary_gemv_parts launch (the same cells, bit
// for bit): 1, decode_linear.cu's warp-a-row kernel (the default); 2, v2
// (ternary_gemv_v2.cu: R rows a warp, Σx folded into the lanes' partials, one
// barrier a chunk); 3, v2 as a programmatic dependent launch (its weight loads
// issued while the kernel before it drains). From the environment's
// LOCKSTEP_TERNARY_GEMV = v1 | v2 | v2pdl at first use (another value: an
// std::invalid_argument naming it); set_ternary_gemv_version(1, 2 or 3)
// overrides it (tests), 0 goes back to the environment.
int ternary_gemv_version();
void set_ternary_gemv_version(int version);

// The session-10 decode epilogues (docs/perf/DECODE_CUDA.md §11): the CUDA
// decode folds the residual add after o_proj and down_proj into their
// ternary_gemv launch (TernaryPart::sum). On unless the environment says
// LOCKSTEP_DECODE_EPILOGUES=0 (read once); set_decode_epilogues(1 or 0)
// overrides it (tests), -1 goes back to the environment. They need the
// session-8 changes (the pending BitLinears: LOCKSTEP_DECODE_FUSION) on. The
// bits are the same either way.
bool decode_epilogues();
void set_decode_epilogues(int on);

// The session-11 norm in the GEMV's prologue (docs/perf/DECODE_CUDA.md §15):
// at 1-2 rows (norm_gemv_fits), the decode's RMSNorm + codes
// (rmsnorm_quantize_i8) is not launched; the BitLinear GEMV that reads its
// codes runs it in each CTA's prologue (ternary_gemv_parts_norm). Off unless
// the environment says LOCKSTEP_DECODE_NORM_GEMV=1 (read once);
// set_decode_norm_gemv(1 or 0) overrides it (tests), -1 goes back to the
// environment. It needs the session-8 changes (LOCKSTEP_DECODE_FUSION) on.
// The bits are the same either way.
bool decode_norm_gemv();
void set_decode_norm_gemv(int on);

// The norm of the prologue: rmsnorm_quantize_i8's operands (norm.cu,
// pointwise_launch.hpp) for x [N, K] (the norm's dim is the GEMV's K): y =
// RmsNorm(x; w, eps) [N, K], rstd [N], codes [N, K] and step [N] of y as
// ops::quantize_rows with floor_x. CTA 0 writes y, rstd, codes, step; the
// parts' outputs must not overlap x, w or these (the caller checks).
struct NormPrologue {
  const float* x = nullptr;
  const float* w = nullptr;
  float eps = 0.0f, floor_x = 0.0f;
  float* y = nullptr;
  float* rstd = nullptr;
  std::int8_t* codes = nullptr;
  float* step = nullptr;
};
inline constexpr std::size_t kNormGemvMaxRows = 2;  // each CTA repeats the norm of every row
inline constexpr std::size_t kNormGemvMaxDim = 8192;  // row_cta's staged row (kMaxDim)
inline bool norm_gemv_fits(std::size_t N, std::size_t K) {
  return N > 0 && N <= kNormGemvMaxRows && K > 0 && K <= kNormGemvMaxDim;
}
// ternary_gemv_parts on the codes of rmsnorm_quantize_i8(norm) made in the
// prologue: the parts' cells (and their residual sums) and the norm's y, rstd,
// codes, step, each as the two launches compute them, in one launch (v2's
// kernel; a programmatic dependent launch under LOCKSTEP_TERNARY_GEMV=v2pdl).
// N, K: norm_gemv_fits (else std::invalid_argument).
void ternary_gemv_parts_norm(const TernaryPart* parts, std::size_t count, std::size_t K, const NormPrologue& norm,
                             std::size_t N);

// v2 itself, for the launcher above and the host emulator's test
// (tests/cuda/ternary_gemv_emu_test.cpp). Arguments as ternary_gemv_parts's,
// already checked by it (count 1..kTernaryMaxParts, K <= 96 Ki, N and each M
// within int).
struct TernaryV2Options {
  bool pdl = false;                     // a programmatic dependent launch (sm_90)
  bool drop_last_unit = false;          // DecodeLinearMutant::ternary_last_unit_dropped
  bool half_warp_join = false;          // DecodeLinearMutant::ternary_v2_half_warp_join
  bool residual_contracted = false;     // DecodeLinearMutant::ternary_residual_contracted
  bool plant_no_reuse_barrier = false;  // host emulator only: no barrier before the next chunk restages x
  const NormPrologue* norm = nullptr;   // the norm prologue (xq and step unused: the prologue makes them)
  bool norm_stale_row = false;          // Mutant::norm_quantize_stale_row in the prologue (the codes of x)
  bool plant_norm_blocked_lanes = false;  // host emulator only: the prologue's rs with lanes folding contiguous runs
};
void ternary_gemv_parts_v2(const TernaryPart* parts, std::size_t count, std::size_t K, const std::int8_t* xq,
                           std::size_t N, const float* step, const TernaryV2Options& options);

// half[i] = f16(w[i]) for i < n; *inexact (a device int, set to 0 first by the
// caller's own copy) becomes nonzero where f16 does not hold w[i] exactly.
// Waits for the device and returns whether all of w is exact in f16.
bool f16_pack(const float* w, std::size_t n, std::uint16_t* half, int* inexact);

// y[n, m] = canonical_nan(chain of fma(x[n, k], w[m, k], acc) over k ascending
// from +0) (+ b[m] when b is not null), x [N, K] row-major, w [M, K] as f32
// (w32) or as its exact f16 copy (w16); exactly one of w32 and w16 is set.
void chain_gemv(const float* w32, const std::uint16_t* w16, const float* x, const float* b, std::size_t N,
                std::size_t M, std::size_t K, float* y);

}  // namespace lockstep::cuda::launch
