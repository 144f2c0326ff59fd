// The row kernels' few-rows path, a CTA a row (the decode's 1 to 32 rows),
// as device functions shared by norm.cu's rmsnorm_fwd, quant.cu's
// row_quantize_i8 and the fused norm + quantize of norm.cu: each step is
// written once, so a kernel that chains them computes the bits of the
// kernels it replaces by construction.
//
//   stage_row        every thread of the CTA loads its elements (i ≡ tid mod
//                    the CTA's threads) of a row into shared memory, several
//                    loads in flight (16-byte loads where Vec), each value
//                    also handed to a fold (the absmax);
//   rms_rstd         RMSNorm's rs = rsqrt(sum(x²)/D + eps) of the staged row,
//                    the sum in num::reduce's canonical order (warp c folds
//                    4096-chunk c, lane j its elements j, j+32, ..., the
//                    shuffle-down tree; warp 0 joins the chunk partials as
//                    warp_sum_like does; the canonical NaN);
//   AbsMax, cta_max  the row's max |x| under num::reduce::max's rules
//                    (order-free: a total order on keys, NaN tracked apart),
//                    joined over the CTA's warps in shared memory;
//   RowScale         ops::quantize_rows' m = max2(mx, floor), inv = 127/m,
//                    step = m/127 and code = min2(max2(floor(x·inv + 0.5), -127), 127);
//   store_codes      the codes (and q·step) of a thread's staged elements.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/backend/cuda/batched_copy.cuh"
#include "lockstep/backend/cuda/canonical_warp.cuh"
#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"

namespace lockstep::cuda::detail::row_cta {

constexpr unsigned kThreads = 256;        // 8 warps: up to 8 chunks folded at once
constexpr unsigned kWarps = kThreads / 32;
// Every function below takes the CTA's thread count as its last template
// parameter (Threads, default kThreads: norm.cu's, quant.cu's and act_norm.cu's
// kernels; ternary_gemv_v2.cu's norm prologue runs them on 128). The bits do
// not depend on it: stage_row and store_codes give each element the same
// value whichever thread handles it; rms_rstd's tree is a property of the
// 4096-chunks and the lanes (chunk c is folded by lane j over elements j,
// j+32, ... then the shuffle-down tree, whichever warp runs it; warp 0 joins
// the chunk partials by lane k mod 32), NUMERICS.md "Canonical reductions";
// cta_max's max is order-free. Shared arrays sized kWarps serve any Threads <= kThreads.
constexpr std::size_t kFewRows = 32;      // rows <= this: a CTA a row
constexpr std::size_t kMaxDim = 8192;     // the staged row: 32 KiB of dynamic shared memory (48 KiB, the default limit, is static + dynamic: 12288 failed to launch on the H200)

__device__ __forceinline__ float max2(float a, float b) { return a > b ? a : b; }  // ops::max2
__device__ __forceinline__ float min2(float a, float b) { return a < b ? a : b; }  // ops::min2

// Row xr [D] into smem (D floats, 16-byte aligned); fold(v) on each staged
// value. Vec: xr 16-byte aligned and D % 4 == 0 (the host checks).
template <bool Vec, unsigned Threads = kThreads, class Fold>
__device__ __forceinline__ void stage_row(const float* xr, std::size_t D, float4* smem, Fold fold) {
  const unsigned tid = threadIdx.x;
  if constexpr (Vec) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    batched_copy<4, float4>(
        D / 4, tid, Threads, [x4](std::size_t v) { return x4[v]; },
        [smem, &fold](std::size_t v, float4 a) {
          smem[v] = a;
          fold(a.x);
          fold(a.y);
          fold(a.z);
          fold(a.w);
        });
  } else {
    float* xs = reinterpret_cast<float*>(smem);
    batched_copy<8, float>(
        D, tid, Threads, [xr](std::size_t j) { return xr[j]; },
        [xs, &fold](std::size_t j, float a) {
          xs[j] = a;
          fold(a);
        });
  }
}

// rs of the staged row xs [D] (D <= kMaxDim), in every thread. The caller has
// synchronized after staging; this reads xs only, and ends on a barrier (so
// the caller may overwrite xs afterwards). partial: shared, kWarps * 4 floats;
// s_rs: shared. Blocked: the mutant (Mutant::rmsnorm_rows_blocked_lanes):
// lane j folds a contiguous run of its chunk instead of j, j+32, ...
template <bool Blocked, unsigned Threads = kThreads>
__device__ __forceinline__ float rms_rstd(const float* xs, std::size_t D, float eps, float* partial, float* s_rs) {
  namespace red = num::reduce;
  const unsigned tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
  const std::size_t chunks = D <= red::kChunk ? 1 : (D + red::kChunk - 1) / red::kChunk;
  for (std::size_t c = warp; c < chunks; c += Threads / 32) {
    const std::size_t base = c * red::kChunk;
    const std::size_t len = D - base < red::kChunk ? D - base : red::kChunk;
    const float* xc = xs + base;
    float acc = 0.0f;
    if constexpr (Blocked) {
      const std::size_t per = (len + 31) / 32;
      for (std::size_t t = lane * per; t < len && t < (lane + 1) * per; ++t) acc = num::fma_rn(xc[t], xc[t], acc);
    } else {
#pragma unroll 8
      for (std::size_t t = lane; t < len; t += 32) acc = num::fma_rn(xc[t], xc[t], acc);
    }
    acc = lane_tree(acc);
    if (lane == 0) partial[c] = acc;
  }
  __syncthreads();
  if (warp == 0) {
    float sum;
    if (chunks == 1) {
      sum = partial[0];
    } else {
      float acc2 = 0.0f;
      for (std::size_t k = lane; k < chunks; k += 32) acc2 = __fadd_rn(acc2, partial[k]);
      sum = lane_tree(acc2);
    }
    sum = red::canonical_nan(sum);
    if (lane == 0) *s_rs = num::rsqrt(__fadd_rn(__fdiv_rn(sum, static_cast<float>(D)), eps));
  }
  __syncthreads();
  return *s_rs;
}

