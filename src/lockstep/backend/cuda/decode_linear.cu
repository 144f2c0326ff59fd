// The decode projections on the device (decode_linear_launch.hpp states the
// contracts), bit for bit with the CPU's:
//
// ternary_gemv — ops::BitLinear's forward on the 2-bit codes. CPU reference:
//   ops::BitLinear::forward (the spec) and DecodeBackend<cpu::OpKernels>::linear.
//   A row's codes are 16-byte units of 64 codes, four words of 16
//   (ternary_word.hpp: code 4j + i of a word as field = code + 1 at bits
//   8i + 2j, so (word >> 2j) & 0x03030303 is four fields in four bytes against
//   four activation codes — one __dp4a). The fields carry +1, so
//   Σ field·x = Σ code·x + Σ x, and the row's Σ x (exact) is subtracted. Every
//   sum is an int32 sum (|acc| <= 2·127·131071 < 2^31), exact in any order:
//   the units of a row are spread over a CTA's threads and joined by shared
//   integer atomics. Then the op's epilogue, (f32(acc) * step_n) * scale, two
//   roundings in that order. One CTA per RB output rows reads each code once per
//   batch chunk of up to 16 rows (the activation codes of the chunk in shared memory).
//
// chain_gemv — ops::Linear's forward for a few rows. CPU reference: ops::matmul
//   (dot_seq: acc = +0, acc = fma(x_k, w_k, acc), k ascending, canonical NaN)
//   and cpu::gemm's chains. One thread owns one output column m and all its
//   batch rows' chains, so each chain is whole and in k order; a CTA of 128
//   columns stages 32-wide k tiles of their weight rows through shared memory
//   (coalesced loads; f16 widened exactly to f32) and the rows' x tiles. Many
//   columns (the LM head's 128256) give the parallelism.
#include "lockstep/backend/cuda/decode_linear_launch.hpp"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/ternary_word.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"

