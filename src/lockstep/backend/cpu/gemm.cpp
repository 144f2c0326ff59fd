#include "lockstep/backend/cpu/gemm.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <vector>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#include "lockstep/num/fp.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::cpu {
namespace {

// ---------------------------------------------------------------------------
// Micro-kernels. Each computes a tile of R rows × W columns of C over k in
// [k0, k1), holding the accumulators in vector registers: acc[r][v] +=
// broadcast(A(i0+r, k)) * Bp[k][v] as one fma per lane, k ascending. The
// chain per cell is exactly the reference's.
// ---------------------------------------------------------------------------
#if defined(__AVX512F__)
struct Isa {
  static constexpr std::size_t R = 4, NV = 4, L = 16, W = NV * L;  // 16 zmm accumulators
  using V = __m512;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V bcast(float a) { return _mm512_set1_ps(a); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
};
#elif defined(__AVX2__) && defined(__FMA__)
struct Isa {
  static constexpr std::size_t R = 6, NV = 2, L = 8, W = NV * L;  // 12 ymm accumulators
  using V = __m256;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V bcast(float a) { return _mm256_set1_ps(a); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
};
#else
struct Isa {  // portable: one float per "vector"
  static constexpr std::size_t R = 4, NV = 8, L = 1, W = NV * L;
  using V = float;
  static V zero() { return 0.0f; }
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  static V bcast(float a) { return a; }
  static V fma(V a, V b, V c) { return num::fma_rn(a, b, c); }
  static V add(V a, V b) { return a + b; }
};
#endif

constexpr std::size_t kDepth = 256;  // k per block (the accumulator parks in C between blocks)

// Full tile: rows [i0, i0+Rn) (Rn <= R; missing rows compute on row i0 and
// are not stored), columns [j0, j0+W) of the padded C tile buffer `ct`
// (row stride W), k in [k0, k1). `first` starts the chain at +0.
template <std::size_t Rn>
void tile(const float* A, std::size_t sai, std::size_t sak, std::size_t i0, const float* Bp, std::size_t ldb,
          std::size_t j0, std::size_t k0, std::size_t k1, float* ct, bool first) {
  using V = Isa::V;
  V acc[Rn][Isa::NV];
  for (std::size_t r = 0; r < Rn; ++r)
    for (std::size_t v = 0; v < Isa::NV; ++v) acc[r][v] = first ? Isa::zero() : Isa::load(ct + r * Isa::W + v * Isa::L);
  const float* a0 = A + i0 * sai;
  for (std::size_t k = k0; k < k1; ++k) {
    const float* b = Bp + k * ldb + j0;
    V bv[Isa::NV];
    // Fully unrolled so the accumulators stay in registers at any -O level.
#pragma GCC unroll 16
    for (std::size_t v = 0; v < Isa::NV; ++v) bv[v] = Isa::load(b + v * Isa::L);
#pragma GCC unroll 16
    for (std::size_t r = 0; r < Rn; ++r) {
      const V a = Isa::bcast(a0[r * sai + k * sak]);
#pragma GCC unroll 16
      for (std::size_t v = 0; v < Isa::NV; ++v) acc[r][v] = Isa::fma(a, bv[v], acc[r][v]);
    }
  }
  for (std::size_t r = 0; r < Rn; ++r)
    for (std::size_t v = 0; v < Isa::NV; ++v) Isa::store(ct + r * Isa::W + v * Isa::L, acc[r][v]);
}

// Rows [i0, i1) of C, columns [jb, J) from column tile jb / W up to tile
// je / W: for each column tile, walk k in blocks; the tile's partial sums live
// in a small buffer between blocks (same chain per cell).
// Bp holds columns from bcol0 on (a single column tile's buffer: bcol0 = its first column).
void rows(std::size_t i0, std::size_t i1, std::size_t J, std::size_t K, const float* A, std::size_t sai,
          std::size_t sak, const float* Bp, std::size_t ldb, float* C, std::size_t ldc, std::size_t jb = 0,
          std::size_t je = ~std::size_t{0}, std::size_t bcol0 = 0) {
  constexpr std::size_t R = Isa::R, W = Isa::W;
  alignas(64) float ct[R * W];
  for (std::size_t i = i0; i < i1; i += R) {
    const std::size_t rn = i1 - i < R ? i1 - i : R;
    for (std::size_t j0 = jb; j0 < J && j0 < je; j0 += W) {
      const std::size_t jn = J - j0 < W ? J - j0 : W;
      if (K == 0) std::fill(ct, ct + R * W, 0.0f);
      for (std::size_t k0 = 0; k0 < K; k0 += kDepth) {
        const std::size_t k1 = K - k0 < kDepth ? K : k0 + kDepth;
        if (rn == R)
          tile<R>(A, sai, sak, i, Bp, ldb, j0 - bcol0, k0, k1, ct, k0 == 0);
        else
          for (std::size_t r = 0; r < rn; ++r)
            tile<1>(A, sai, sak, i + r, Bp, ldb, j0 - bcol0, k0, k1, ct + r * W, k0 == 0);
      }
      for (std::size_t r = 0; r < rn; ++r)
        for (std::size_t j = 0; j < jn; ++j) {
          const float c = ct[r * W + j];
          // The canonical NaN (the reference's dot_seq writes 0x7FC00000 for any NaN).
          C[(i + r) * ldc + j0 + j] = c != c ? num::float_of(0x7FC00000u) : c;
        }
    }
  }
}


// ---------------------------------------------------------------------------
// The blocked product (gemm): GotoBLAS's loop nest, every cell's chain whole.
//   B packed once into column panels of W = Isa::W columns, k-major inside a
//   panel ([panel][K][W], zero past J): a panel's kDepthB-deep slice is one
//   contiguous stream (from L2) that a thread's row panels pass over in turn.
//   Rows over threads (contiguous runs of kMr-row panels). Per thread, per
//   block of kMc rows, per k block (ascending), every (column panel, row
//   panel) tile runs its kMr x W chains over the block's k, the partial sums
//   parked in C between k blocks. A is read in place where one of its strides
//   is 1 (X, dY, dYᵀ of a linear layer: packing it measured slower, its
//   block being reused by only J / W panels); otherwise, and for a row panel
//   past the thread's last row, it is packed k-major ([kc][kMr], zero rows).
// Each cell's fmas are thus the reference's, in its order (k ascending, from
// +0); only where values live and which thread computes them change.
// ---------------------------------------------------------------------------
#if defined(__AVX512F__)
constexpr std::size_t kMr = 6;  // rows a tile: 6 x 4 = 24 zmm accumulators + 4 of B + 1 broadcast
#elif defined(__AVX2__) && defined(__FMA__)
constexpr std::size_t kMr = 6;  // 6 x 2 = 12 ymm accumulators
#else
constexpr std::size_t kMr = 4;
#endif
constexpr std::size_t kDepthB = 256;  // k per block (a panel's slice 256 x 64 floats = 64 KiB: 128 and 64 measured slower)
constexpr std::size_t kMc = 16 * kMr;  // rows a block: A's block (96 x 256 floats = 96 KiB) stays in L2

// A 64-byte aligned float buffer that only grows (no allocation, no page
// faults, no zeroing once grown: every call writes what it reads).
struct Scratch {
  float* p = nullptr;
  std::size_t n = 0;
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { std::free(p); }
  float* get(std::size_t want) {
    if (want > n) {
      std::free(p);
      const std::size_t bytes = (want * sizeof(float) + 63) / 64 * 64;
      p = static_cast<float*>(std::aligned_alloc(64, bytes));
      if (p == nullptr) throw std::bad_alloc();
      n = bytes / sizeof(float);
    }
    return p;
  }
  // Gives a buffer over `cap` floats back (a large model's B would otherwise stay resident).
  void trim(std::size_t cap) {
    if (n > cap) {
      std::free(p);
      p = nullptr;
      n = 0;
    }
  }
};

inline Isa::V canonical(Isa::V v) {
#if defined(__AVX512F__)
  return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_ps(num::float_of(0x7FC00000u)));
#elif defined(__AVX2__) && defined(__FMA__)
  return _mm256_blendv_ps(v, _mm256_set1_ps(num::float_of(0x7FC00000u)), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
#else
  return v != v ? num::float_of(0x7FC00000u) : v;
#endif
}

// Where a tile's kMr rows of A are: A(r, k) = a[r * lda + k] (RowMajor: X or
// dY of a linear layer, read in place), a[k * lda + r] (ColMajor: dYᵀ in
// place, or a packed panel, lda = kMr).
enum class ALayout { RowMajor, ColMajor };

// The kMr x W tile at c (row stride ldc) over kc k: A's rows as above, B's
// packed panel slice [kc][W] at b. First: the chains start at +0 (else they
// go on from c); Last: the canonical NaN is written.
template <bool First, bool Last, ALayout AL>
void micro(const float* a, std::size_t lda, const float* b, std::size_t kc, float* c, std::size_t ldc,
           const float* bias) {
  using V = Isa::V;
  constexpr std::size_t NV = Isa::NV, L = Isa::L;
  V acc[kMr][NV];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < kMr; ++r)
#pragma GCC unroll 8
    for (std::size_t v = 0; v < NV; ++v) acc[r][v] = First ? Isa::zero() : Isa::load(c + r * ldc + v * L);
  for (std::size_t k = 0; k < kc; ++k) {
    V bv[NV];
#pragma GCC unroll 8
    for (std::size_t v = 0; v < NV; ++v) bv[v] = Isa::load(b + k * Isa::W + v * L);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < kMr; ++r) {
      const V av = Isa::bcast(AL == ALayout::RowMajor ? a[r * lda + k] : a[k * lda + r]);
#pragma GCC unroll 8
      for (std::size_t v = 0; v < NV; ++v) acc[r][v] = Isa::fma(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < kMr; ++r)
#pragma GCC unroll 8
    for (std::size_t v = 0; v < NV; ++v) {
      if constexpr (Last) {
        // The product's value (canonical NaN), then the Linear's bias: y = y + b, as an add after the product.
        const V y = canonical(acc[r][v]);
        Isa::store(c + r * ldc + v * L, bias != nullptr ? Isa::add(y, Isa::load(bias + v * L)) : y);
      } else {
        Isa::store(c + r * ldc + v * L, acc[r][v]);
      }
    }
}

template <ALayout AL>
void micro_any(bool first, bool last, const float* a, std::size_t lda, const float* b, std::size_t kc, float* c,
               std::size_t ldc, const float* bias) {
  if (first)
    last ? micro<true, true, AL>(a, lda, b, kc, c, ldc, bias) : micro<true, false, AL>(a, lda, b, kc, c, ldc, bias);
  else
    last ? micro<false, true, AL>(a, lda, b, kc, c, ldc, bias) : micro<false, false, AL>(a, lda, b, kc, c, ldc, bias);
}

// Rows [i0, i1) of C, all columns, on the calling thread.
void blocked_rows(std::size_t i0, std::size_t i1, std::size_t J, std::size_t K, const float* A, std::size_t sai,
                  std::size_t sak, const float* Bp, float* C, std::size_t ldc, const float* bias) {
  constexpr std::size_t W = Isa::W;
  // A read in place where one of its strides is 1; otherwise (and for a
  // panel of fewer than kMr rows) packed ColMajor, zero rows past the end.
  const bool a_rows = sak == 1, a_cols = !a_rows && sai == 1;
  thread_local Scratch a_buf;
  float* Ap = a_buf.get(kMc * kDepthB);
  alignas(64) float edge[kMr * W] = {};  // lanes past the valid cells: zeros, never stored
  for (std::size_t ic = i0; ic < i1; ic += kMc) {
    const std::size_t mc = std::min(kMc, i1 - ic);
    for (std::size_t k0 = 0; k0 < K; k0 += kDepthB) {
      const std::size_t kc = std::min(kDepthB, K - k0);
      const bool first = k0 == 0, last = k0 + kc == K;
      for (std::size_t p = 0; p * kMr < mc; ++p) {
        const std::size_t rn = std::min(kMr, mc - p * kMr);
        if (rn == kMr && (a_rows || a_cols)) continue;
        float* dst = Ap + p * kc * kMr;
        for (std::size_t k = 0; k < kc; ++k)
          for (std::size_t r = 0; r < kMr; ++r)
            dst[k * kMr + r] = r < rn ? A[(ic + p * kMr + r) * sai + (k0 + k) * sak] : 0.0f;
      }
      for (std::size_t pj = 0; pj * W < J; ++pj) {
        const std::size_t j0 = pj * W, jn = std::min(W, J - j0);
        const float* b = Bp + pj * K * W + k0 * W;
        const float* bj = bias != nullptr ? bias + j0 : nullptr;
        for (std::size_t p = 0; p * kMr < mc; ++p) {
          const std::size_t i = ic + p * kMr, rn = std::min(kMr, mc - p * kMr);
          const bool full_rows = rn == kMr;
          const bool edge_tile = !full_rows || jn != W;
          float* c = edge_tile ? edge : C + i * ldc + j0;
          const std::size_t lc = edge_tile ? W : ldc;
          // An edge tile: through a full-size buffer, the valid cells copied in and out.
          if (edge_tile && !first)
            for (std::size_t r = 0; r < rn; ++r) std::copy(C + (i + r) * ldc + j0, C + (i + r) * ldc + j0 + jn, edge + r * W);
          if (full_rows && a_rows)
            micro_any<ALayout::RowMajor>(first, last, A + i * sai + k0, sai, b, kc, c, lc, bj);
          else if (full_rows && a_cols)
            micro_any<ALayout::ColMajor>(first, last, A + i + k0 * sak, sak, b, kc, c, lc, bj);
          else
            micro_any<ALayout::ColMajor>(first, last, Ap + p * kc * kMr, kMr, b, kc, c, lc, bj);
          if (edge_tile)
            for (std::size_t r = 0; r < rn; ++r) std::copy(edge + r * W, edge + r * W + jn, C + (i + r) * ldc + j0);
        }
      }
    }
  }
}

}  // namespace

void gemm(std::size_t I, std::size_t J, std::size_t K, const float* A, std::size_t sai, std::size_t sak,
          const float* B, std::size_t sbk, std::size_t sbj, float* C, std::size_t ldc, int threads,
          const float* bias) {
  if (I == 0 || J == 0) return;
  if (K == 0) {  // empty chains: +0 (then + b)
    for (std::size_t i = 0; i < I; ++i)
      for (std::size_t j = 0; j < J; ++j) C[i * ldc + j] = bias != nullptr ? 0.0f + bias[j] : 0.0f;
    return;
  }
  constexpr std::size_t W = Isa::W;
  // B into column panels [J / W][K][W], zero past J (a panel's k rows one
  // contiguous stream: a strided in-place B measured slower for dX = dY·W),
  // in a buffer the caller's thread owns.
  const std::size_t panels = (J + W - 1) / W;
  thread_local Scratch b_buf;
  float* Bp = b_buf.get(panels * K * W);
  util::parallel_for(panels, threads, 1, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t p = lo; p < hi; ++p) {
      float* dst = Bp + p * K * W;
      const std::size_t jn = std::min(W, J - p * W);
      if (sbj == 1) {  // rows of B contiguous in j
        for (std::size_t k = 0; k < K; ++k) {
          const float* src = B + k * sbk + p * W;
          std::copy(src, src + jn, dst + k * W);
          std::fill(dst + k * W + jn, dst + (k + 1) * W, 0.0f);
        }
      } else {  // columns of B contiguous in k (Wᵀ): read each column once
        for (std::size_t j = 0; j < jn; ++j) {
          const float* src = B + (p * W + j) * sbj;
          for (std::size_t k = 0; k < K; ++k) dst[k * W + j] = src[k * sbk];
        }
        for (std::size_t j = jn; j < W; ++j)
          for (std::size_t k = 0; k < K; ++k) dst[k * W + j] = 0.0f;
      }
    }
  });
  // The bias padded to whole panels (a tile's vector loads stay inside it).
  thread_local Scratch bias_buf;
  float* bias_p = nullptr;
  if (bias != nullptr) {
    bias_p = bias_buf.get(panels * W);
    std::copy(bias, bias + J, bias_p);
    std::fill(bias_p + J, bias_p + panels * W, 0.0f);
  }
  // Rows of C across threads, in whole row panels.
  const std::size_t row_panels = (I + kMr - 1) / kMr;
  util::parallel_for(row_panels, threads, 1, [&](std::size_t lo, std::size_t hi) {
    blocked_rows(lo * kMr, std::min(hi * kMr, I), J, K, A, sai, sak, Bp, C, ldc, bias_p);
  });
  b_buf.trim(std::size_t{16} << 20);  // keep up to 64 MiB (the tiny models' products) for the next call
}

