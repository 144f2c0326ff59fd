// The canonical float GEMM's shape-fitted block tiles (gemm_launch.hpp,
// detail::gemm_tiled; chosen by gemm.cu's tile rule). The kernel template
// lives here so that two translation units instantiate it: gemm_tiled.cu the
// clean kernels (MUTABLE = false), gemm_tiled_mutant.cu the gates' mutants
// (MUTABLE = true; they compile in parallel, and the clean kernels' code is
// exactly what it was before the mutants existed: every mutant branch folds
// away when MUTABLE is false).
//
// Same contract as gemm.cu's kernel: every output cell is the chain
// acc = +0; acc = fma(A(i,k), B(k,j), acc) for k ascending, one __fmaf_rn per
// step, never split over k, then the canonical NaN and the epilogue. Only the
// tiling differs, and the tiling decides who computes which cells, nothing
// else:
//   * a block of 256 threads (a 16×16 thread grid) owns a BM×BN tile of C with
//     BM = 64·P + 16·Q and BN = 64·PN + 16·QN; thread (tx, ty) owns RM = 4P + Q
//     rows (p·64 + ty·4 + {0..3} for p < P, then P·64 + q·16 + ty for q < Q)
//     and RN = 4·PN + QN columns (n·64 + tx·4 + {0..3} for n < PN, then
//     PN·64 + q·16 + tx for q < QN): 16-byte shared-memory reads for the
//     groups of 4, broadcast scalar reads for the single rows and columns;
//   * the block tile's height is what the weight gradients of the 768-wide
//     layers need: without split-K their only parallelism is their cells, and
//     a 128×128 tile leaves the device a partial second round (3072×768: 144
//     tiles for 132 SMs) or mostly idle (768×768: 36 tiles). 144×128 tiles
//     give 3072×768 exactly 132 blocks, 128×144 give 768×3072 132, 112×128
//     give 2304×768 126, 48×128 give 768×768 96;
//   * a warp covers 8 (tx) × 4 (ty) threads, so each k step's reads are one
//     128-byte wavefront for B and one for each A group (the 16×2 warp shape
//     of gemm.cu needs two for B);
//   * k walks in tiles of BK staged through two shared-memory buffers (the
//     next tile's global loads are in flight during the current tile's FFMA,
//     one barrier per tile); the last tile runs only its K % BK steps (zero
//     padding is not neutral: fma(0, 0, -0) = +0); rows and columns past the
//     edge load zeros and are never stored.
//
// Mutants (mutant.hpp; detail::Mut in gemm_launch.hpp), in the MUTABLE
// instantiation only, chosen by the kernel's `mut` argument — the same four
// bugs as gemm.cu's kernel:
//   kAssign     acc = a·b (__fmul_rn) instead of the fma;
//   kNoGuard    no k guard on the loads (a row's tail reads on into the next
//               row, or past the last k row; clamped into the matrix so the
//               read itself stays in bounds), and the last k tile runs all BK
//               steps;
//   kSkipLast   the last output column is never stored;
//   kNoBarrier  one staging buffer: the next tile is stored over the current
//               one before the FFMA reads it, with no barrier in between.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lockstep/backend/cuda/gemm_epilogue.cuh"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"

namespace lockstep::cuda::launch::detail {
namespace {

constexpr int kThreads = 256;

template <int P_, int Q_, int PN_, int QN_, int BK_, int MINB_>
struct TCfg {
  static constexpr int P = P_, Q = Q_, PN = PN_, QN = QN_, BK = BK_, MINB = MINB_;
  static constexpr int RM = 4 * P + Q, RN = 4 * PN + QN;
  static constexpr int BM = 64 * P + 16 * Q, BN = 64 * PN + 16 * QN;
  static constexpr int LDA = BM + 4, LDB = BN + 4;  // padded staged rows, 16-byte aligned
  static_assert(BM % 4 == 0 && BK % 4 == 0 && LDA % 4 == 0 && LDB % 4 == 0);
};

// The configurations, by the override number of gemm_tile_override.
using T144 = TCfg<2, 1, 2, 0, 8, 1>;    // 3: 144×128, 9×8 cells per thread
using T112 = TCfg<1, 3, 2, 0, 8, 2>;    // 4: 112×128, 7×8
using T48 = TCfg<0, 3, 2, 0, 16, 2>;    // 5: 48×128, 3×8
using T128W = TCfg<2, 0, 2, 1, 8, 1>;   // 6: 128×144, 8×9 (v3; until v2, 6 was 128×128 with k tiles of 8)
using T128K = TCfg<2, 0, 2, 0, 16, 2>;  // 7: 128×128, 8×8, k tiles of 16


// One operand's staged tile: rows r0..r0+BR-1 of its outer index (i of A, j
// of B) by k0..k0+BK-1. KC: element (r, k) at p[r*ld + k], else p[k*ld + r].
// The tile is cut into chunks of W elements along the contiguous index (W = 4:
// one 16-byte load, whole vector in or out of the matrix by the launcher's
// alignment and extent check), chunk c to thread c % 256; consecutive
// threads take consecutive chunks (coalesced). Stored transposed, S[k*LD + r].
template <int BR, int BK, int LD, bool KC, bool VEC>
struct Stage {
  static constexpr int W = VEC ? 4 : 1;
  static constexpr int CH = BR * BK / W;
  static constexpr int N = (CH + kThreads - 1) / kThreads;
  float v[N][W];

