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
//   a warp per output row, its lanes striding over the row's units (coalesced
//   16-byte loads, several in flight a lane), an int32 partial a lane and batch
//   row, joined by the warp's shuffle sum (no atomics). Then the op's epilogue,
//   (f32(acc) * step_n) * scale, two roundings in that order. A CTA of 8 warps
//   (8 output rows) reads each code once per batch chunk of up to 16 rows (the
//   chunk's activation codes in shared memory).
//
// chain_gemv — ops::Linear's forward for a few rows. CPU reference: ops::matmul
//   (dot_seq: acc = +0, acc = fma(x_k, w_k, acc), k ascending, canonical NaN)
//   and cpu::gemm's chains. One thread owns one output column m and all its
//   batch rows' chains, so each chain is whole and in k order; a CTA of 128
//   columns stages 32-wide k tiles of their weight rows through shared memory
//   (coalesced loads; f16 widened exactly to f32) and the rows' x tiles. Many
//   columns (the LM head's 128256) give the parallelism. The f16 weights with
//   K % 8 == 0 (the head) take chain_gemv_f16_rows_kernel instead: each thread
//   reads its own weight row in 16-byte loads, several in flight, no barriers
//   (the staged tiles' two barriers a 32-wide tile held the head at ~490 GB/s).
#include "lockstep/backend/cuda/decode_linear_launch.hpp"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/head_gemv_launch.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/pdl.hpp"
#include "lockstep/backend/cuda/pdl_device.cuh"
#include "lockstep/backend/cuda/pdl_launch.cuh"
#include "lockstep/backend/cuda/pointwise_launch.hpp"
#include "lockstep/backend/cuda/ternary_epilogue.cuh"
#include "lockstep/backend/cuda/ternary_word.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"