std::size_t packed_ld(std::size_t J) { return (J + Isa::W - 1) / Isa::W * Isa::W; }

void pack_b(std::size_t J, std::size_t K, const float* B, std::size_t sbk, std::size_t sbj, float* Bp, int threads) {
  const std::size_t ldb = packed_ld(J);
  util::parallel_for(K, threads, 16, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t k = lo; k < hi; ++k) {
      for (std::size_t j = 0; j < J; ++j) Bp[k * ldb + j] = B[k * sbk + j * sbj];
      for (std::size_t j = J; j < ldb; ++j) Bp[k * ldb + j] = 0.0f;
    }
  });
}

void gemm_packed(std::size_t I, std::size_t J, std::size_t K, const float* A, std::size_t sai, std::size_t sak,
                 const float* Bp, std::size_t ldb, float* C, std::size_t ldc, int threads) {
  if (I == 0 || J == 0) return;
  // Column tiles across threads (a few rows: every thread streams its share
  // of B once), all the rows on each.
  const std::size_t tiles = (J + Isa::W - 1) / Isa::W;
  util::parallel_for(tiles, threads, 4, [&](std::size_t lo, std::size_t hi) {
    rows(0, I, J, K, A, sai, sak, Bp, ldb, C, ldc, lo * Isa::W, hi * Isa::W);
  });
}

