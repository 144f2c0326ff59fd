#include "lockstep/backend/cpu/gemm.hpp"

#include <algorithm>
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

}  // namespace

void gemm(std::size_t I, std::size_t J, std::size_t K, const float* A, std::size_t sai, std::size_t sak,
          const float* B, std::size_t sbk, std::size_t sbj, float* C, std::size_t ldc, int threads) {
  if (I == 0 || J == 0) return;
  // Pack B so that B(k, j) for consecutive j is contiguous, each row padded
  // with zeros to a whole number of column tiles.
  const std::size_t ldb = (J + Isa::W - 1) / Isa::W * Isa::W;
  std::vector<float> packed(K * ldb, 0.0f);
  util::parallel_for(K, threads, 16, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t k = lo; k < hi; ++k)
      for (std::size_t j = 0; j < J; ++j) packed[k * ldb + j] = B[k * sbk + j * sbj];
  });
  // Rows of C across threads, in whole micro-tiles.
  const std::size_t blocks = (I + Isa::R - 1) / Isa::R;
  util::parallel_for(blocks, threads, 1, [&](std::size_t lo, std::size_t hi) {
    const std::size_t i1 = hi * Isa::R < I ? hi * Isa::R : I;
    rows(lo * Isa::R, i1, J, K, A, sai, sak, packed.data(), ldb, C, ldc);
  });
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

void gemm_xwt(std::size_t N, std::size_t M, std::size_t K, const float* X, const float* W, float* Y, int threads) {
  gemm(N, M, K, X, K, 1, W, 1, K, Y, M, threads);
}
void gemm_dyw(std::size_t N, std::size_t M, std::size_t K, const float* dY, const float* W, float* dX, int threads) {
  gemm(N, K, M, dY, M, 1, W, K, 1, dX, K, threads);
}
void gemm_dytx(std::size_t N, std::size_t M, std::size_t K, const float* dY, const float* X, float* dW, int threads) {
  gemm(M, K, N, dY, 1, M, X, K, 1, dW, K, threads);
}

}  // namespace lockstep::cpu
