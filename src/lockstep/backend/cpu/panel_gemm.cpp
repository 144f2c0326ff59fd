#include "lockstep/backend/cpu/panel_gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "lockstep/num/fp.hpp"
#include "lockstep/tensor/convert.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::cpu {
namespace {

constexpr std::size_t W = FloatPanels::kWidth;
constexpr std::uint32_t kCanonicalNaN = 0x7FC00000u;  // what gemm's chains write for any NaN

inline float widen(float v) { return v; }
inline float widen(std::uint16_t h) { return tensor::f16_to_f32(h); }

// Writes the panel's chains of `rn` rows (acc[n·W + l]) to y, canonical NaN for any NaN.
void store_rows(const float* acc, std::size_t rn, std::size_t cols, float* y, std::size_t ldy) {
  for (std::size_t n = 0; n < rn; ++n)
    for (std::size_t l = 0; l < cols; ++l) {
      const float v = acc[n * W + l];
      y[n * ldy + l] = v != v ? num::float_of(kCanonicalNaN) : v;
    }
}

#if defined(__AVX512F__)
constexpr std::size_t kRows = 4;  // rows a pass over a panel: 16 accumulators

// Sixteen weights of a panel's row as f32. The maskz form of the widening:
// GCC 12's plain one trips -Wmaybe-uninitialized (_mm512_undefined_ps).
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const std::uint16_t* p) {
  return _mm512_maskz_cvtph_ps(static_cast<__mmask16>(0xFFFF), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

template <std::size_t RN, class E>
void panel_rows(const E* wp, std::size_t K, const float* x, float* acc_out) {
  __m512 acc[RN][4];
#pragma GCC unroll 4
  for (std::size_t n = 0; n < RN; ++n)
#pragma GCC unroll 4
    for (std::size_t v = 0; v < 4; ++v) acc[n][v] = _mm512_setzero_ps();
  for (std::size_t k = 0; k < K; ++k) {
    const E* row = wp + k * W;
    __m512 wv[4];
#pragma GCC unroll 4
    for (std::size_t v = 0; v < 4; ++v) wv[v] = load16(row + 16 * v);
#pragma GCC unroll 4
    for (std::size_t n = 0; n < RN; ++n) {
      const __m512 xb = _mm512_set1_ps(x[n * K + k]);
#pragma GCC unroll 4
      for (std::size_t v = 0; v < 4; ++v) acc[n][v] = _mm512_fmadd_ps(xb, wv[v], acc[n][v]);
    }
  }
#pragma GCC unroll 4
  for (std::size_t n = 0; n < RN; ++n)
#pragma GCC unroll 4
    for (std::size_t v = 0; v < 4; ++v) _mm512_storeu_ps(acc_out + n * W + 16 * v, acc[n][v]);
}

template <class E>
void panel(const Panels<E>& w, std::size_t p, const float* x, std::size_t N, float* y) {
  const std::size_t K = w.cols, cols = std::min(W, w.rows - p * W);
  const E* wp = w.w.data() + p * K * W;
  alignas(64) float acc[kRows * W];
  for (std::size_t n0 = 0; n0 < N; n0 += kRows) {
    const std::size_t rn = std::min(kRows, N - n0);
    const float* xn = x + n0 * K;
    switch (rn) {
      case 1: panel_rows<1>(wp, K, xn, acc); break;
      case 2: panel_rows<2>(wp, K, xn, acc); break;
      case 3: panel_rows<3>(wp, K, xn, acc); break;
      default: panel_rows<4>(wp, K, xn, acc); break;
    }
    store_rows(acc, rn, cols, y + n0 * w.rows + p * W, w.rows);
  }
}
#else
template <class E>
void panel(const Panels<E>& w, std::size_t p, const float* x, std::size_t N, float* y) {
  const std::size_t K = w.cols, cols = std::min(W, w.rows - p * W);
  const E* wp = w.w.data() + p * K * W;
  std::vector<float> acc(W);
  for (std::size_t n = 0; n < N; ++n) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t l = 0; l < cols; ++l) acc[l] = num::fma_rn(x[n * K + k], widen(wp[k * W + l]), acc[l]);
    store_rows(acc.data(), 1, cols, y + n * w.rows + p * W, w.rows);
  }
}
#endif

template <class E, class Convert>
Panels<E> pack(const float* w, std::size_t M, std::size_t K, int threads, Convert convert) {
  const std::size_t panels = (M + W - 1) / W;
  Panels<E> out;
  out.rows = M;
  out.cols = K;
  out.w.assign(panels * K * W, E{});
  util::parallel_for(panels, threads, 1, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t p = lo; p < hi; ++p)
      for (std::size_t l = 0; l < W && p * W + l < M; ++l) {
        const float* row = w + (p * W + l) * K;
        E* dst = out.w.data() + p * K * W + l;
        for (std::size_t k = 0; k < K; ++k) dst[k * W] = convert(row[k]);
      }
  });
  return out;
}

template <class E>
void run(const Panels<E>& w, const float* x, std::size_t N, float* y, int threads) {
  if (N == 0 || w.rows == 0) return;
  const std::size_t panels = (w.rows + W - 1) / W;
  util::parallel_for(panels, threads, 4, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t p = lo; p < hi; ++p) panel(w, p, x, N, y);
  });
}

}  // namespace

FloatPanels pack_panels(const float* w, std::size_t M, std::size_t K, int threads) {
  return pack<float>(w, M, K, threads, [](float v) { return v; });
}

bool pack_half(const float* w, std::size_t M, std::size_t K, HalfPanels& out, int threads) {
  out = HalfPanels{};
  std::atomic<bool> inexact{false};
  util::parallel_for(M, threads, 64, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo * K; i < hi * K; ++i)
      if (num::bits_of(widen(tensor::f32_to_f16(w[i]))) != num::bits_of(w[i])) {
        inexact.store(true, std::memory_order_relaxed);
        return;
      }
  });
  if (inexact.load()) return false;
  out = pack<std::uint16_t>(w, M, K, threads, [](float v) { return tensor::f32_to_f16(v); });
  return true;
}

void panel_gemm(const FloatPanels& w, const float* x, std::size_t N, float* y, int threads) {
  run(w, x, N, y, threads);
}
void panel_gemm(const HalfPanels& w, const float* x, std::size_t N, float* y, int threads) {
  run(w, x, N, y, threads);
}

}  // namespace lockstep::cpu
