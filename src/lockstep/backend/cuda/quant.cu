// BitLinear's quantizers on the device (gemm_launch.hpp), the expressions of
// ops/quant.hpp as cpu::OpKernels::bitlinear_fwd computes them:
//   * the weight scale's sum of |w| is num::reduce::sum's canonical order: a
//     warp per 4096-element chunk (lane j folds j, j+32, ... in order, then the
//     shuffle-down tree), the chunk partials reduced again by the same rule
//     until one value is left, the canonical NaN at the end;
//   * the activations' per-row max |x| is order-free (a total order), taken
//     as num::reduce::max does (order keys, NaN tracked apart);
//   * every other step is one correctly rounded operation, written with the
//     explicit intrinsics so no contraction can creep in.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "lockstep/backend/cuda/batched_copy.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/row_cta.cuh"
#include "lockstep/backend/cuda/ternary_code.cuh"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"

namespace lockstep::cuda::launch {
namespace {

namespace red = num::reduce;
constexpr std::size_t kChunk = red::kChunk;  // 4096

__device__ __forceinline__ float max2(float a, float b) { return a > b ? a : b; }  // ops::max2
__device__ __forceinline__ float min2(float a, float b) { return a < b ? a : b; }  // ops::min2

// One warp per chunk of x (ABS: of |x|): partial[c] = the chunk's lane tree.
template <bool ABS>
__global__ void __launch_bounds__(256) chunk_sums(const float* __restrict__ x, std::size_t n,
                                                  float* __restrict__ partial) {
  const std::size_t chunk = static_cast<std::size_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  const unsigned lane = threadIdx.x & 31;
  const std::size_t chunks = (n + kChunk - 1) / kChunk;
  if (chunk >= chunks) return;  // whole warps leave together
  const std::size_t base = chunk * kChunk;
  const std::size_t len = n - base < kChunk ? n - base : kChunk;
  const float* c = x + base;
  float acc = 0.0f;
  for (std::size_t t = lane; t < len; t += 32) acc = __fadd_rn(acc, ABS ? fabsf(c[t]) : c[t]);
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) acc = __fadd_rn(acc, __shfl_down_sync(0xFFFFFFFFu, acc, off));
  if (lane == 0) partial[chunk] = acc;
}

// params[0] = m = max2(canonical_nan(sum) / n_f, floor_w), params[1] = 1 / m.
__global__ void ternary_scale(const float* sum, float n_f, float floor_w, float* params) {
  const float m = max2(__fdiv_rn(red::canonical_nan(*sum), n_f), floor_w);
  params[0] = m;
  params[1] = __fdiv_rn(1.0f, m);
}

__global__ void ternary_codes(const float* __restrict__ w, std::size_t n, const float* __restrict__ params,
                              float* __restrict__ codes, float* __restrict__ dequant) {
  const float m = params[0], inv = params[1];
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float q = cuda::detail::ternary_code(w[i], inv);  // ternary_expand.cu re-derives it from the same params
    codes[i] = q;
    dequant[i] = __fmul_rn(q, m);
  }
}