std::size_t tile_width() { return Isa::W; }

void gemm_b_tiles(std::size_t I, std::size_t J, std::size_t K, const float* A, std::size_t sai, std::size_t sak,
                  const BTileFill& fill, float* C, std::size_t ldc, int threads) {
  if (I == 0 || J == 0) return;
  const std::size_t tiles = (J + Isa::W - 1) / Isa::W;
  util::parallel_for(tiles, threads, 1, [&](std::size_t lo, std::size_t hi) {
    std::vector<float> tile_b(K * Isa::W);  // one column tile of B: [K][W], a thread's own
    for (std::size_t t = lo; t < hi; ++t) {
      const std::size_t j0 = t * Isa::W, jn = std::min(Isa::W, J - j0);
      fill(j0, jn, tile_b.data());
      for (std::size_t k = 0; k < K; ++k) std::fill(tile_b.data() + k * Isa::W + jn, tile_b.data() + (k + 1) * Isa::W, 0.0f);
      rows(0, I, J, K, A, sai, sak, tile_b.data(), Isa::W, C, ldc, j0, j0 + Isa::W, j0);
    }
  });
}

void gemm_xwt(std::size_t N, std::size_t M, std::size_t K, const float* X, const float* W, float* Y, int threads,
              const float* bias) {
  gemm(N, M, K, X, K, 1, W, 1, K, Y, M, threads, bias);
}
void gemm_dyw(std::size_t N, std::size_t M, std::size_t K, const float* dY, const float* W, float* dX, int threads) {
  gemm(N, K, M, dY, M, 1, W, K, 1, dX, K, threads);
}
void gemm_dytx(std::size_t N, std::size_t M, std::size_t K, const float* dY, const float* X, float* dW, int threads) {
  gemm(M, K, N, dY, 1, M, X, K, 1, dW, K, threads);
}

}  // namespace lockstep::cpu
