// The int8 GEMM kernels (C = A·Bᵀ in int32, int8_gemm_launch.hpp): DP4A and
// tensor-core IMMA (mma.sync m16n8k32 s8). Templates on the bug a mutant
// plants (launch::Int8Mut), so the clean and the mutated kernels are one text.
// Both zero-pad every ragged tile (rows past N or M, codes past K) in shared
// memory, so a padded product adds exact zeros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "lockstep/backend/cuda/int8_gemm_launch.hpp"

namespace lockstep::cuda::int8k {

using launch::kInt8Dp4aInt16;
using launch::kInt8ImmaKTailDropped;
using launch::kInt8ImmaLastColumn;

// --- DP4A ------------------------------------------------------------------------

constexpr int kDp4aTile = 64;   // 64×64 cells a block
constexpr int kDp4aWords = 16;  // k tile: 16 words of 4 codes

// Codes k..k+3 of a row as one little-endian word, codes at or past K as 0.
__device__ __forceinline__ int guarded_word(const std::int8_t* row, std::size_t k, std::size_t K) {
  unsigned w = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    if (k + i < K) w |= static_cast<unsigned>(static_cast<std::uint8_t>(row[k + i])) << (8 * i);
  return static_cast<int>(w);
}

// 256 threads: thread (ty, tx) owns rows n0 + ty + 16i and columns m0 + tx + 16j.
template <bool WORDS, int MUT>
__global__ void __launch_bounds__(256) dp4a_kernel(const std::int8_t* __restrict__ A, const std::int8_t* __restrict__ B,
                                                   std::int32_t* __restrict__ C, int N, int M, std::size_t K) {
  __shared__ int As[kDp4aWords][kDp4aTile + 1];
  __shared__ int Bs[kDp4aWords][kDp4aTile + 1];
  const int tx = static_cast<int>(threadIdx.x & 15), ty = static_cast<int>(threadIdx.x >> 4);
  const int n0 = static_cast<int>(blockIdx.y) * kDp4aTile, m0 = static_cast<int>(blockIdx.x) * kDp4aTile;
  using Acc = std::conditional_t<MUT == kInt8Dp4aInt16, short, int>;
  Acc acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0;
  for (std::size_t k0 = 0; k0 < K; k0 += 4 * kDp4aWords) {
    for (int e = static_cast<int>(threadIdx.x); e < kDp4aTile * kDp4aWords; e += 256) {
      const int r = e >> 4, w = e & 15;
      const std::size_t k = k0 + static_cast<std::size_t>(w) * 4;
      const int n = n0 + r, m = m0 + r;
      int va = 0, vb = 0;
      if (n < N && k < K) {
        const std::int8_t* row = A + static_cast<std::size_t>(n) * K;
        va = WORDS ? *reinterpret_cast<const int*>(row + k) : guarded_word(row, k, K);
      }
      if (m < M && k < K) {
        const std::int8_t* row = B + static_cast<std::size_t>(m) * K;
        vb = WORDS ? *reinterpret_cast<const int*>(row + k) : guarded_word(row, k, K);
      }
      As[w][r] = va;
      Bs[w][r] = vb;
    }
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kDp4aWords; ++w) {
      int a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[w][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[w][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = static_cast<Acc>(__dp4a(a[i], b[j], static_cast<int>(acc[i][j])));
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + ty + 16 * i, m = m0 + tx + 16 * j;
      if (n < N && m < M) C[static_cast<std::size_t>(n) * M + m] = static_cast<int>(acc[i][j]);
    }
}

// --- IMMA (mma.sync m16n8k32 s8) --------------------------------------------------

constexpr int kImmaK = 64;       // codes per k tile
constexpr int kRowBytes = 80;    // a tile row in shared memory: 64 codes + 16 bytes of pad
constexpr int kImmaStages = 4;   // cp.async pipeline depth

template <int BM, int BN>
struct ImmaShape {
  static constexpr int warps_m = BM / 64, warps_n = BN / 64;
  static constexpr int threads = 32 * warps_m * warps_n;
  static constexpr int stage_bytes = (BM + BN) * kRowBytes;
  static constexpr int smem_bytes = kImmaStages * stage_bytes;
};

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// 16 bytes global -> shared; src_bytes < 16 fills the rest with zeros (0: all zeros, nothing read).
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
// c += a (16×32, row) · b (32×8, col), s8 × s8 -> s32.
__device__ __forceinline__ void mma_s8(int (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One block: BM×BN cells (BM rows of A, BN rows of B), warps of 64×64 cells.
// The block grid is 1-D, walked in groups of 8 block rows so that blocks
// running together share their A rows and B rows in L2. ASYNC: cp.async
// 16-byte loads (K % 16 == 0, A and B 16-byte aligned); otherwise guarded
// byte loads stored to shared memory by the threads. pairs: C's two adjacent
// cells of a fragment stored as one 8-byte word (M even, C 8-byte aligned).
//
// SPLIT: split-K, for outputs too small to fill the device (a weight
// gradient's 768×768 over 16384 tokens): block row y of the grid sums k tiles
// [y·per_split, (y+1)·per_split) and adds its cells into C with integer
// atomics, C zeroed first by the launcher. Integer addition is associative:
// the same int32 in any order, so the sum is exact and deterministic.
template <int BM, int BN, bool ASYNC, int MUT, bool SPLIT>
__global__ void __launch_bounds__(ImmaShape<BM, BN>::threads, 1)
    imma_kernel(const std::int8_t* __restrict__ A, const std::int8_t* __restrict__ B, std::int32_t* __restrict__ C,
                int N, int M, int K, bool pairs, int per_split) {
  using S = ImmaShape<BM, BN>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int wr = warp / S::warps_n, wc = warp % S::warps_n;

  // Grouped block order.
  const int tiles_n = (N + BM - 1) / BM, tiles_m = (M + BN - 1) / BN;
  const int id = static_cast<int>(blockIdx.x);
  const int per_group = 8 * tiles_m;
  const int first = (id / per_group) * 8;
  const int rows_in_group = tiles_n - first < 8 ? tiles_n - first : 8;
  const int n0 = (first + (id % per_group) % rows_in_group) * BM;
  const int m0 = ((id % per_group) / rows_in_group) * BN;

  const int KT_all = MUT == kInt8ImmaKTailDropped ? K / kImmaK : (K + kImmaK - 1) / kImmaK;
  const int kt0 = SPLIT ? static_cast<int>(blockIdx.y) * per_split : 0;
  const int kt_end = SPLIT ? (kt0 + per_split < KT_all ? kt0 + per_split : KT_all) : KT_all;
  const int KT = kt_end > kt0 ? kt_end - kt0 : 0;  // this block's k tiles: kt0 + [0, KT)

  // Tile kt of both operands into stage s: (BM + BN) rows of 4 chunks of 16 codes.
  const auto load = [&](int kt, int s) {
    unsigned char* stage = smem + s * S::stage_bytes;
    const int k0 = (kt0 + kt) * kImmaK;
    constexpr int chunks = (BM + BN) * 4;
#pragma unroll
    for (int e0 = 0; e0 < chunks; e0 += S::threads) {
      const int e = e0 + static_cast<int>(threadIdx.x);
      const bool is_a = e < BM * 4;
      const int ee = is_a ? e : e - BM * 4;
      const int r = ee >> 2, c = ee & 3;
      const std::int8_t* base = is_a ? A : B;
      const int rows = is_a ? N : M;
      const int gr = (is_a ? n0 : m0) + r;
      const int k = k0 + c * 16;
      unsigned char* dst = stage + (is_a ? r : BM + r) * kRowBytes + c * 16;
      if constexpr (ASYNC) {
        const bool ok = gr < rows && k < K;
        const std::int8_t* src = ok ? base + static_cast<std::size_t>(gr) * K + k : base;
        cp_async16(shared_address(dst), src, ok ? 16 : 0);
      } else {
        unsigned w[4] = {0u, 0u, 0u, 0u};
        if (gr < rows) {
          const std::int8_t* row = base + static_cast<std::size_t>(gr) * K;
#pragma unroll
          for (int i = 0; i < 16; ++i)
            if (k + i < K) w[i >> 2] |= static_cast<unsigned>(static_cast<std::uint8_t>(row[k + i])) << (8 * (i & 3));
        }
        *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
      }
    }
  };

  int acc[4][8][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0;

#pragma unroll
  for (int s = 0; s < kImmaStages - 1; ++s) {
    if (s < KT) load(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<kImmaStages - 2>();
    __syncthreads();  // tile kt is in; every warp is done with the stage refilled next
    {
      const int next = kt + kImmaStages - 1;
      if (next < KT) load(next, next % kImmaStages);
      cp_async_commit();
    }
    const unsigned char* stage = smem + (kt % kImmaStages) * S::stage_bytes;
    const unsigned char* sa = stage + (wr * 64) * kRowBytes;
    const unsigned char* sb = stage + (BM + wc * 64) * kRowBytes;
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      unsigned a[4][4], b[8][2];
      // A fragments (16 rows × 32 codes): matrices (rows 0-7 | 8-15) × (codes 0-15 | 16-31).
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        const int row = mi * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldmatrix_x4(shared_address(sa + row * kRowBytes + ks * 32 + (lane >> 4) * 16), a[mi][0], a[mi][1], a[mi][2],
                    a[mi][3]);
      }
      // B fragments, two of 8 columns a load: (cols 0-7: codes 0-15, 16-31), (cols 8-15: ...).
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const int row = p * 16 + (lane & 7) + (lane >> 4) * 8;
        ldmatrix_x4(shared_address(sb + row * kRowBytes + ks * 32 + ((lane >> 3) & 1) * 16), b[2 * p][0],
                    b[2 * p][1], b[2 * p + 1][0], b[2 * p + 1][1]);
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int nj = 0; nj < 8; ++nj) mma_s8(acc[mi][nj], a[mi], b[nj][0], b[nj][1]);
    }
  }
  cp_async_wait<0>();

  // Fragment cell (g, 2t..2t+1) and (g + 8, 2t..2t+1) of each 16×8 block.
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int nj = 0; nj < 8; ++nj) {
      const int col = m0 + wc * 64 + nj * 8 + t * 2;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = n0 + wr * 64 + mi * 16 + g + h * 8;
        if (row >= N || col >= M) continue;
        std::int32_t* dst = C + static_cast<std::size_t>(row) * M + col;
        const int v0 = acc[mi][nj][2 * h], v1 = acc[mi][nj][2 * h + 1];
        if constexpr (SPLIT) {
          if (col + 1 < M) {
            atomicAdd(dst, v0);
            atomicAdd(dst + 1, v1);
          } else if (MUT != kInt8ImmaLastColumn) {
            atomicAdd(dst, v0);
          }
          continue;
        }
        if (col + 1 < M) {
          if (pairs) {
            *reinterpret_cast<int2*>(dst) = make_int2(v0, v1);
          } else {
            dst[0] = v0;
            dst[1] = v1;
          }
        } else if (MUT != kInt8ImmaLastColumn) {
          dst[0] = v0;
        }
      }
    }
}

}  // namespace lockstep::cuda::int8k