namespace lockstep::cuda::launch {
namespace {

using i64 = long long;

constexpr std::size_t kTernaryMaxK = 96 * 1024;  // a chunk's row of codes in 96 KiB of shared memory

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

constexpr int kTernaryThreads = 256;  // 8 warps: 8 output rows a CTA, one a warp
constexpr int kTernaryWarps = kTernaryThreads / 32;
constexpr int kTernaryMaxRows = 16;  // batch rows per chunk (shared activation codes)

// The dot of one 16-byte unit of weight codes with one batch row's 64
// activation codes in shared memory. The four words are taken in an order
// rotated by lane / 2, so that the 8 lanes of a 16-byte shared-memory phase
// (units 64 bytes apart) read 8 different bank quads: no conflicts. The
// integer sum's order is free.
__device__ __forceinline__ int unit_dot(const uint4& c, const std::int8_t* xu, int rot) {
  int p = 0;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int qq = (q + rot) & 3;
    const std::uint32_t w = qq == 0 ? c.x : qq == 1 ? c.y : qq == 2 ? c.z : c.w;
    const int4 x = *reinterpret_cast<const int4*>(xu + 16 * qq);
    const int xv[4] = {x.x, x.y, x.z, x.w};
    p += word_dot(w, xv);
  }
  return p;
}

// A warp per output row m; its lanes stride over the row's units (consecutive
// lanes, consecutive 16-byte units: coalesced, several loads in flight a
// lane), each lane keeps an int32 partial per batch row, and the warp's
// shuffle sum (exact: integers) gives acc. No atomics, no 64-bit division in
// the loop. NB: the batch rows a chunk carries in registers (a template, so
// the partials stay in registers).
// Dynamic shared memory: xs [nbmax][Kp] int8 (zero past K), then xsum [nbmax] ints.
// Pre > 0 (the prefetched form): each lane loads its first Pre units of the
// row (j = lane, lane + 32, ...: every unit of a row of K <= 32·Pre·64 codes)
// into registers before the activation codes are staged, so a CTA's weight
// bytes (8 rows × U units × 16 B: 5 KB at K 2560, 13.8 KB at 6912) are in
// flight while the staging and the Σx barriers run, instead of issued after
// them; the units past them as before. The same integer sums (exact in any
// order): the same bits. Pre = 0: the session-7 kernel
// (LOCKSTEP_DECODE_FUSION=0).
//
// Parts: up to kTernaryMaxParts matrices that read the same activation codes
// (q, k, v; gate, up) in one launch; part p owns the CTAs from block0[p] on
// (its rows rounded up to whole CTAs), and each CTA computes its part's rows
// as a launch of that part alone would. A part with sum set adds its
// residual in the epilogue (ternary_epilogue.cuh).
struct Parts {
  const uint4* units[kTernaryMaxParts];
  const float* scale[kTernaryMaxParts];
  float* y[kTernaryMaxParts];
  const float* add[kTernaryMaxParts];
  float* sum[kTernaryMaxParts];
  int add_first[kTernaryMaxParts];
  int M[kTernaryMaxParts];
  int block0[kTernaryMaxParts];
  int count;
  bool contract;  // DecodeLinearMutant::ternary_residual_contracted
  bool pdl_late_wait;  // LOCKSTEP_DECODE_PDL's planted bug (pdl.hpp): the wait after the staging of x
};
template <class T>
__device__ __forceinline__ T part_of(const T (&v)[kTernaryMaxParts], int p) {  // constant indices: no local copy
  static_assert(kTernaryMaxParts == 3);
  return p == 0 ? v[0] : p == 1 ? v[1] : v[2];
}
template <int NB, int Pre>
__global__ void __launch_bounds__(kTernaryThreads)
    ternary_gemv_kernel(const Parts parts, int K, int U, const std::int8_t* __restrict__ xq, int N,
                        const float* __restrict__ step, bool drop_last_unit) {
  pdl::pdl_trigger();  // PDL (pdl_device.cuh): the next kernel may launch now
  extern __shared__ __align__(16) unsigned char smem[];
  const int Kp = U * 64;
  std::int8_t* xs = reinterpret_cast<std::int8_t*>(smem);
  int* xsum = reinterpret_cast<int*>(smem + static_cast<i64>(NB) * Kp);
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int block = static_cast<int>(blockIdx.x);
  int p = 0;
#pragma unroll
  for (int i = 1; i < static_cast<int>(kTernaryMaxParts); ++i)
    if (i < parts.count && block >= parts.block0[i]) p = i;
  const uint4* __restrict__ units = part_of(parts.units, p);
  float* y = part_of(parts.y, p);  // (may be the residual's sum: not __restrict__)
  const float* add = part_of(parts.add, p);
  float* sum = part_of(parts.sum, p);
  const bool add_first = part_of(parts.add_first, p) != 0;
  const int M = part_of(parts.M, p);
  const int m = (block - part_of(parts.block0, p)) * kTernaryWarps + warp;
  const bool active = m < M;  // inactive warps still stage and meet the barriers
  const float sc = part_of(parts.scale, p)[0];
  const bool vec = K % 16 == 0 && (reinterpret_cast<std::uintptr_t>(xq) & 15u) == 0;
  const int rot = (lane >> 1) & 3;
  const int U_used = drop_last_unit ? U - 1 : U;
  const uint4* wr = units + static_cast<i64>(active ? m : 0) * U;
  [[maybe_unused]] uint4 pre[Pre > 0 ? Pre : 1];
#pragma unroll
  for (int i = 0; i < Pre; ++i) {
    const int j = lane + 32 * i;
    pre[i] = active && j < U_used ? wr[j] : make_uint4(0u, 0u, 0u, 0u);
  }
  // PDL: the codes and the scale above are weights; x, step, y, add and sum only after the wait.
  if (!parts.pdl_late_wait) pdl::pdl_wait();
  for (int n0 = 0; n0 < N; n0 += NB) {
    const int nb = N - n0 < NB ? N - n0 : NB;
    // Stage the chunk's activation codes (16-byte loads where K allows; zero past K).
    if (vec) {
      const int vk = K / 16, vp = Kp / 16;
      for (int e = tid; e < nb * vp; e += kTernaryThreads) {
        const int n = e / vp, v = e - n * vp;
        int4 val = make_int4(0, 0, 0, 0);
        if (v < vk) val = reinterpret_cast<const int4*>(xq + static_cast<i64>(n0 + n) * K)[v];
        reinterpret_cast<int4*>(xs + static_cast<i64>(n) * Kp)[v] = val;
      }
    } else {
      for (int e = tid; e < nb * Kp; e += kTernaryThreads) {
        const int n = e / Kp, k = e - n * Kp;
        xs[e] = k < K ? xq[static_cast<i64>(n0 + n) * K + k] : static_cast<std::int8_t>(0);
      }
    }
    if (parts.pdl_late_wait) pdl::pdl_wait();  // the planted bug: x was read before the wait
    __syncthreads();
    // Σ_k x[n, k] from shared memory: a warp per batch row, exact.
    for (int n = warp; n < nb; n += kTernaryWarps) {
      int sx = 0;
      const int* xi = reinterpret_cast<const int*>(xs + static_cast<i64>(n) * Kp);
      for (int t = lane; t < Kp / 4; t += 32) sx = __dp4a(xi[t], 0x01010101, sx);
#pragma unroll
      for (int off = 16; off >= 1; off /= 2) sx += __shfl_xor_sync(0xFFFFFFFFu, sx, off);
      if (lane == 0) xsum[n] = sx;
    }
    __syncthreads();
    if (active) {
      int acc[NB];
#pragma unroll
      for (int n = 0; n < NB; ++n) acc[n] = 0;
#pragma unroll
      for (int i = 0; i < Pre; ++i) {
        const int j = lane + 32 * i;
        if (j >= U_used) break;
#pragma unroll
        for (int n = 0; n < NB; ++n)
          if (n < nb) acc[n] += unit_dot(pre[i], xs + static_cast<i64>(n) * Kp + j * 64, rot);
      }
#pragma unroll 4
      for (int j = lane + 32 * Pre; j < U_used; j += 32) {
        const uint4 c = wr[j];
#pragma unroll
        for (int n = 0; n < NB; ++n)
          if (n < nb) acc[n] += unit_dot(c, xs + static_cast<i64>(n) * Kp + j * 64, rot);
      }
#pragma unroll
      for (int n = 0; n < NB; ++n) {
        if (n >= nb) break;
        int a = acc[n];
#pragma unroll
        for (int off = 16; off >= 1; off /= 2) a += __shfl_xor_sync(0xFFFFFFFFu, a, off);
        if (lane == 0)
          ternary_cell_store(y, static_cast<i64>(n0 + n) * M + m, a - xsum[n], step[n0 + n], sc, add, sum, add_first,
                             parts.contract);
      }
    }
    __syncthreads();  // the next chunk overwrites xs and xsum
  }
}

constexpr int kTernaryPrefetch = 4;  // units a lane loads ahead (every unit of a row of K <= 8192)

template <int NB, int Pre>
void launch_ternary_as(const Parts& parts, unsigned blocks, int K, int U, const std::int8_t* xq, int N,
                       const float* step, bool drop) {
  const std::size_t smem = static_cast<std::size_t>(NB) * static_cast<std::size_t>(U) * 64 + sizeof(int) * NB;
  static bool attribute_set = false;  // up to 96 KiB of activation codes need more than the default 48 KiB
  if (!attribute_set) {
    const cudaError_t e = cudaFuncSetAttribute(ternary_gemv_kernel<NB, Pre>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, 128 * 1024);
    if (e != cudaSuccess) check_launch("ternary_gemv: setting its shared memory size");
    attribute_set = true;
  }
  cuda::detail::launch_decode(ternary_gemv_kernel<NB, Pre>, dim3(blocks), dim3(kTernaryThreads), smem, parts, K, U,
                              xq, N, step, drop);  // PDL unless LOCKSTEP_DECODE_PDL=0
}

template <int NB>
void launch_ternary(const Parts& parts, unsigned blocks, int K, int U, const std::int8_t* xq, int N,
                    const float* step, bool drop, bool prefetch) {
  if (prefetch) launch_ternary_as<NB, kTernaryPrefetch>(parts, blocks, K, U, xq, N, step, drop);
  else launch_ternary_as<NB, 0>(parts, blocks, K, U, xq, N, step, drop);
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
  pdl::pdl_trigger();  // PDL (pdl_device.cuh): the next kernel may launch now, and
  pdl::pdl_wait();     // every read and write after the wait
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

// The f16 weights row by row (K % 8 == 0, weights and x 16-byte aligned: the
// host checks): no shared memory and no barriers. Thread m owns output m's
// chains (one a batch row of the chunk) and reads its weight row in 16-byte
// loads of 8 codes, several in flight (unrolled: each thread's next loads do
// not wait on its fmas); x by 16-byte loads that every thread of the warp
// shares (the same address: one transaction, from L1). The chain is the same:
// acc = fma(x_k, w_k, acc), k ascending from +0.
constexpr int kChainRowThreads = 128;

__device__ __forceinline__ float chain_step(float x, float w, float acc, bool mul_add) {
  return mul_add ? __fadd_rn(__fmul_rn(x, w), acc) : num::fma_rn(x, w, acc);
}

template <int NB>
__global__ void __launch_bounds__(kChainRowThreads)
    chain_gemv_f16_rows_kernel(const uint4* __restrict__ w, const float4* __restrict__ x, const float* __restrict__ b,
                               i64 N, i64 M, i64 K, float* __restrict__ y, bool mul_add) {
  constexpr int kUnroll = NB <= 4 ? 8 : 4;
  pdl::pdl_trigger();  // PDL (pdl_device.cuh): the next kernel may launch now; every thread waits (also
  pdl::pdl_wait();     // those past M: a grid completes after its predecessor), every read after the wait
  const i64 m = static_cast<i64>(blockIdx.x) * kChainRowThreads + threadIdx.x;
  if (m >= M) return;  // no barriers below
  const i64 K8 = K / 8, K4 = K / 4;
  const uint4* wr = w + m * K8;
  for (i64 n0 = 0; n0 < N; n0 += NB) {
    const int nb = static_cast<int>(N - n0 < NB ? N - n0 : NB);
    const float4* xr = x + n0 * K4;
    float acc[NB];
#pragma unroll
    for (int n = 0; n < NB; ++n) acc[n] = 0.0f;
#pragma unroll kUnroll
    for (i64 v = 0; v < K8; ++v) {
      const uint4 c = wr[v];
      const std::uint32_t words[4] = {c.x, c.y, c.z, c.w};
      float wv[8];  // k = 8v + i: the low half of a word first (little-endian), widened exactly
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        wv[2 * i] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] & 0xFFFFu)));
        wv[2 * i + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] >> 16)));
      }