namespace lockstep::cuda::launch {
namespace {

using i64 = long long;

DecodeLinearMutant g_mutant = DecodeLinearMutant::none;

// --- ternary ---------------------------------------------------------------

__global__ void __launch_bounds__(256) ternary_pack_kernel(const float* __restrict__ codes, i64 M, i64 K, i64 W,
                                                           std::uint32_t* __restrict__ words) {
  const i64 t = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= M * W) return;
  const i64 m = t / W, g = t - m * W;
  const i64 k0 = 16 * g;
  const int n = k0 >= K ? 0 : static_cast<int>(K - k0 < 16 ? K - k0 : 16);
  words[t] = ternary_word(codes + m * K + (n > 0 ? k0 : 0), n);
}

__device__ __forceinline__ int word_dot(std::uint32_t w, const int* x) { return ternary_word_dot(w, x); }

constexpr int kTernaryThreads = 256;
constexpr int kTernaryMaxRows = 16;  // batch rows per chunk (shared activation codes)

// Dynamic shared memory: xs [nbmax][Kp] int8, then xsum [nbmax] and acc [nbmax][RB] ints.
__global__ void __launch_bounds__(kTernaryThreads)
    ternary_gemv_kernel(const uint4* __restrict__ units, i64 M, i64 K, i64 U, int RB, const std::int8_t* __restrict__ xq,
                        i64 N, int nbmax, const float* __restrict__ step, const float* __restrict__ scale,
                        float* __restrict__ y, bool drop_last_unit) {
  extern __shared__ __align__(16) unsigned char smem[];
  const i64 Kp = U * 64;
  std::int8_t* xs = reinterpret_cast<std::int8_t*>(smem);
  int* xsum = reinterpret_cast<int*>(smem + static_cast<i64>(nbmax) * Kp);
  int* acc = xsum + nbmax;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const i64 m0 = static_cast<i64>(blockIdx.x) * RB;
  const int rows = static_cast<int>(M - m0 < RB ? M - m0 : RB);
  const float sc = scale[0];
  for (i64 n0 = 0; n0 < N; n0 += nbmax) {
    const int nb = static_cast<int>(N - n0 < nbmax ? N - n0 : nbmax);
    for (i64 e = tid; e < static_cast<i64>(nb) * Kp; e += kTernaryThreads) {
      const i64 n = e / Kp, k = e - n * Kp;
      xs[e] = k < K ? xq[(n0 + n) * K + k] : static_cast<std::int8_t>(0);
    }
    for (int e = tid; e < nb * RB; e += kTernaryThreads) acc[e] = 0;
    // Σ_k x[n, k]: a warp per row, exact.
    for (int n = warp; n < nb; n += kTernaryThreads / 32) {
      int s = 0;
      for (i64 k = lane; k < K; k += 32) s += xq[(n0 + n) * K + k];
#pragma unroll
      for (int off = 16; off >= 1; off /= 2) s += __shfl_xor_sync(0xFFFFFFFFu, s, off);
      if (lane == 0) xsum[n] = s;
    }
    __syncthreads();
    const i64 total = static_cast<i64>(rows) * U;
    for (i64 u = tid; u < total; u += kTernaryThreads) {
      const i64 r = u / U, j = u - r * U;
      if (drop_last_unit && j == U - 1) continue;
      const uint4 c = units[(m0 + r) * U + j];
      for (int n = 0; n < nb; ++n) {
        const int* x = reinterpret_cast<const int*>(xs + static_cast<i64>(n) * Kp + j * 64);
        int p = word_dot(c.x, x);
        p += word_dot(c.y, x + 4);
        p += word_dot(c.z, x + 8);
        p += word_dot(c.w, x + 12);
        atomicAdd(&acc[n * RB + static_cast<int>(r)], p);
      }
    }
    __syncthreads();
    for (int e = tid; e < nb * rows; e += kTernaryThreads) {
      const int n = e / rows, r = e - n * rows;
      const int a = acc[n * RB + r] - xsum[n];
      y[(n0 + n) * M + m0 + r] = __fmul_rn(__fmul_rn(__int2float_rn(a), step[n0 + n]), sc);
    }
    __syncthreads();  // the next chunk overwrites xs, xsum and acc
  }
}

// --- f16 copy --------------------------------------------------------------

__global__ void __launch_bounds__(256) f16_pack_kernel(const float* __restrict__ w, i64 n, __half* __restrict__ h,
                                                       int* inexact) {
  int bad = 0;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const float v = w[i];
    const __half q = __float2half_rn(v);
    h[i] = q;
    bad |= __float_as_uint(__half2float(q)) != __float_as_uint(v) ? 1 : 0;
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr(inexact, 1);
}

// --- the float chain -------------------------------------------------------

constexpr int kChainCols = 128;  // output columns (threads) per CTA
constexpr int kChainTile = 32;   // k per shared tile

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }

