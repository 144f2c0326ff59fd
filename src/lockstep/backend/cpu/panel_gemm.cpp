#include "lockstep/backend/cpu/panel_gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
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

// The chains of RN rows against one panel: load_row(k, wv) puts the panel's
// 64 weights of column k, as f32, in wv[0..3] (each weight form widens its own).
template <std::size_t RN, class LoadRow>
void chains(std::size_t K, const float* x, float* acc_out, LoadRow&& load_row) {
  __m512 acc[RN][4];
#pragma GCC unroll 4
  for (std::size_t n = 0; n < RN; ++n)
#pragma GCC unroll 4
    for (std::size_t v = 0; v < 4; ++v) acc[n][v] = _mm512_setzero_ps();
  for (std::size_t k = 0; k < K; ++k) {
    __m512 wv[4];
    load_row(k, wv);
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

template <std::size_t RN, class E>
void panel_rows(const E* wp, std::size_t K, const float* x, float* acc_out) {
  chains<RN>(K, x, acc_out, [wp](std::size_t k, __m512* wv) {
#pragma GCC unroll 4
    for (std::size_t v = 0; v < 4; ++v) wv[v] = load16(wp + k * W + 16 * v);
  });
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


// Panel p of a Q8 matrix widened to f32, [K][64]: the weights the product reads.
void widen_q8_panel(const Q8Panels& w, std::size_t p, float* out) {
  const std::size_t K = w.cols, blocks = K / Q8Panels::kBlock;
  const std::int8_t* cp = w.codes.data() + p * K * W;
  const std::uint16_t* sp = w.scales.data() + p * blocks * W;
  for (std::size_t b = 0; b < blocks; ++b) {
    float scale[W];
    for (std::size_t l = 0; l < W; ++l) scale[l] = tensor::f16_to_f32(sp[b * W + l]);
    for (std::size_t k = b * Q8Panels::kBlock; k < (b + 1) * Q8Panels::kBlock; ++k)
      for (std::size_t l = 0; l < W; ++l) out[k * W + l] = static_cast<float>(cp[k * W + l]) * scale[l];
  }
}

#if defined(__AVX512F__)
// The Q8 panel's chains for RN <= 4 rows, the weights widened in registers
// (code → f32 → × the block's scale: the exact product the loader computed).
template <std::size_t RN>
void q8_panel_rows(const std::int8_t* cp, const std::uint16_t* sp, std::size_t K, const float* x, float* acc_out) {
  __m512 scale[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};  // set at k = 0
  chains<RN>(K, x, acc_out, [&](std::size_t k, __m512* wv) {
    if (k % Q8Panels::kBlock == 0)  // a new block: its 64 scales
#pragma GCC unroll 4
      for (std::size_t v = 0; v < 4; ++v) scale[v] = load16(sp + (k / Q8Panels::kBlock) * W + 16 * v);
#pragma GCC unroll 4
    for (std::size_t v = 0; v < 4; ++v) {
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cp + k * W + 16 * v));
      const __m512i q = _mm512_maskz_cvtepi8_epi32(static_cast<__mmask16>(0xFFFF), c);  // maskz: as load16
      wv[v] = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(static_cast<__mmask16>(0xFFFF), q), scale[v]);
    }
  });
}
#endif

// A Q8 panel: up to 4 rows widened in registers (a decode pass: the weights
// read once, 1.0625 bytes each); more rows widen the panel once into f32 and
// run the f32 panel over it (the conversions paid once, not per 4 rows).
void panel(const Q8Panels& w, std::size_t p, const float* x, std::size_t N, float* y) {
  const std::size_t K = w.cols;
#if defined(__AVX512F__)
  if (N <= kRows) {
    const std::size_t cols = std::min(W, w.rows - p * W);
    alignas(64) float acc[kRows * W];
    const std::int8_t* cp = w.codes.data() + p * K * W;
    const std::uint16_t* sp = w.scales.data() + p * (K / Q8Panels::kBlock) * W;
    switch (N) {
      case 1: q8_panel_rows<1>(cp, sp, K, x, acc); break;
      case 2: q8_panel_rows<2>(cp, sp, K, x, acc); break;
      case 3: q8_panel_rows<3>(cp, sp, K, x, acc); break;
      default: q8_panel_rows<4>(cp, sp, K, x, acc); break;
    }
    store_rows(acc, N, cols, y + p * W, w.rows);
    return;
  }
#endif
  thread_local FloatPanels wide;  // one panel's f32 weights, reused across calls
  wide.rows = std::min(W, w.rows - p * W);
  wide.cols = K;
  wide.w.resize(K * W);
  widen_q8_panel(w, p, wide.w.data());
  std::vector<float> yp(N * wide.rows);
  panel(wide, 0, x, N, yp.data());
  for (std::size_t n = 0; n < N; ++n)
    std::copy_n(yp.data() + n * wide.rows, wide.rows, y + n * w.rows + p * W);
}

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