// One warp per row. Code: float (BitLinear) or std::int8_t (the int8 units);
// DEQUANT: also write q * step.
template <class Code, bool DEQUANT>
__global__ void __launch_bounds__(256) row_codes(const float* __restrict__ x, std::size_t N, std::size_t K,
                                                 float floor_x, Code* __restrict__ codes,
                                                 float* __restrict__ dequant, float* __restrict__ step) {
  const std::size_t n = static_cast<std::size_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  const unsigned lane = threadIdx.x & 31;
  if (n >= N) return;
  const float* xr = x + n * K;
  // max |x| under reduce::max's rules: the largest order key, NaN apart.
  std::int32_t key = red::detail::order_key(__int_as_float(static_cast<int>(0xFF800000u)));  // -inf
  std::uint32_t mag = 0;
  for (std::size_t k = lane; k < K; k += 32) {
    const float v = fabsf(xr[k]);
    const std::int32_t kv = red::detail::order_key(v);
    key = kv > key ? kv : key;
    const std::uint32_t mv = num::bits_of(v) & 0x7FFFFFFFu;
    mag = mv > mag ? mv : mag;
  }
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) {
    const std::int32_t ko = __shfl_xor_sync(0xFFFFFFFFu, key, off);
    const std::uint32_t mo = __shfl_xor_sync(0xFFFFFFFFu, mag, off);
    key = ko > key ? ko : key;
    mag = mo > mag ? mo : mag;
  }
  const float mx = mag > 0x7F800000u ? num::float_of(red::kCanonicalNaN) : red::detail::from_order_key(key);
  const float m = max2(mx, floor_x);
  const float inv = __fdiv_rn(127.0f, m);
  const float st = __fdiv_rn(m, 127.0f);
  Code* cr = codes + n * K;
  float* dr = DEQUANT ? dequant + n * K : nullptr;
  for (std::size_t k = lane; k < K; k += 32) {
    const float q = min2(max2(floorf(__fadd_rn(__fmul_rn(xr[k], inv), 0.5f)), -127.0f), 127.0f);
    cr[k] = static_cast<Code>(q);
    if constexpr (DEQUANT) dr[k] = __fmul_rn(q, st);
  }
  if (lane == 0) step[n] = st;
}

// row_codes for few rows (row_quantize_i8 dispatches N <= kFewRows here): a
// CTA per row. A warp per row waits on each of its loads in turn (K / 32 of
// them a lane, twice: the max, then the codes). Here every thread loads its
// part of the row (16-byte loads where x is 16-byte aligned and K % 4 == 0,
// all in flight) into shared memory while it folds their |x| into its max
// (order-free: reduce::max's total order, NaN tracked apart); the warps'
// maxima meet in shared memory, and every thread writes the codes of its
// elements from shared memory. Same expressions as row_codes, so the same
// bits. FirstWarp: the mutant (Mutant::row_quantize_first_warp_max), the
// block's max taken from warp 0's elements only.
// The steps are row_cta.cuh's, shared with norm.cu's fused norm + quantize.
namespace rc = cuda::detail::row_cta;
constexpr std::size_t kFewRows = rc::kFewRows;
constexpr unsigned kRowCtaThreads = rc::kThreads;
constexpr std::size_t kRowCtaMaxK = rc::kMaxDim;  // the staged row: 32 KiB of dynamic shared memory

template <class Code, bool DEQUANT, bool Vec, bool FirstWarp>
__global__ void __launch_bounds__(kRowCtaThreads)
    row_codes_cta(const float* __restrict__ x, std::size_t K, float floor_x, Code* __restrict__ codes,
                  float* __restrict__ dequant, float* __restrict__ step) {
  extern __shared__ float4 row_smem[];
  __shared__ std::int32_t s_key[rc::kWarps];
  __shared__ std::uint32_t s_mag[rc::kWarps];
  const std::size_t n = blockIdx.x;
  rc::AbsMax am;
  rc::stage_row<Vec>(x + n * K, K, row_smem, [&am](float a) { am.fold(a); });
  const rc::RowScale sc(rc::cta_max<FirstWarp>(am, s_key, s_mag), floor_x);
  // Each thread reads back the elements it staged itself: no barrier needed for the row.
  rc::store_codes<Code, DEQUANT, Vec>(row_smem, K, sc, codes + n * K, DEQUANT ? dequant + n * K : nullptr);
  if (threadIdx.x == 0) step[n] = sc.st;
}

