#include "lockstep/backend/cpu/panel_gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#include <immintrin.h>
#define LOCKSTEP_PANEL_SIMD 1
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

#if defined(LOCKSTEP_PANEL_SIMD)
#if defined(__AVX512F__)
// One pass of chains covers all 64 lanes of a panel (4 zmm) for up to 4 rows:
// 16 accumulators of the 32 registers.
struct Isa {
  static constexpr std::size_t kRows = 4, kLanes = 16;
  using V = __m512;
  static V zero() { return _mm512_setzero_ps(); }
  static V bcast(float a) { return _mm512_set1_ps(a); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  // The maskz forms of the widenings: GCC 12's plain ones trip
  // -Wmaybe-uninitialized (_mm512_undefined_ps).
  static V load(const std::uint16_t* p) {
    return _mm512_maskz_cvtph_ps(static_cast<__mmask16>(0xFFFF), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static V load_codes(const std::int8_t* p) {
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m512i q = _mm512_maskz_cvtepi8_epi32(static_cast<__mmask16>(0xFFFF), c);
    return _mm512_maskz_cvtepi32_ps(static_cast<__mmask16>(0xFFFF), q);
  }
};
#else
// AVX2 (+ FMA, F16C): 16 ymm registers, so a pass covers half a panel (32
// lanes, 4 ymm) for up to 2 rows: 8 accumulators, 4 weights, a broadcast.
struct Isa {
  static constexpr std::size_t kRows = 2, kLanes = 8;
  using V = __m256;
  static V zero() { return _mm256_setzero_ps(); }
  static V bcast(float a) { return _mm256_set1_ps(a); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load(const std::uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static V load_codes(const std::int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
};
#endif
using V = Isa::V;
constexpr std::size_t kRows = Isa::kRows;          // rows a pass over a panel
constexpr std::size_t kVecs = 4;                    // vectors of weights a pass
constexpr std::size_t kPass = kVecs * Isa::kLanes;  // lanes a pass: 64 (AVX-512) or 32 (AVX2)
static_assert(W % kPass == 0);

// f.template operator()<rn>() for a run-time rn in [1, Max].
template <std::size_t Max, class F>
void rows_of(std::size_t rn, F&& f) {
  if constexpr (Max > 1)
    if (rn < Max) return rows_of<Max - 1>(rn, f);
  f.template operator()<Max>();
}

// The chains of RN rows against one panel, lanes [lane0, lane0 + kPass) a
// pass: load_row(k, lane0, wv) puts the panel's weights of column k in those
// lanes, as f32, in wv[0..3] (each weight form widens its own). Each lane's
// chain is the same whatever the vector width: one fma per k, k ascending.
template <std::size_t RN, class LoadRow>
void chains(std::size_t K, const float* x, float* acc_out, LoadRow&& load_row) {
  for (std::size_t lane0 = 0; lane0 < W; lane0 += kPass) {
    V acc[RN][kVecs];
#pragma GCC unroll 4
    for (std::size_t n = 0; n < RN; ++n)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < kVecs; ++v) acc[n][v] = Isa::zero();
    for (std::size_t k = 0; k < K; ++k) {
      V wv[kVecs];
      load_row(k, lane0, wv);
#pragma GCC unroll 4
      for (std::size_t n = 0; n < RN; ++n) {
        const V xb = Isa::bcast(x[n * K + k]);
#pragma GCC unroll 4
        for (std::size_t v = 0; v < kVecs; ++v) acc[n][v] = Isa::fma(xb, wv[v], acc[n][v]);
      }
    }
#pragma GCC unroll 4
    for (std::size_t n = 0; n < RN; ++n)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < kVecs; ++v) Isa::store(acc_out + n * W + lane0 + Isa::kLanes * v, acc[n][v]);
  }
}

template <std::size_t RN, class E>
void panel_rows(const E* wp, std::size_t K, const float* x, float* acc_out) {
  chains<RN>(K, x, acc_out, [wp](std::size_t k, std::size_t lane0, V* wv) {
#pragma GCC unroll 4
    for (std::size_t v = 0; v < kVecs; ++v) wv[v] = Isa::load(wp + k * W + lane0 + Isa::kLanes * v);
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
    rows_of<kRows>(rn, [&]<std::size_t RN>() { panel_rows<RN>(wp, K, xn, acc); });
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

#if defined(LOCKSTEP_PANEL_SIMD)
// The Q8 panel's chains for RN <= kRows rows, the weights widened in registers
// (code → f32 → × the block's scale: the exact product the loader computed).
template <std::size_t RN>
void q8_panel_rows(const std::int8_t* cp, const std::uint16_t* sp, std::size_t K, const float* x, float* acc_out) {
  V scale[kVecs] = {};  // set at k = 0 of each pass
  chains<RN>(K, x, acc_out, [&](std::size_t k, std::size_t lane0, V* wv) {
    if (k % Q8Panels::kBlock == 0)  // a new block: its scales
#pragma GCC unroll 4
      for (std::size_t v = 0; v < kVecs; ++v) scale[v] = Isa::load(sp + (k / Q8Panels::kBlock) * W + lane0 + Isa::kLanes * v);
#pragma GCC unroll 4
    for (std::size_t v = 0; v < kVecs; ++v) wv[v] = Isa::mul(Isa::load_codes(cp + k * W + lane0 + Isa::kLanes * v), scale[v]);
  });
}
#endif

// Rows up to which a Q8 panel is widened in registers, kRows at a time.
constexpr std::size_t kQ8RegisterRows = 4;

// A Q8 panel: up to 4 rows widened in registers (a decode pass: the weights
// read once, 1.0625 bytes each); more rows widen the panel once into f32 and
// run the f32 panel over it (the conversions paid once, not per 4 rows).
void panel(const Q8Panels& w, std::size_t p, const float* x, std::size_t N, float* y) {
  const std::size_t K = w.cols;
#if defined(LOCKSTEP_PANEL_SIMD)
  if (N <= kQ8RegisterRows) {
    const std::size_t cols = std::min(W, w.rows - p * W);
    alignas(64) float acc[kRows * W];
    const std::int8_t* cp = w.codes.data() + p * K * W;
    const std::uint16_t* sp = w.scales.data() + p * (K / Q8Panels::kBlock) * W;
    for (std::size_t n0 = 0; n0 < N; n0 += kRows) {
      const std::size_t rn = std::min(kRows, N - n0);
      const float* xn = x + n0 * K;
      rows_of<kRows>(rn, [&]<std::size_t RN>() { q8_panel_rows<RN>(cp, sp, K, xn, acc); });
      store_rows(acc, rn, cols, y + n0 * w.rows + p * W, w.rows);
    }
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