  __device__ __forceinline__ static void pos(int c, int& r, int& k) {
    if constexpr (KC) {
      constexpr int per = BK / W;
      r = c / per, k = (c % per) * W;
    } else {
      constexpr int per = BR / W;
      k = c / per, r = (c % per) * W;
    }
  }
  // The offset of element (rr, kk). no_guard: the kNoGuard mutant (a
  // constant false in the clean kernels): past k = K the load reads on (the
  // next row's head, or rows past the last), clamped to the matrix's last W
  // elements so that the read itself stays in bounds.
  __device__ __forceinline__ static std::size_t at(std::size_t ld, int R, int K, int rr, int kk, bool no_guard) {
    const std::size_t o = KC ? static_cast<std::size_t>(rr) * ld + kk : static_cast<std::size_t>(kk) * ld + rr;
    if (!no_guard) return o;
    const std::size_t last = KC ? static_cast<std::size_t>(R - 1) * ld + static_cast<std::size_t>(K - W)
                                : static_cast<std::size_t>(K - 1) * ld + static_cast<std::size_t>(R - W);
    return o < last ? o : last;
  }
  __device__ __forceinline__ void load(const float* __restrict__ p, std::size_t ld, int R, int K, int r0, int k0,
                                       int tid, bool no_guard) {
#pragma unroll
    for (int e = 0; e < N; ++e) {
      const int c = tid + e * kThreads;
      if (CH % kThreads != 0 && c >= CH) break;
      int r, k;
      pos(c, r, k);
      const int rr = r0 + r, kk = k0 + k;
      if constexpr (VEC) {
        if (rr < R && (no_guard || kk < K)) {
          const float4 q = *reinterpret_cast<const float4*>(p + at(ld, R, K, rr, kk, no_guard));
          v[e][0] = q.x, v[e][1] = q.y, v[e][2] = q.z, v[e][3] = q.w;
        } else {
          v[e][0] = v[e][1] = v[e][2] = v[e][3] = 0.0f;
        }
      } else {
        v[e][0] = (rr < R && (no_guard || kk < K)) ? p[at(ld, R, K, rr, kk, no_guard)] : 0.0f;
      }
    }
  }
  __device__ __forceinline__ void store(float* S, int tid) const {
#pragma unroll
    for (int e = 0; e < N; ++e) {
      const int c = tid + e * kThreads;
      if (CH % kThreads != 0 && c >= CH) break;
      int r, k;
      pos(c, r, k);
      if constexpr (VEC && !KC) {
        *reinterpret_cast<float4*>(S + k * LD + r) = make_float4(v[e][0], v[e][1], v[e][2], v[e][3]);
      } else {
#pragma unroll
        for (int w = 0; w < W; ++w) S[(k + w) * LD + r] = v[e][w];  // W > 1 only when KC
      }
    }
  }
};

// The accumulator row r of a thread, relative to the tile (see the header).
template <class C>
__device__ __forceinline__ int row_of(int r, int ty) {
  return r < 4 * C::P ? (r / 4) * 64 + ty * 4 + r % 4 : C::P * 64 + (r - 4 * C::P) * 16 + ty;
}

// k steps [0, steps) of one staged tile pair into the accumulators. assign:
// the kAssign mutant (a constant false in the clean kernels).
template <class C, bool FULL>
__device__ __forceinline__ void mac_tile(const float* __restrict__ As, const float* __restrict__ Bs, int tx, int ty,
                                         int steps, bool assign, float (&acc)[C::RM][C::RN]) {
#pragma unroll
  for (int kk = 0; kk < C::BK; ++kk) {
    if (!FULL && kk >= steps) break;
    float a[C::RM], b[C::RN];
    const float* ar = As + kk * C::LDA;
    const float* br = Bs + kk * C::LDB;
#pragma unroll
    for (int p = 0; p < C::P; ++p) {
      const float4 av = *reinterpret_cast<const float4*>(ar + p * 64 + ty * 4);
      a[4 * p] = av.x, a[4 * p + 1] = av.y, a[4 * p + 2] = av.z, a[4 * p + 3] = av.w;
    }
#pragma unroll
    for (int q = 0; q < C::Q; ++q) a[4 * C::P + q] = ar[C::P * 64 + q * 16 + ty];
#pragma unroll
    for (int n = 0; n < C::PN; ++n) {
      const float4 bv = *reinterpret_cast<const float4*>(br + n * 64 + tx * 4);
      b[4 * n] = bv.x, b[4 * n + 1] = bv.y, b[4 * n + 2] = bv.z, b[4 * n + 3] = bv.w;
    }
#pragma unroll
    for (int q = 0; q < C::QN; ++q) b[4 * C::PN + q] = br[C::PN * 64 + q * 16 + tx];
#pragma unroll
    for (int r = 0; r < C::RM; ++r)
#pragma unroll
      for (int c = 0; c < C::RN; ++c)
        acc[r][c] = assign ? __fmul_rn(a[r], b[c]) : __fmaf_rn(a[r], b[c], acc[r][c]);
  }
}

// MUTABLE = false: the clean kernel (`mut` is ignored). MUTABLE = true: the
// bug named by `mut` (a detail::Mut) is planted.
template <class C, bool AKC, bool BKC, bool VA, bool VB, bool MUTABLE>
__global__ void __launch_bounds__(kThreads, C::MINB)
    tiled_kernel(int I, int J, int K, const float* __restrict__ A, std::size_t lda, const float* __restrict__ B,
                 std::size_t ldb, float* __restrict__ Cm, std::size_t ldc, Epi epi, int mut) {
  constexpr int BK = C::BK;
  const int m = MUTABLE ? mut : kClean;
  __shared__ __align__(16) float As[2][BK * C::LDA];
  __shared__ __align__(16) float Bs[2][BK * C::LDB];
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int tx = (warp & 1) * 8 + (lane & 7), ty = (warp >> 1) * 4 + (lane >> 3);
  const int i0 = static_cast<int>(blockIdx.y) * C::BM, j0 = static_cast<int>(blockIdx.x) * C::BN;

  Stage<C::BM, BK, C::LDA, AKC, VA> sa;
  Stage<C::BN, BK, C::LDB, BKC, VB> sb;

  float acc[C::RM][C::RN];
#pragma unroll
  for (int r = 0; r < C::RM; ++r)
#pragma unroll
    for (int c = 0; c < C::RN; ++c) acc[r][c] = 0.0f;

  const bool no_guard = m == kNoGuard, assign = m == kAssign, no_barrier = m == kNoBarrier;
  const int tiles = (K + BK - 1) / BK;
  if (tiles > 0) {
    sa.load(A, lda, I, K, i0, 0, tid, no_guard);
    sb.load(B, ldb, J, K, j0, 0, tid, no_guard);
    sa.store(As[0], tid);
    sb.store(Bs[0], tid);
    __syncthreads();
  }
  for (int t = 0; t < tiles; ++t) {
    const int cur = no_barrier ? 0 : (t & 1);
    const bool more = t + 1 < tiles;
    if (more) {
      sa.load(A, lda, I, K, i0, (t + 1) * BK, tid, no_guard);
      sb.load(B, ldb, J, K, j0, (t + 1) * BK, tid, no_guard);
    }
    if (no_barrier && more) {
      // The bug: the next tile lands on the current one before it is used.
      sa.store(As[0], tid);
      sb.store(Bs[0], tid);
    }
    const int steps = no_guard ? BK : K - t * BK;
    if (steps >= BK)
      mac_tile<C, true>(As[cur], Bs[cur], tx, ty, BK, assign, acc);
    else
      mac_tile<C, false>(As[cur], Bs[cur], tx, ty, steps, assign, acc);
    if (more) {
      if (!no_barrier) {
        sa.store(As[cur ^ 1], tid);
        sb.store(Bs[cur ^ 1], tid);
      }
      __syncthreads();
    }
  }

  // Epilogue (as gemm.cu): canonical NaN, then the bias or the scales, then
  // the store.
  const int jlimit = m == kSkipLast ? J - 1 : J;
  const bool vec_store = (ldc & 3) == 0 && (reinterpret_cast<std::uintptr_t>(Cm) & 15) == 0;
  const float scale = epi.row_scale != nullptr ? *epi.scale : 0.0f;
#pragma unroll
  for (int r = 0; r < C::RM; ++r) {
    const int i = i0 + row_of<C>(r, ty);
    if (i >= I) continue;
    const float rs = epi.row_scale != nullptr ? epi.row_scale[i] : 0.0f;
    float* crow = Cm + static_cast<std::size_t>(i) * ldc;
#pragma unroll
    for (int n = 0; n < C::PN; ++n) {
      const int jb = j0 + n * 64 + tx * 4;
      float v[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) v[c] = epilogue_cell(acc[r][n * 4 + c], epi, jb + c, J, rs, scale);
      store_four(crow, jb, v, vec_store, jlimit);
    }
#pragma unroll
    for (int q = 0; q < C::QN; ++q) {  // the single columns
      const int j = j0 + C::PN * 64 + q * 16 + tx;
      const float x = epilogue_cell(acc[r][4 * C::PN + q], epi, j, J, rs, scale);
      if (j < jlimit) crow[j] = x;
    }
  }
}

template <class C, bool AKC, bool BKC, bool MUTABLE>
bool launch_cfg(int cfg, const TiledArgs& g, int mut) {
  const unsigned gx = static_cast<unsigned>((g.J + C::BN - 1) / C::BN);
  const unsigned gy = static_cast<unsigned>((g.I + C::BM - 1) / C::BM);
  if (gy > 65535u) return false;
  const dim3 grid(gx, gy);
  const Epi epi{g.bias, g.row_scale, g.scale};
  static const char* const path[2] = {gemm_path(cfg, AKC, BKC, false, false, MUTABLE),
                                      gemm_path(cfg, AKC, BKC, true, true, MUTABLE)};
  trace::launched(path[g.va && g.vb ? 1 : 0]);
  if (g.va && g.vb)
    tiled_kernel<C, AKC, BKC, true, true, MUTABLE>
        <<<grid, kThreads>>>(g.I, g.J, g.K, g.A, g.lda, g.B, g.ldb, g.C, g.ldc, epi, mut);
  else
    tiled_kernel<C, AKC, BKC, false, false, MUTABLE>
        <<<grid, kThreads>>>(g.I, g.J, g.K, g.A, g.lda, g.B, g.ldb, g.C, g.ldc, epi, mut);
  return true;
}

template <class C, bool MUTABLE>
bool launch_layout(int cfg, const TiledArgs& g, int mut) {
  if (g.akc && g.bkc) return launch_cfg<C, true, true, MUTABLE>(cfg, g, mut);
  if (g.akc) return launch_cfg<C, true, false, MUTABLE>(cfg, g, mut);
  if (g.bkc) return launch_cfg<C, false, true, MUTABLE>(cfg, g, mut);
  return launch_cfg<C, false, false, MUTABLE>(cfg, g, mut);
}

// Launches configuration cfg (3..7); false (nothing launched) if there is
// none or it cannot take the shape.
template <bool MUTABLE>
bool launch_tiled(int cfg, const TiledArgs& g, int mut) {
  switch (cfg) {
    case 3: return launch_layout<T144, MUTABLE>(3, g, mut);
    case 4: return launch_layout<T112, MUTABLE>(4, g, mut);
    case 5: return launch_layout<T48, MUTABLE>(5, g, mut);
    case 6: return launch_layout<T128W, MUTABLE>(6, g, mut);
    case 7: return launch_layout<T128K, MUTABLE>(7, g, mut);
    default: return false;
  }
}

}  // namespace
}  // namespace lockstep::cuda::launch::detail