template <class Matrix>
void run(const Matrix& w, const float* x, std::size_t N, float* y, int threads) {
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

namespace {

// Codes for 32 weights as code · scale with the f16 scale `scale`, or false.
bool q8_codes(const float* w, float scale, std::int8_t* codes) {
  const float inv = 1.0f / scale;
  for (std::size_t i = 0; i < Q8Panels::kBlock; ++i) {
    const float q = std::nearbyint(w[i] * inv);
    if (!(q >= -128.0f && q <= 127.0f)) return false;
    codes[i] = static_cast<std::int8_t>(q);
    // The product of the stored code (a -0 weight has none: code 0 gives +0).
    if (num::bits_of(static_cast<float>(codes[i]) * scale) != num::bits_of(w[i])) return false;
  }
  return true;
}

// The f16 scale and codes of a block of 32 weights, or false. Exact blocks
// have |w| <= 128·scale, and their largest |w| is c·scale for the largest
// |code| c: amax / c is the scale itself (exact division), c = 127 for
// ggml's quantizer (its largest |x| maps to ±127), 128 for a code -128; the
// other c are tried last (a block of small codes).
bool q8_block(const float* w, std::uint16_t& scale_bits, std::int8_t* codes) {
  float amax = 0;
  for (std::size_t i = 0; i < Q8Panels::kBlock; ++i) {
    if (!std::isfinite(w[i])) return false;
    amax = std::max(amax, std::fabs(w[i]));
  }
  if (amax == 0) {  // +0 only: code 0 at scale 0 (-0 is no code times a positive scale)
    for (std::size_t i = 0; i < Q8Panels::kBlock; ++i)
      if (num::bits_of(w[i]) != 0) return false;
    scale_bits = 0;
    std::fill_n(codes, Q8Panels::kBlock, std::int8_t{0});
    return true;
  }
  auto try_c = [&](float c) {
    const std::uint16_t h = tensor::f32_to_f16(amax / c);
    const float scale = tensor::f16_to_f32(h);
    if (!(scale > 0) || !std::isfinite(scale) || !q8_codes(w, scale, codes)) return false;
    scale_bits = h;
    return true;
  };
  if (try_c(127.0f) || try_c(128.0f)) return true;
  for (int c = 126; c >= 1; --c)
    if (try_c(static_cast<float>(c))) return true;
  return false;
}

}  // namespace

float Q8Panels::at(std::size_t m, std::size_t k) const {
  const std::size_t p = m / kWidth, l = m % kWidth;
  const float scale = tensor::f16_to_f32(scales[(p * (cols / kBlock) + k / kBlock) * kWidth + l]);
  return static_cast<float>(codes[(p * cols + k) * kWidth + l]) * scale;
}

bool pack_q8(const float* w, std::size_t M, std::size_t K, Q8Panels& out, int threads) {
  out = Q8Panels{};
  if (K % Q8Panels::kBlock != 0) return false;
  const std::size_t panels = (M + W - 1) / W, blocks = K / Q8Panels::kBlock;
  Q8Panels q;
  q.rows = M;
  q.cols = K;
  q.codes.assign(panels * K * W, 0);
  q.scales.assign(panels * blocks * W, 0);
  std::atomic<bool> inexact{false};
  util::parallel_for(M, threads, 16, [&](std::size_t lo, std::size_t hi) {
    std::int8_t codes[Q8Panels::kBlock];
    for (std::size_t m = lo; m < hi && !inexact.load(std::memory_order_relaxed); ++m) {
      const std::size_t p = m / W, l = m % W;
      for (std::size_t b = 0; b < blocks; ++b) {
        std::uint16_t scale = 0;
        if (!q8_block(w + m * K + b * Q8Panels::kBlock, scale, codes)) {
          inexact.store(true, std::memory_order_relaxed);
          return;
        }
        q.scales[(p * blocks + b) * W + l] = scale;
        for (std::size_t i = 0; i < Q8Panels::kBlock; ++i) q.codes[(p * K + b * Q8Panels::kBlock + i) * W + l] = codes[i];
      }
    }
  });
  if (inexact.load()) return false;
  out = std::move(q);
  return true;
}

void panel_gemm(const Q8Panels& w, const float* x, std::size_t N, float* y, int threads) {
  run(w, x, N, y, threads);
}

}  // namespace lockstep::cpu