template <bool DEQUANT>
void launch_row_codes_cta(const float* x, std::size_t N, std::size_t K, float floor_x, std::int8_t* codes,
                          float* dequant, float* step) {
  const auto aligned = [](const void* p, std::uintptr_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; };
  const bool vec = K % 4 == 0 && aligned(x, 16) && aligned(codes, 4) && (!DEQUANT || aligned(dequant, 16));
  const bool first_warp = mutant() == Mutant::row_quantize_first_warp_max;
  const std::size_t smem = (K + 3) / 4 * sizeof(float4);
  const unsigned grid = static_cast<unsigned>(N);
  if (first_warp) {
    trace::launched("row_quantize_i8 (a CTA a row, mutant)");
    row_codes_cta<std::int8_t, DEQUANT, false, true><<<grid, kRowCtaThreads, smem>>>(x, K, floor_x, codes, dequant, step);
  } else if (vec) {
    trace::launched(DEQUANT ? "row_quantize_i8 (codes, dequantized, a CTA a row, 16-byte)"
                            : "row_quantize_i8 (codes, a CTA a row, 16-byte)");
    row_codes_cta<std::int8_t, DEQUANT, true, false><<<grid, kRowCtaThreads, smem>>>(x, K, floor_x, codes, dequant, step);
  } else {
    trace::launched(DEQUANT ? "row_quantize_i8 (codes, dequantized, a CTA a row)" : "row_quantize_i8 (codes, a CTA a row)");
    row_codes_cta<std::int8_t, DEQUANT, false, false><<<grid, kRowCtaThreads, smem>>>(x, K, floor_x, codes, dequant, step);
  }
  check_launch("row_quantize_i8 (a CTA a row)");
}

std::size_t chunks_of(std::size_t n) { return n <= kChunk ? 1 : (n + kChunk - 1) / kChunk; }

// --- the int8 units' column quantizer (cpu ops.cpp quantize_cols_i8) -------------
// The CPU folds each column's |x| in row order, acc = max2(acc, |x|) from +0.
// That fold, split into chunks of rows and joined in order, gives the same
// bits: a chunk holding a NaN ends on a value its start cannot change (after
// the NaN the fold restarts from the next |x|: max2(NaN, v) = v), and without
// one the fold from any start a is max2-joined with the chunk's own maximum
// (every |x| >= +0, so ties have equal bits) unless a is NaN, which the chunk's
// first value replaces.
constexpr std::size_t kColChunk = 64;

__global__ void __launch_bounds__(256) col_partials(const float* __restrict__ x, std::size_t rows, std::size_t cols,
                                                    float* __restrict__ partial, std::uint32_t* __restrict__ has_nan) {
  const std::size_t j = static_cast<std::size_t>(blockIdx.x) * 256 + threadIdx.x;
  if (j >= cols) return;
  const std::size_t c = blockIdx.y, n0 = c * kColChunk;
  const std::size_t n1 = n0 + kColChunk < rows ? n0 + kColChunk : rows;
  float acc = 0.0f;
  std::uint32_t nan = 0;
  for (std::size_t n = n0; n < n1; ++n) {
    const float v = fabsf(x[n * cols + j]);
    acc = max2(acc, v);
    nan |= v != v ? 1u : 0u;
  }
  partial[c * cols + j] = acc;
  has_nan[c * cols + j] = nan;
}

// m = max2(fold, floor_x), inv[j] = 127 / m, step[j] = m / 127.
__global__ void __launch_bounds__(256) col_steps(const float* __restrict__ partial,
                                                 const std::uint32_t* __restrict__ has_nan, std::size_t chunks,
                                                 std::size_t cols, float floor_x, float* __restrict__ step,
                                                 float* inv) {
  const std::size_t j = static_cast<std::size_t>(blockIdx.x) * 256 + threadIdx.x;
  if (j >= cols) return;
  float acc = 0.0f;
  for (std::size_t c = 0; c < chunks; ++c) {
    const float f = partial[c * cols + j];
    acc = has_nan[c * cols + j] != 0 || acc != acc ? f : max2(acc, f);
  }
  const float m = max2(acc, floor_x);
  inv[j] = __fdiv_rn(127.0f, m);  // over partial[j] (chunk 0), read above by this thread only
  step[j] = __fdiv_rn(m, 127.0f);
}