// RMSNorm's element: (x·rs)·w, two roundings (ops::RmsNorm::forward).
__device__ __forceinline__ float rms_scaled(float x, float rs, float w) { return __fmul_rn(__fmul_rn(x, rs), w); }
__device__ __forceinline__ float4 rms_scaled(float4 a, float rs, float4 g) {
  return make_float4(rms_scaled(a.x, rs, g.x), rms_scaled(a.y, rs, g.y), rms_scaled(a.z, rs, g.z),
                     rms_scaled(a.w, rs, g.w));
}

struct AbsMax {
  std::int32_t key = num::reduce::detail::order_key(num::float_of(0xFF800000u));  // -inf
  std::uint32_t mag = 0;
  __device__ __forceinline__ void fold(float x) {
    const float v = fabsf(x);
    const std::int32_t kv = num::reduce::detail::order_key(v);
    key = kv > key ? kv : key;
    const std::uint32_t mv = num::bits_of(v) & 0x7FFFFFFFu;
    mag = mv > mag ? mv : mag;
  }
};

// The CTA's max |x| from every thread's AbsMax (in every thread). s_key,
// s_mag: shared, kWarps each; one barrier. FirstWarp: the mutant
// (Mutant::row_quantize_first_warp_max): warp 0's elements only.
template <bool FirstWarp, unsigned Threads = kThreads>
__device__ __forceinline__ float cta_max(AbsMax am, std::int32_t* s_key, std::uint32_t* s_mag) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) {
    const std::int32_t ko = __shfl_xor_sync(0xFFFFFFFFu, am.key, off);
    const std::uint32_t mo = __shfl_xor_sync(0xFFFFFFFFu, am.mag, off);
    am.key = ko > am.key ? ko : am.key;
    am.mag = mo > am.mag ? mo : am.mag;
  }
  if (lane == 0) {
    s_key[warp] = am.key;
    s_mag[warp] = am.mag;
  }
  __syncthreads();
  std::int32_t key = s_key[0];
  std::uint32_t mag = s_mag[0];
  if constexpr (!FirstWarp) {
#pragma unroll
    for (unsigned i = 1; i < Threads / 32; ++i) {
      key = s_key[i] > key ? s_key[i] : key;
      mag = s_mag[i] > mag ? s_mag[i] : mag;
    }
  }
  return mag > 0x7F800000u ? num::float_of(num::reduce::kCanonicalNaN) : num::reduce::detail::from_order_key(key);
}

struct RowScale {
  float inv, st;
  __device__ __forceinline__ RowScale(float mx, float floor_x) {
    const float m = max2(mx, floor_x);
    inv = __fdiv_rn(127.0f, m);
    st = __fdiv_rn(m, 127.0f);
  }
  __device__ __forceinline__ float code(float v) const {
    return min2(max2(floorf(__fadd_rn(__fmul_rn(v, inv), 0.5f)), -127.0f), 127.0f);
  }
};

// The codes (Code: float or std::int8_t) of the thread's staged elements
// (i ≡ tid mod Threads, as stage_row placed them: the thread reads back only
// what it wrote, so no barrier is needed) into cr, and q·step into dr where
// DEQUANT. Vec: K % 4 == 0, cr 4-byte and dr 16-byte aligned.
template <class Code, bool DEQUANT, bool Vec, unsigned Threads = kThreads>
__device__ __forceinline__ void store_codes(const float4* smem, std::size_t K, const RowScale& s, Code* cr,
                                            float* dr) {
  const unsigned tid = threadIdx.x;
  if constexpr (Vec) {
#pragma unroll 4
    for (std::size_t v = tid; v < K / 4; v += Threads) {
      const float4 a = smem[v];
      const float q0 = s.code(a.x), q1 = s.code(a.y), q2 = s.code(a.z), q3 = s.code(a.w);
      if constexpr (sizeof(Code) == 1) {
        char4 c;
        c.x = static_cast<signed char>(q0);
        c.y = static_cast<signed char>(q1);
        c.z = static_cast<signed char>(q2);
        c.w = static_cast<signed char>(q3);
        reinterpret_cast<char4*>(cr)[v] = c;
      } else {
        cr[4 * v] = static_cast<Code>(q0);
        cr[4 * v + 1] = static_cast<Code>(q1);
        cr[4 * v + 2] = static_cast<Code>(q2);
        cr[4 * v + 3] = static_cast<Code>(q3);
      }
      if constexpr (DEQUANT)
        reinterpret_cast<float4*>(dr)[v] =
            make_float4(__fmul_rn(q0, s.st), __fmul_rn(q1, s.st), __fmul_rn(q2, s.st), __fmul_rn(q3, s.st));
    }
  } else {
    const float* xs = reinterpret_cast<const float*>(smem);
#pragma unroll 4
    for (std::size_t k = tid; k < K; k += Threads) {
      const float q = s.code(xs[k]);
      cr[k] = static_cast<Code>(q);
      if constexpr (DEQUANT) dr[k] = __fmul_rn(q, s.st);
    }
  }
}