// NB: the batch rows one pass of the CTA carries (its chains in registers).
template <class W, int NB>
__global__ void __launch_bounds__(kChainCols)
    chain_gemv_kernel(const W* __restrict__ w, const float* __restrict__ x, const float* __restrict__ b, i64 N, i64 M,
                      i64 K, float* __restrict__ y, bool mul_add) {
  __shared__ float ws[kChainCols][kChainTile + 1];
  __shared__ float xs[NB][kChainTile];
  const int tid = static_cast<int>(threadIdx.x);
  const i64 m0 = static_cast<i64>(blockIdx.x) * kChainCols;
  const i64 m = m0 + tid;
  for (i64 n0 = 0; n0 < N; n0 += NB) {
    const int nb = static_cast<int>(N - n0 < NB ? N - n0 : NB);
    float acc[NB];
#pragma unroll
    for (int n = 0; n < NB; ++n) acc[n] = 0.0f;
    for (i64 k0 = 0; k0 < K; k0 += kChainTile) {
      const int kt = static_cast<int>(K - k0 < kChainTile ? K - k0 : kChainTile);
      // The tile of weight rows m0.. (coalesced: consecutive threads, consecutive k),
      // unrolled whole so that all 32 of a thread's loads are in flight at once.
#pragma unroll
      for (int i = 0; i < kChainTile; ++i) {
        const int e = tid + i * kChainCols;
        const int r = e / kChainTile, c = e - r * kChainTile;
        const i64 mr = m0 + r;
        ws[r][c] = mr < M && c < kt ? widen(w[mr * K + k0 + c]) : 0.0f;
      }
      for (int e = tid; e < NB * kChainTile; e += kChainCols) {
        const int n = e / kChainTile, c = e - n * kChainTile;
        xs[n][c] = n < nb && c < kt ? x[(n0 + n) * K + k0 + c] : 0.0f;
      }
      __syncthreads();
      for (int c = 0; c < kt; ++c) {
        const float wv = ws[tid][c];
#pragma unroll
        for (int n = 0; n < NB; ++n)
          acc[n] = mul_add ? __fadd_rn(__fmul_rn(xs[n][c], wv), acc[n]) : num::fma_rn(xs[n][c], wv, acc[n]);
      }
      __syncthreads();
    }
    if (m < M) {
#pragma unroll
      for (int n = 0; n < NB; ++n)
        if (n < nb) {
          float v = num::reduce::canonical_nan(acc[n]);
          // NaN + b on the GPU is 0x7FFFFFFF, on the CPU the NaN operand (the canonical 0x7FC00000):
          // canonical again after the add (seen in test_infer_decode_kernels_gpu's NaN row with bias).
          if (b != nullptr) v = num::reduce::canonical_nan(__fadd_rn(v, b[m]));
          y[(n0 + n) * M + m] = v;
        }
    }
  }
}

template <class W, int NB>
void launch_chain(const W* w, const float* x, const float* b, i64 N, i64 M, i64 K, float* y, const char* name) {
  const bool mul_add = g_mutant == DecodeLinearMutant::chain_mul_add;
  trace::launched(mul_add ? "chain_gemv (mutant)" : name);
  chain_gemv_kernel<W, NB><<<static_cast<unsigned>((M + kChainCols - 1) / kChainCols), kChainCols>>>(w, x, b, N, M, K,
                                                                                                    y, mul_add);
  check_launch("chain_gemv");
}

template <class W>
void chain_by_rows(const W* w, const float* x, const float* b, i64 N, i64 M, i64 K, float* y, bool half) {
  if (N <= 1)
    launch_chain<W, 1>(w, x, b, N, M, K, y, half ? "chain_gemv (f16 weights, 1 row)" : "chain_gemv (f32 weights, 1 row)");
  else if (N <= 4)
    launch_chain<W, 4>(w, x, b, N, M, K, y, half ? "chain_gemv (f16 weights, 4 rows)" : "chain_gemv (f32 weights, 4 rows)");
  else if (N <= 8)
    launch_chain<W, 8>(w, x, b, N, M, K, y, half ? "chain_gemv (f16 weights, 8 rows)" : "chain_gemv (f32 weights, 8 rows)");
  else if (N <= 16)
    launch_chain<W, 16>(w, x, b, N, M, K, y,
                        half ? "chain_gemv (f16 weights, 16 rows)" : "chain_gemv (f32 weights, 16 rows)");
  else
    launch_chain<W, 32>(w, x, b, N, M, K, y,
                        half ? "chain_gemv (f16 weights, 32 rows)" : "chain_gemv (f32 weights, 32 rows)");
}

}  // namespace

void set_decode_linear_mutant(DecodeLinearMutant m) { g_mutant = m; }