// codes[j * rows + n] = the code of x[n, j]: 32×32 tiles transposed through shared memory.
__global__ void __launch_bounds__(256) col_codes(const float* __restrict__ x, std::size_t rows, std::size_t cols,
                                                 const float* __restrict__ inv, std::int8_t* __restrict__ codes) {
  __shared__ std::int8_t tile[32][33];
  const unsigned tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const std::size_t j0 = static_cast<std::size_t>(blockIdx.x) * 32, n0 = static_cast<std::size_t>(blockIdx.y) * 32;
#pragma unroll
  for (unsigned i = 0; i < 4; ++i) {
    const std::size_t n = n0 + ty + 8 * i, j = j0 + tx;
    if (n < rows && j < cols) {
      const float q = min2(max2(floorf(__fadd_rn(__fmul_rn(x[n * cols + j], inv[j]), 0.5f)), -127.0f), 127.0f);
      tile[tx][ty + 8 * i] = static_cast<std::int8_t>(q);
    }
  }
  __syncthreads();
#pragma unroll
  for (unsigned i = 0; i < 4; ++i) {
    const std::size_t j = j0 + ty + 8 * i, n = n0 + tx;
    if (j < cols && n < rows) codes[j * rows + n] = tile[ty + 8 * i][tx];
  }
}

// out[i*J + j] = ((f32(acc) * sa[i]) * sb[j]) (+ bias[j]), each one rounding.
__global__ void __launch_bounds__(256) unit_epilogue_kernel(const std::int32_t* __restrict__ acc,
                                                            const float* __restrict__ sa,
                                                            const float* __restrict__ sb,
                                                            const float* __restrict__ bias, std::size_t I,
                                                            std::size_t J, float* __restrict__ out) {
  const std::size_t n = I * J;
  for (std::size_t t = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t i = t / J, j = t - i * J;
    float v = __fmul_rn(__fmul_rn(__int2float_rn(acc[t]), sa[i]), sb[j]);
    if (bias != nullptr) v = __fadd_rn(v, bias[j]);
    out[t] = v;
  }
}

}  // namespace

std::size_t ternary_scratch(std::size_t n) {
  // Level partials, ping-pong: the first level's count covers every later one.
  const std::size_t first = chunks_of(n);
  return 2 * first + 2;
}

void ternary_quantize(const float* w, std::size_t n, float n_f, float floor_w, float* codes, float* dequant,
                      float* params, float* scratch) {
  if (n == 0) return;
  float* level[2] = {scratch, scratch + chunks_of(n)};
  std::size_t m = chunks_of(n);
  trace::launched("ternary_quantize (chunk sums of |w|)");
  chunk_sums<true><<<static_cast<unsigned>((m + 7) / 8), 256>>>(w, n, level[0]);
  check_launch("ternary_quantize: chunk sums");
  int cur = 0;
  while (m > 1) {
    const std::size_t next = chunks_of(m);
    trace::launched("ternary_quantize (chunk sums, upper level)");
    chunk_sums<false><<<static_cast<unsigned>((next + 7) / 8), 256>>>(level[cur], m, level[cur ^ 1]);
    check_launch("ternary_quantize: chunk sums");
    cur ^= 1;
    m = next;
  }
  trace::launched("ternary_quantize (scale)");
  ternary_scale<<<1, 1>>>(level[cur], n_f, floor_w, params);
  check_launch("ternary_quantize: scale");
  const std::size_t blocks = (n + 255) / 256;
  trace::launched("ternary_quantize (codes)");
  ternary_codes<<<static_cast<unsigned>(blocks < 65535 * 4 ? blocks : 65535 * 4), 256>>>(w, n, params, codes,
                                                                                         dequant);
  check_launch("ternary_quantize: codes");
}