#pragma unroll
      for (int n = 0; n < NB; ++n)
        if (n < nb) {
          const float4 xa = xr[n * K4 + 2 * v], xb = xr[n * K4 + 2 * v + 1];
          float a = acc[n];
          a = chain_step(xa.x, wv[0], a, mul_add);
          a = chain_step(xa.y, wv[1], a, mul_add);
          a = chain_step(xa.z, wv[2], a, mul_add);
          a = chain_step(xa.w, wv[3], a, mul_add);
          a = chain_step(xb.x, wv[4], a, mul_add);
          a = chain_step(xb.y, wv[5], a, mul_add);
          a = chain_step(xb.z, wv[6], a, mul_add);
          a = chain_step(xb.w, wv[7], a, mul_add);
          acc[n] = a;
        }
    }
#pragma unroll
    for (int n = 0; n < NB; ++n)
      if (n < nb) {
        float v = num::reduce::canonical_nan(acc[n]);
        if (b != nullptr) v = num::reduce::canonical_nan(__fadd_rn(v, b[m]));  // as chain_gemv_kernel's
        y[(n0 + n) * M + m] = v;
      }
  }
}

template <int NB>
void launch_chain_f16_rows(const __half* w, const float* x, const float* b, i64 N, i64 M, i64 K, float* y,
                           const char* name) {
  const bool mul_add = g_mutant == DecodeLinearMutant::chain_mul_add;
  trace::launched(mul_add ? "chain_gemv (f16 rows, mutant)" : name);
  cuda::detail::launch_decode(chain_gemv_f16_rows_kernel<NB>,
                              dim3(static_cast<unsigned>((M + kChainRowThreads - 1) / kChainRowThreads)),
                              dim3(kChainRowThreads), 0, reinterpret_cast<const uint4*>(w),
                              reinterpret_cast<const float4*>(x), b, N, M, K, y,
                              mul_add);  // PDL unless LOCKSTEP_DECODE_PDL=0
  check_launch("chain_gemv (f16 rows)");
}