// RMSNorm of a staged row (the caller staged it with stage_row and
// synchronized) and the scale of its codes: rs as rms_rstd takes it (into
// *rstd_r unless null), y = (x·rs)·w into yr (unless null) and over the staged
// row (each thread its own elements, folding |y| into its max), then the CTA's
// max and its RowScale — rmsnorm_fwd's y and rstd, and row_quantize_i8's
// scale of that y. Skippable: yr and rstd_r may be null (ternary_gemv_v2.cu's
// prologue: only CTA 0 writes them); false, the standalone kernels' code as it
// was (no test of the pointers). StaleRow: the mutant (Mutant::norm_quantize_stale_row): y
// is not written back over the staged row, so the codes are those of x. Vec:
// D % 4 == 0, w and yr 16-byte aligned. Shared: partial kWarps·4 floats,
// s_rs, s_key and s_mag kWarps each. Blocked: rms_rstd's mutant (lanes fold
// contiguous runs), for the prologue's emulator test.
template <bool Vec, bool StaleRow, unsigned Threads = kThreads, bool Skippable = false, bool Blocked = false>
__device__ __forceinline__ RowScale norm_scale_staged(float4* row_smem, std::size_t D, float eps,
                                                      const float* __restrict__ w, float* yr, float* rstd_r,
                                                      float floor_x, float* partial, float* s_rs, std::int32_t* s_key,
                                                      std::uint32_t* s_mag) {
  const unsigned tid = threadIdx.x;
  const float rs = rms_rstd<Blocked, Threads>(reinterpret_cast<const float*>(row_smem), D, eps, partial, s_rs);
  if (tid == 0 && (!Skippable || rstd_r != nullptr)) *rstd_r = rs;
  AbsMax am;
  if constexpr (Vec) {
    const float4* w4 = reinterpret_cast<const float4*>(w);
    float4* y4 = reinterpret_cast<float4*>(yr);
#pragma unroll 4
    for (std::size_t v = tid; v < D / 4; v += Threads) {
      const float4 b = rms_scaled(row_smem[v], rs, w4[v]);
      if (!Skippable || y4 != nullptr) y4[v] = b;
      if constexpr (!StaleRow) row_smem[v] = b;
      am.fold(b.x);
      am.fold(b.y);
      am.fold(b.z);
      am.fold(b.w);
    }
  } else {
    float* xs = reinterpret_cast<float*>(row_smem);
#pragma unroll 4
    for (std::size_t j = tid; j < D; j += Threads) {
      const float b = rms_scaled(xs[j], rs, w[j]);
      if (!Skippable || yr != nullptr) yr[j] = b;
      if constexpr (!StaleRow) xs[j] = b;
      am.fold(b);
    }
  }
  return RowScale(cta_max<false, Threads>(am, s_key, s_mag), floor_x);
}

// RMSNorm and the int8 codes of its output from a staged row (the caller
// staged it with stage_row and synchronized): norm_scale_staged's y and rstd,
// then the codes of y and the row's step — rmsnorm_fwd's y and rstd, then
// row_quantize_i8's codes and step of that y, bit for bit (norm.cu's
// rmsnorm_quantize_i8; act_norm.cu's ReLU²·up + the FFN sub-norm). Vec: D %
// 4 == 0, w and yr 16-byte and codes_r 4-byte aligned. Shared: as
// norm_scale_staged.
template <bool Vec, bool StaleRow, unsigned Threads = kThreads>
__device__ __forceinline__ void norm_quantize_staged(float4* row_smem, std::size_t D, float eps,
                                                     const float* __restrict__ w, float* yr, float* rstd_r,
                                                     float floor_x, std::int8_t* codes_r, float* step_r,
                                                     float* partial, float* s_rs, std::int32_t* s_key,
                                                     std::uint32_t* s_mag) {
  const RowScale sc = norm_scale_staged<Vec, StaleRow, Threads>(row_smem, D, eps, w, yr, rstd_r, floor_x, partial,
                                                                s_rs, s_key, s_mag);
  store_codes<std::int8_t, false, Vec, Threads>(row_smem, D, sc, codes_r, nullptr);
  if (threadIdx.x == 0) *step_r = sc.st;
}

}  // namespace lockstep::cuda::detail::row_cta