void row_quantize(const float* x, std::size_t N, std::size_t K, float floor_x, float* codes, float* dequant,
                  float* step) {
  if (N == 0) return;
  trace::launched("row_quantize");
  row_codes<float, true><<<static_cast<unsigned>((N + 7) / 8), 256>>>(x, N, K, floor_x, codes, dequant, step);
  check_launch("row_quantize");
}

void row_quantize_i8(const float* x, std::size_t N, std::size_t K, float floor_x, std::int8_t* codes, float* step,
                     float* dequant) {
  if (N == 0) return;
  if (N <= kFewRows && K <= kRowCtaMaxK) {
    if (dequant != nullptr) launch_row_codes_cta<true>(x, N, K, floor_x, codes, dequant, step);
    else launch_row_codes_cta<false>(x, N, K, floor_x, codes, nullptr, step);
    return;
  }
  const unsigned blocks = static_cast<unsigned>((N + 7) / 8);
  if (dequant != nullptr) {
    trace::launched("row_quantize_i8 (codes, dequantized)");
    row_codes<std::int8_t, true><<<blocks, 256>>>(x, N, K, floor_x, codes, dequant, step);
  } else {
    trace::launched("row_quantize_i8 (codes)");
    row_codes<std::int8_t, false><<<blocks, 256>>>(x, N, K, floor_x, codes, nullptr, step);
  }
  check_launch("row_quantize_i8");
}

std::size_t col_quantize_scratch(std::size_t rows, std::size_t cols) {
  const std::size_t chunks = (rows + kColChunk - 1) / kColChunk;
  return 2 * (chunks > 0 ? chunks : 1) * cols;  // partials and NaN flags (inv over the first partials)
}

void col_quantize_i8(const float* x, std::size_t rows, std::size_t cols, float floor_x, std::int8_t* codes,
                     float* step, float* scratch) {
  if (cols == 0) return;
  const std::size_t chunks = (rows + kColChunk - 1) / kColChunk;
  if (chunks > 65535 || (rows + 31) / 32 > 65535)
    throw std::invalid_argument("col_quantize_i8: " + std::to_string(rows) + " rows: beyond the launch grid");
  float* partial = scratch;
  std::uint32_t* has_nan = reinterpret_cast<std::uint32_t*>(scratch + chunks * cols);
  float* inv = partial;  // col_steps reads every partial before it writes inv over the first row of them
  const unsigned col_blocks = static_cast<unsigned>((cols + 255) / 256);
  if (chunks > 0) {
    trace::launched("col_quantize_i8 (chunk maxima)");
    col_partials<<<dim3(col_blocks, static_cast<unsigned>(chunks)), 256>>>(x, rows, cols, partial, has_nan);
    check_launch("col_quantize_i8: chunk maxima");
  }
  trace::launched("col_quantize_i8 (steps)");
  col_steps<<<col_blocks, 256>>>(partial, has_nan, chunks, cols, floor_x, step, inv);
  check_launch("col_quantize_i8: steps");
  if (rows == 0) return;
  trace::launched("col_quantize_i8 (codes, transposed)");
  col_codes<<<dim3(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>((rows + 31) / 32)), 256>>>(
      x, rows, cols, inv, codes);
  check_launch("col_quantize_i8: codes");
}

void unit_epilogue(const std::int32_t* acc, const float* sa, const float* sb, const float* bias, std::size_t I,
                   std::size_t J, float* out) {
  const std::size_t n = I * J;
  if (n == 0) return;
  const std::size_t blocks = (n + 255) / 256;
  trace::launched(bias != nullptr ? "unit_epilogue (bias)" : "unit_epilogue");
  unit_epilogue_kernel<<<static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8), 256>>>(acc, sa, sb, bias, I,
                                                                                              J, out);
  check_launch("unit_epilogue");
}

}  // namespace lockstep::cuda::launch