bool f16_rows_apply(const __half* w, const float* x, i64 K) {
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  return K % 8 == 0 && aligned(w) && aligned(x);
}

void chain_f16_rows(const __half* w, const float* x, const float* b, i64 N, i64 M, i64 K, float* y) {
  if (N <= 1) launch_chain_f16_rows<1>(w, x, b, N, M, K, y, "chain_gemv (f16 rows, 1 row)");
  else if (N <= 4) launch_chain_f16_rows<4>(w, x, b, N, M, K, y, "chain_gemv (f16 rows, 4 rows)");
  else if (N <= 8) launch_chain_f16_rows<8>(w, x, b, N, M, K, y, "chain_gemv (f16 rows, 8 rows)");
  else if (N <= 16) launch_chain_f16_rows<16>(w, x, b, N, M, K, y, "chain_gemv (f16 rows, 16 rows)");
  else launch_chain_f16_rows<32>(w, x, b, N, M, K, y, "chain_gemv (f16 rows, 32 rows)");
}

template <class W, int NB>
void launch_chain(const W* w, const float* x, const float* b, i64 N, i64 M, i64 K, float* y, const char* name) {
  const bool mul_add = g_mutant == DecodeLinearMutant::chain_mul_add;
  trace::launched(mul_add ? "chain_gemv (mutant)" : name);
  cuda::detail::launch_decode(chain_gemv_kernel<W, NB>,
                              dim3(static_cast<unsigned>((M + kChainCols - 1) / kChainCols)), dim3(kChainCols), 0, w,
                              x, b, N, M, K, y, mul_add);  // PDL unless LOCKSTEP_DECODE_PDL=0
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

namespace {
std::atomic<int> g_decode_epilogues{-1};  // -1: the environment's
}

bool decode_epilogues() {
  const int set = g_decode_epilogues.load();
  if (set >= 0) return set != 0;
  static const bool env_on = [] {  // read once: asked twice a layer
    const char* env = std::getenv("LOCKSTEP_DECODE_EPILOGUES");
    return env == nullptr || std::string(env) != "0";
  }();
  return env_on;
}
void set_decode_epilogues(int on) { g_decode_epilogues.store(on < 0 ? -1 : (on != 0 ? 1 : 0)); }

namespace {
std::atomic<int> g_decode_norm_gemv{-1};  // -1: the environment's
}

bool decode_norm_gemv() {
  const int set = g_decode_norm_gemv.load();
  if (set >= 0) return set != 0;
  static const bool env_on = [] {  // read once: asked three times a layer
    const char* env = std::getenv("LOCKSTEP_DECODE_NORM_GEMV");
    return env != nullptr && std::string(env) == "1";
  }();
  return env_on;
}
void set_decode_norm_gemv(int on) { g_decode_norm_gemv.store(on < 0 ? -1 : (on != 0 ? 1 : 0)); }

namespace {
std::atomic<int> g_ternary_version{0};  // 0: the environment's
}

int ternary_gemv_version() {
  const int set = g_ternary_version.load();
  if (set != 0) return set;
  static const int from_env = [] {
    const char* env = std::getenv("LOCKSTEP_TERNARY_GEMV");
    const std::string v = env == nullptr ? "" : env;
    if (v.empty() || v == "v1") return 1;
    if (v == "v2") return 2;
    if (v == "v2pdl") return 3;
    throw std::invalid_argument("LOCKSTEP_TERNARY_GEMV=" + v + ": expected v1, v2 or v2pdl");
  }();
  return from_env;
}

void set_ternary_gemv_version(int version) {
  if (version < 0 || version > 3)
    throw std::invalid_argument("set_ternary_gemv_version(" + std::to_string(version) + "): expected 0 to 3");
  g_ternary_version.store(version);
}

void ternary_pack(const float* codes, std::size_t M, std::size_t K, std::uint32_t* words) {
  const i64 W = static_cast<i64>(4 * ternary_units(K)), total = static_cast<i64>(M) * W;
  if (total == 0) return;
  trace::launched("ternary_pack");
  ternary_pack_kernel<<<static_cast<unsigned>((total + 255) / 256), 256>>>(codes, static_cast<i64>(M),
                                                                          static_cast<i64>(K), W, words);
  check_launch("ternary_pack");
  decode_pdl_fence();  // the GEMVs read these codes before their wait: the next decode launch is plain
}

namespace {
void check_parts(const TernaryPart* parts, std::size_t count, std::size_t K, std::size_t N) {
  if (count == 0 || count > kTernaryMaxParts)
    throw std::invalid_argument("ternary_gemv: " + std::to_string(count) + " parts (1 to " +
                                std::to_string(kTernaryMaxParts) + " in a launch)");
  if (N == 0) return;
  if (K > kTernaryMaxK || N > 0x7FFFFFFFu)
    throw std::invalid_argument("ternary_gemv: K " + std::to_string(K) + ", N " + std::to_string(N) +
                                ": beyond the kernel's int extents (K <= " + std::to_string(kTernaryMaxK) + ")");
  for (std::size_t p = 0; p < count; ++p)
    if (parts[p].M > 0x7FFFFFFFu)
      throw std::invalid_argument("ternary_gemv: M " + std::to_string(parts[p].M) + ": beyond the kernel's int extents");
}

TernaryV2Options v2_options(int version) {
  TernaryV2Options options;
  // v2pdl; not right after a weight was packed (pdl.hpp: the codes are read before the wait). Else
  // LOCKSTEP_DECODE_PDL decides (ternary_gemv_v2.cu's launch_decode, plain after the pack too).
  options.pdl = version == 3 && !decode_pdl_fenced();
  options.drop_last_unit = g_mutant == DecodeLinearMutant::ternary_last_unit_dropped;
  options.half_warp_join = g_mutant == DecodeLinearMutant::ternary_v2_half_warp_join;
  options.residual_contracted = g_mutant == DecodeLinearMutant::ternary_residual_contracted;
  return options;
}
}  // namespace

void ternary_gemv_parts_norm(const TernaryPart* parts, std::size_t count, std::size_t K, const NormPrologue& norm,
                             std::size_t N) {
  check_parts(parts, count, K, N);
  if (!norm_gemv_fits(N, K))
    throw std::invalid_argument("ternary_gemv (norm prologue): " + std::to_string(N) + " rows of " +
                                std::to_string(K) + ": outside its 1-" + std::to_string(kNormGemvMaxRows) +
                                " rows of at most " + std::to_string(kNormGemvMaxDim));
  TernaryV2Options options = v2_options(ternary_gemv_version());
  options.norm = &norm;
  options.norm_stale_row = mutant() == Mutant::norm_quantize_stale_row;
  ternary_gemv_parts_v2(parts, count, K, nullptr, N, nullptr, options);
}

void ternary_gemv_parts(const TernaryPart* parts, std::size_t count, std::size_t K, const std::int8_t* xq,
                        std::size_t N, const float* step) {
  check_parts(parts, count, K, N);
  if (N == 0) return;
  if (const int version = ternary_gemv_version(); version >= 2) {
    ternary_gemv_parts_v2(parts, count, K, xq, N, step, v2_options(version));
    return;
  }
  Parts a{};
  std::size_t blocks = 0;
  for (std::size_t p = 0; p < count; ++p) {
    a.units[p] = reinterpret_cast<const uint4*>(parts[p].words);
    a.scale[p] = parts[p].scale;
    a.y[p] = parts[p].y;
    a.add[p] = parts[p].sum != nullptr ? parts[p].add : nullptr;
    a.sum[p] = parts[p].add != nullptr ? parts[p].sum : nullptr;
    a.add_first[p] = parts[p].add_first ? 1 : 0;
    a.M[p] = static_cast<int>(parts[p].M);
    a.block0[p] = static_cast<int>(blocks);
    blocks += (parts[p].M + kTernaryWarps - 1) / kTernaryWarps;
  }
  a.count = static_cast<int>(count);
  a.contract = g_mutant == DecodeLinearMutant::ternary_residual_contracted;
  a.pdl_late_wait = decode_pdl_mutant() == 1;
  if (blocks == 0) return;
  if (blocks > 0x7FFFFFFFu) throw std::invalid_argument("ternary_gemv: too many output rows for one launch");
  const std::size_t U = ternary_units(K), Kp = U * 64;
  // Batch rows per chunk: the largest template (1, 2, 4, 8, 16) whose activation codes fit 96 KiB,
  // and no larger than N needs.
  std::size_t cap = (96 * 1024) / Kp;
  if (cap > static_cast<std::size_t>(kTernaryMaxRows)) cap = kTernaryMaxRows;
  std::size_t nb = 1;
  while (nb * 2 <= cap && nb < N) nb *= 2;
  const bool drop = g_mutant == DecodeLinearMutant::ternary_last_unit_dropped;
  const bool pre = decode_fusion();  // the session-8 decode changes, on unless LOCKSTEP_DECODE_FUSION=0
  static constexpr const char* kNames[2][2][kTernaryMaxParts] = {
      {{"ternary_gemv (a warp a row)", "ternary_gemv (a warp a row, 2 parts)", "ternary_gemv (a warp a row, 3 parts)"},
       {"ternary_gemv (a warp a row, prefetched)", "ternary_gemv (a warp a row, prefetched, 2 parts)",
        "ternary_gemv (a warp a row, prefetched, 3 parts)"}},
      {{"ternary_gemv (mutant)", "ternary_gemv (mutant, 2 parts)", "ternary_gemv (mutant, 3 parts)"},
       {"ternary_gemv (mutant, prefetched)", "ternary_gemv (mutant, prefetched, 2 parts)",
        "ternary_gemv (mutant, prefetched, 3 parts)"}}};
  static constexpr const char* kResidualNames[2][2][kTernaryMaxParts] = {
      {{"ternary_gemv (a warp a row, + residual)", "ternary_gemv (a warp a row, 2 parts, + residual)",
        "ternary_gemv (a warp a row, 3 parts, + residual)"},
       {"ternary_gemv (a warp a row, prefetched, + residual)",
        "ternary_gemv (a warp a row, prefetched, 2 parts, + residual)",
        "ternary_gemv (a warp a row, prefetched, 3 parts, + residual)"}},
      {{"ternary_gemv (mutant, + residual)", "ternary_gemv (mutant, 2 parts, + residual)",
        "ternary_gemv (mutant, 3 parts, + residual)"},
       {"ternary_gemv (mutant, prefetched, + residual)", "ternary_gemv (mutant, prefetched, 2 parts, + residual)",
        "ternary_gemv (mutant, prefetched, 3 parts, + residual)"}}};
  bool residual = false;
  for (std::size_t p = 0; p < count; ++p) residual = residual || a.sum[p] != nullptr;
  trace::launched((residual ? kResidualNames : kNames)[drop || a.contract ? 1 : 0][pre ? 1 : 0][count - 1]);
  const unsigned g = static_cast<unsigned>(blocks);
  const int k = static_cast<int>(K), uu = static_cast<int>(U), n = static_cast<int>(N);
  if (nb == 1) launch_ternary<1>(a, g, k, uu, xq, n, step, drop, pre);
  else if (nb == 2) launch_ternary<2>(a, g, k, uu, xq, n, step, drop, pre);
  else if (nb == 4) launch_ternary<4>(a, g, k, uu, xq, n, step, drop, pre);
  else if (nb == 8) launch_ternary<8>(a, g, k, uu, xq, n, step, drop, pre);
  else launch_ternary<16>(a, g, k, uu, xq, n, step, drop, pre);
  check_launch("ternary_gemv");
}

void ternary_gemv(const std::uint32_t* words, std::size_t M, std::size_t K, const std::int8_t* xq, std::size_t N,
                  const float* step, const float* scale, float* y) {
  if (M == 0 || N == 0) return;
  const TernaryPart part{words, M, scale, y};
  ternary_gemv_parts(&part, 1, K, xq, N, step);
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
  const auto* h = reinterpret_cast<const __half*>(w16);
  if (w16 != nullptr && f16_rows_apply(h, x, k) && head_gemv_version() >= 2) {
    HeadGemvOptions options;  // head_gemv.cu (LOCKSTEP_HEAD_GEMV=v2 | v2wide): the same chains, staged rows
    options.wide = head_gemv_version() == 3;
    options.mul_add = g_mutant == DecodeLinearMutant::chain_mul_add;
    head_gemv_v2(w16, x, b, N, M, K, y, options);
  } else if (w16 != nullptr && f16_rows_apply(h, x, k))
    chain_f16_rows(h, x, b, n, m, k, y);
  else if (w16 != nullptr)
    chain_by_rows(h, x, b, n, m, k, y, true);
  else
    chain_by_rows(w32, x, b, n, m, k, y, false);
}

}  // namespace lockstep::cuda::launch