void ternary_pack(const float* codes, std::size_t M, std::size_t K, std::uint32_t* words) {
  const i64 W = static_cast<i64>(4 * ternary_units(K)), total = static_cast<i64>(M) * W;
  if (total == 0) return;
  trace::launched("ternary_pack");
  ternary_pack_kernel<<<static_cast<unsigned>((total + 255) / 256), 256>>>(codes, static_cast<i64>(M),
                                                                          static_cast<i64>(K), W, words);
  check_launch("ternary_pack");
}

void ternary_gemv(const std::uint32_t* words, std::size_t M, std::size_t K, const std::int8_t* xq, std::size_t N,
                  const float* step, const float* scale, float* y) {
  if (M == 0 || N == 0) return;
  const i64 U = static_cast<i64>(ternary_units(K)), Kp = U * 64;
  // Rows per CTA: about 1024 units of work, but at least 2 CTAs per SM's worth (132 SMs) where M allows.
  i64 rb = 1024 / U;
  if (rb > static_cast<i64>(M) / 264) rb = static_cast<i64>(M) / 264;
  if (rb < 1) rb = 1;
  if (rb > 64) rb = 64;
  const int RB = static_cast<int>(rb);
  // Batch rows per chunk: as many as 96 KiB of activation codes hold, at most 16.
  i64 nb = (96 * 1024) / Kp;
  if (nb > kTernaryMaxRows) nb = kTernaryMaxRows;
  if (nb > static_cast<i64>(N)) nb = static_cast<i64>(N);
  if (nb < 1) nb = 1;
  const int nbmax = static_cast<int>(nb);
  const std::size_t smem = static_cast<std::size_t>(nbmax * Kp) + sizeof(int) * static_cast<std::size_t>(nbmax) * (1 + RB);
  static bool attribute_set = false;  // the 96 KiB of activation codes need more than the default 48 KiB
  if (!attribute_set) {
    const cudaError_t e =
        cudaFuncSetAttribute(ternary_gemv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 128 * 1024);
    if (e != cudaSuccess) check_launch("ternary_gemv: setting its shared memory size");
    attribute_set = true;
  }
  const bool drop = g_mutant == DecodeLinearMutant::ternary_last_unit_dropped;
  trace::launched(drop ? "ternary_gemv (mutant)" : "ternary_gemv");
  const unsigned blocks = static_cast<unsigned>((static_cast<i64>(M) + RB - 1) / RB);
  ternary_gemv_kernel<<<blocks, kTernaryThreads, smem>>>(reinterpret_cast<const uint4*>(words), static_cast<i64>(M),
                                                         static_cast<i64>(K), U, RB, xq, static_cast<i64>(N), nbmax,
                                                         step, scale, y, drop);
  check_launch("ternary_gemv");
}

bool f16_pack(const float* w, std::size_t n, std::uint16_t* half, int* inexact) {
  if (cudaMemsetAsync(inexact, 0, sizeof(int)) != cudaSuccess) check_launch("f16_pack: clearing the flag");
  if (n > 0) {
    const std::size_t blocks = (n + 255) / 256;
    trace::launched("f16_pack");
    f16_pack_kernel<<<static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8), 256>>>(
        w, static_cast<i64>(n), reinterpret_cast<__half*>(half), inexact);
    check_launch("f16_pack");
  }
  int bad = 1;
  copy_to_host(&bad, inexact, sizeof bad);  // waits: once per weight per session
  return bad == 0;
}

void chain_gemv(const float* w32, const std::uint16_t* w16, const float* x, const float* b, std::size_t N,
                std::size_t M, std::size_t K, float* y) {
  if (M == 0 || N == 0) return;
  const auto n = static_cast<i64>(N), m = static_cast<i64>(M), k = static_cast<i64>(K);
  if (w16 != nullptr)
    chain_by_rows(reinterpret_cast<const __half*>(w16), x, b, n, m, k, y, true);
  else
    chain_by_rows(w32, x, b, n, m, k, y, false);
}

}  // namespace lockstep::cuda::launch
