// Causal attention on the CPU: ops::Attention's float expression, bit for bit.
//
// The spec (ops/attention.hpp) computes, per (batch, head, query i), scores
// s_ij = dot_seq(q_i, k_j)·scale, an online softmax over 64-key blocks and
// acc_d = fma(p, v_jd, acc_d); its backward, chains over j (dq) and over
// (head of the group, i) (dk, dv). Here the same cells are computed with the
// work arranged for SIMD, never the order of a chain:
//   * scores: 4 queries × up to 64 keys at once, one vector lane per key; the
//     lane's chain over d is the spec's dot_seq (acc = +0, fma, d ascending)
//     against a transposed copy of K (or V for dP);
//   * the online softmax (block max, rescale, exponentials, l) runs per row in
//     the spec's scalar order;
//   * p·v, dq, dk, dv: one lane per d, each lane's chain over j (or (h, i))
//     in the spec's order; 4 rows (or 4 keys) share the loop to fill the
//     registers. Where the 4 rows' chains have different lengths (the causal
//     edge), the common part runs together and each row finishes alone.
// Work is split over (batch, head) pairs (forward) and (batch, kv head)
// pairs (backward): a pair is computed whole by one thread, so the bits do
// not depend on the thread count.
#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cpu/vmath.hpp"
#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::cpu {
namespace {

using num::fma_rn;
namespace red = num::reduce;

// ---------------------------------------------------------------------------
// Vector lanes: L floats with a lane-wise fma (correctly rounded, as fma_rn).
// ---------------------------------------------------------------------------
#if defined(__AVX512F__)
struct Vec {
  static constexpr std::size_t L = 16;
  using V = __m512;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V bcast(float a) { return _mm512_set1_ps(a); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
};
#else
struct Vec {  // portable: one lane
  static constexpr std::size_t L = 1;
  using V = float;
  static V zero() { return 0.0f; }
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  static V bcast(float a) { return a; }
  static V fma(V a, V b, V c) { return fma_rn(a, b, c); }
  static V mul(V a, V b) { return a * b; }
};
#endif
constexpr std::size_t kL = Vec::L;
constexpr std::size_t kRows = 4;  // queries (or keys) per tile

// A thread's scratch arrays (grown, never shrunk: no allocation per call).
struct Scratch {
  std::vector<float> kt, vt, s, dp, acc, P, dS;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}
float* grow(std::vector<float>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Row length of the transposed K/V and of the score rows: T plus room for
// the last (partial) vectors a tile reads and writes past key T - 1 (their
// values are never used).
std::size_t padded(std::size_t T) { return (T + 4 * kL - 1) / (4 * kL) * (4 * kL) + 4 * kL; }

#if defined(__AVX512F__)
// out[c * ldo + 0..15] = rows[r][c] for r, c < 16: a 16 x 16 block transposed
// in registers (unpack 32- then 64-bit pairs, then two rounds of 128-bit
// block shuffles).
// The maskz forms throughout: GCC 12's plain ones trip -Wuninitialized (_mm512_undefined_ps).
constexpr __mmask16 kAll16 = 0xFFFF;
constexpr __mmask8 kAll8 = 0xFF;
inline __m512 unpacklo(__m512 a, __m512 b) { return _mm512_maskz_unpacklo_ps(kAll16, a, b); }
inline __m512 unpackhi(__m512 a, __m512 b) { return _mm512_maskz_unpackhi_ps(kAll16, a, b); }
inline __m512 unpacklo64(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAll8, _mm512_castps_pd(a), _mm512_castps_pd(b)));
}
inline __m512 unpackhi64(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAll8, _mm512_castps_pd(a), _mm512_castps_pd(b)));
}
template <int Imm>
inline __m512 blocks(__m512 a, __m512 b) { return _mm512_maskz_shuffle_f32x4(kAll16, a, b, Imm); }

inline void transpose16(const float* x, std::size_t ld, float* out, std::size_t ldo) {
  __m512 u[16];
  for (std::size_t g = 0; g < 4; ++g) {
    const __m512 r0 = _mm512_loadu_ps(x + (4 * g) * ld), r1 = _mm512_loadu_ps(x + (4 * g + 1) * ld);
    const __m512 r2 = _mm512_loadu_ps(x + (4 * g + 2) * ld), r3 = _mm512_loadu_ps(x + (4 * g + 3) * ld);
    const __m512 tl = unpacklo(r0, r1), th = unpackhi(r0, r1), sl = unpacklo(r2, r3), sh = unpackhi(r2, r3);
    // u[4g + m], block k: rows 4g..4g+3 of column 4k + m
    u[4 * g + 0] = unpacklo64(tl, sl);
    u[4 * g + 1] = unpackhi64(tl, sl);
    u[4 * g + 2] = unpacklo64(th, sh);
    u[4 * g + 3] = unpackhi64(th, sh);
  }
  for (std::size_t m = 0; m < 4; ++m) {
    const __m512 v = blocks<0x88>(u[m], u[4 + m]), w = blocks<0xdd>(u[m], u[4 + m]);
    const __m512 v2 = blocks<0x88>(u[8 + m], u[12 + m]), w2 = blocks<0xdd>(u[8 + m], u[12 + m]);
    _mm512_storeu_ps(out + m * ldo, blocks<0x88>(v, v2));
    _mm512_storeu_ps(out + (8 + m) * ldo, blocks<0xdd>(v, v2));
    _mm512_storeu_ps(out + (4 + m) * ldo, blocks<0x88>(w, w2));
    _mm512_storeu_ps(out + (12 + m) * ldo, blocks<0xdd>(w, w2));
  }
}
#endif

// xt[d * ldt + j] = x[j * ld + d] for j < T, d < Dh; columns [T, ldt) zero.
// (A copy: any order.) 16 keys x 16 dims at a time in registers (AVX-512):
// the element-by-element loop over j with x's row stride took a quarter of
// the forward.
void transpose(const float* x, std::size_t ld, std::size_t T, std::size_t Dh, float* xt, std::size_t ldt) {
  std::size_t j0 = 0, d_done = 0;
#if defined(__AVX512F__)
  d_done = Dh / 16 * 16;
  if (d_done > 0)
    for (; j0 + 16 <= T; j0 += 16)
      for (std::size_t d0 = 0; d0 < d_done; d0 += 16) transpose16(x + j0 * ld + d0, ld, xt + d0 * ldt + j0, ldt);
#endif
  for (std::size_t d = 0; d < Dh; ++d) {
    float* row = xt + d * ldt;
    for (std::size_t j = d < d_done ? j0 : 0; j < T; ++j) row[j] = x[j * ld + d];
    std::fill(row + T, row + ldt, 0.0f);
  }
}

// acc[r] = f(acc[r], s[r * lds + j]) for j in [from, to[r]) ascending, for
// the rows r in [r0, rows) (to[] non-decreasing in r): each row's chain in its
// own order, the rows' chains interleaved over their common part so that
// four dependent chains (a running max, a sum) run at once.
template <class F>
void fold_rows(std::size_t r0, std::size_t rows, float* acc, const float* s, std::size_t lds, std::size_t from,
               const std::size_t* to, F f) {
  const std::size_t common = to[r0];
  if (rows - r0 == kRows) {
    float a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    const float *s0 = s, *s1 = s + lds, *s2 = s + 2 * lds, *s3 = s + 3 * lds;
    for (std::size_t j = from; j < common; ++j) {
      a0 = f(a0, s0[j]);
      a1 = f(a1, s1[j]);
      a2 = f(a2, s2[j]);
      a3 = f(a3, s3[j]);
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
  } else {
    for (std::size_t r = r0; r < rows; ++r)
      for (std::size_t j = from; j < common; ++j) acc[r] = f(acc[r], s[r * lds + j]);
  }
  for (std::size_t r = r0; r < rows; ++r)
    for (std::size_t j = std::max(common, from); j < to[r]; ++j) acc[r] = f(acc[r], s[r * lds + j]);
}

// out[r * ldo + j] = chain over d ascending of a_r[d] · bt[d * ldt + j]
// (acc = +0, acc = fma(a, b, acc)): the raw dot_seq values of rows a_0..a_3
// with the G·L columns j0 .. j0 + G·L - 1 of bt. The canonical NaN and the
// scale are applied by the caller, as in the spec.
template <std::size_t G>
void dots(const float* const a[kRows], std::size_t Dh, const float* bt, std::size_t ldt, std::size_t j0, float* out,
          std::size_t ldo) {
  Vec::V acc[kRows][G];
  for (std::size_t r = 0; r < kRows; ++r)
    for (std::size_t g = 0; g < G; ++g) acc[r][g] = Vec::zero();
  for (std::size_t d = 0; d < Dh; ++d) {
    const float* b = bt + d * ldt + j0;
    Vec::V bv[G];
#pragma GCC unroll 4
    for (std::size_t g = 0; g < G; ++g) bv[g] = Vec::load(b + g * kL);
#pragma GCC unroll 4
    for (std::size_t r = 0; r < kRows; ++r) {
      const Vec::V av = Vec::bcast(a[r][d]);
#pragma GCC unroll 4
      for (std::size_t g = 0; g < G; ++g) acc[r][g] = Vec::fma(av, bv[g], acc[r][g]);
    }
  }
  for (std::size_t r = 0; r < kRows; ++r)
    for (std::size_t g = 0; g < G; ++g) Vec::store(out + r * ldo + j0 + g * kL, acc[r][g]);
}

// The dots of columns [j0, j1) (rounded up to whole vectors; bt must hold
// them), in chunks of up to 4 vectors.
void dots_range(const float* const a[kRows], std::size_t Dh, const float* bt, std::size_t ldt, std::size_t j0,
                std::size_t j1, float* out, std::size_t ldo) {
  std::size_t j = j0;
  for (; j + 4 * kL <= j1; j += 4 * kL) dots<4>(a, Dh, bt, ldt, j, out, ldo);
  const std::size_t rest = (j1 - j + kL - 1) / kL;
  switch (rest) {
    case 0: break;
    case 1: dots<1>(a, Dh, bt, ldt, j, out, ldo); break;
    case 2: dots<2>(a, Dh, bt, ldt, j, out, ldo); break;
    case 3: dots<3>(a, Dh, bt, ldt, j, out, ldo); break;
    default: dots<4>(a, Dh, bt, ldt, j, out, ldo); break;
  }
}

// acc_r[d] = fma(w_r(j), x_j[d], acc_r[d]) for j in [j0, j1) ascending, for
// rows r < R, one lane per d; w_r(j) = w[r * wr + j * wj], x_j = x + j * ldx,
// acc_r = acc + r * lda. Every (r, d) is one chain in the spec's order; the R
// rows and up to 4 vectors of d run together to fill the registers.
//   dq:   w = dS rows (wr = ldt, wj = 1), x = K rows;
//   p·V:  w = p rows, x = V rows;
//   dk:   w = dS columns (wr = 1, wj = ldt), x = Q rows; dv: P columns, dO rows.
template <std::size_t R>
void chains_t(const float* w, std::size_t wr, std::size_t wj, const float* x, std::size_t ldx, std::size_t j0,
              std::size_t j1, std::size_t Dh, float* acc, std::size_t lda) {
  std::size_t d0 = 0;
  for (; d0 + 4 * kL <= Dh; d0 += 4 * kL) {
    Vec::V a[R][4];
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t g = 0; g < 4; ++g) a[r][g] = Vec::load(acc + r * lda + d0 + g * kL);
    for (std::size_t j = j0; j < j1; ++j) {
      const float* xj = x + j * ldx + d0;
      Vec::V xv[4];
#pragma GCC unroll 4
      for (std::size_t g = 0; g < 4; ++g) xv[g] = Vec::load(xj + g * kL);
#pragma GCC unroll 4
      for (std::size_t r = 0; r < R; ++r) {
        const Vec::V wv = Vec::bcast(w[r * wr + j * wj]);
#pragma GCC unroll 4
        for (std::size_t g = 0; g < 4; ++g) a[r][g] = Vec::fma(wv, xv[g], a[r][g]);
      }
    }
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t g = 0; g < 4; ++g) Vec::store(acc + r * lda + d0 + g * kL, a[r][g]);
  }
  for (; d0 + kL <= Dh; d0 += kL) {
    Vec::V a[R];
    for (std::size_t r = 0; r < R; ++r) a[r] = Vec::load(acc + r * lda + d0);
    for (std::size_t j = j0; j < j1; ++j) {
      const Vec::V xv = Vec::load(x + j * ldx + d0);
#pragma GCC unroll 4
      for (std::size_t r = 0; r < R; ++r) a[r] = Vec::fma(Vec::bcast(w[r * wr + j * wj]), xv, a[r]);
    }
    for (std::size_t r = 0; r < R; ++r) Vec::store(acc + r * lda + d0, a[r]);
  }
  for (; d0 < Dh; ++d0)
    for (std::size_t r = 0; r < R; ++r) {
      float a = acc[r * lda + d0];
      for (std::size_t j = j0; j < j1; ++j) a = fma_rn(w[r * wr + j * wj], x[j * ldx + d0], a);
      acc[r * lda + d0] = a;
    }
}

void chains(std::size_t rows, const float* w, std::size_t wr, std::size_t wj, const float* x, std::size_t ldx,
            std::size_t j0, std::size_t j1, std::size_t Dh, float* acc, std::size_t lda) {
  if (j1 <= j0) return;
  switch (rows) {
    case 1: chains_t<1>(w, wr, wj, x, ldx, j0, j1, Dh, acc, lda); break;
    case 2: chains_t<2>(w, wr, wj, x, ldx, j0, j1, Dh, acc, lda); break;
    case 3: chains_t<3>(w, wr, wj, x, ldx, j0, j1, Dh, acc, lda); break;
    default: chains_t<4>(w, wr, wj, x, ldx, j0, j1, Dh, acc, lda); break;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Forward.
// ---------------------------------------------------------------------------
void OpKernels::run(const ops::Attention::Config& c, const ops::Attention::FwdArgs<float>& args) {
  const auto& [q, ldq, k, v, ldkv, o, lse] = args;
  ops::Attention::validate(c);
  const std::size_t T = c.seq, Dh = c.head_dim, Hq = c.q_heads, rep = c.q_heads / c.kv_heads, KB = c.key_block;
  const float scale = ops::Attention::scale_of<float>(c);
  const std::size_t ldt = padded(T);
  // (batch, head) pairs on threads; tiny problems on the calling thread.
  const std::size_t grain = std::max<std::size_t>(1, min_parallel_work() / (T * (T + 1) / 2 * Dh + 1));
  util::parallel_for(c.batch * Hq, threads, grain, [&](std::size_t lo, std::size_t hi) {
    Scratch& sc = scratch();
    float* kt = grow(sc.kt, Dh * ldt);
    float* s = grow(sc.s, kRows * ldt);  // raw dots of the tile's rows with keys [j0, j1)
    float* acc = grow(sc.acc, kRows * Dh);
    std::size_t last_b = static_cast<std::size_t>(-1), last_g = last_b;
    for (std::size_t task = lo; task < hi; ++task) {
      const std::size_t b = task / Hq, h = task % Hq, g = h / rep;
      const float* kb = k + b * T * ldkv + g * Dh;
      const float* vb = v + b * T * ldkv + g * Dh;
      if (b != last_b || g != last_g) transpose(kb, ldkv, T, Dh, kt, ldt);
      last_b = b, last_g = g;
      for (std::size_t i0 = 0; i0 < T; i0 += kRows) {
        const std::size_t rows = std::min(kRows, T - i0), i_last = i0 + rows - 1;
        const float* qr[kRows];
        for (std::size_t r = 0; r < kRows; ++r) qr[r] = q + (b * T + i0 + std::min(r, rows - 1)) * ldq + h * Dh;
        float m[kRows] = {}, l[kRows] = {};
        std::fill(acc, acc + kRows * Dh, 0.0f);
        for (std::size_t j0 = 0; j0 <= i_last; j0 += KB) {
          const std::size_t jend = std::min(j0 + KB, i_last + 1);  // keys any row of the tile needs
          dots_range(qr, Dh, kt, ldt, j0, jend, s, ldt);
          // The rows that take part in this block: r0.. (row i needs keys <= i).
          const std::size_t r0 = j0 > i0 ? j0 - i0 : 0;
          std::size_t j1[kRows] = {};
          float mb[kRows] = {};
          for (std::size_t r = r0; r < rows; ++r) {
            j1[r] = std::min(j0 + KB, i0 + r + 1);
            float* sr = s + r * ldt;
            for (std::size_t j = j0; j < j1[r]; ++j) sr[j] = red::canonical_nan(sr[j]) * scale;
            mb[r] = sr[j0];
          }
          // The block maxima: mb = max2(mb, s_j), j ascending, the rows interleaved.
          fold_rows(r0, rows, mb, s, ldt, j0 + 1, j1, [](float x, float y) { return ops::max2(x, y); });
          for (std::size_t r = r0; r < rows; ++r) {
            float* sr = s + r * ldt;
            float* ar = acc + r * Dh;
            if (j0 == 0) {
              m[r] = mb[r];
            } else {
              const float mn = ops::max2(m[r], mb[r]);
              const float alpha = num::exp(m[r] - mn);
              l[r] = l[r] * alpha;
              for (std::size_t d = 0; d < Dh; ++d) ar[d] = ar[d] * alpha;
              m[r] = mn;
            }
            // p_j = exp(s_j - m) overwrites the score.
            for (std::size_t j = j0; j < j1[r]; ++j) sr[j] = sr[j] - m[r];
            exp_n(sr + j0, sr + j0, j1[r] - j0);
          }
          // l = l + p_j in key order, the rows interleaved.
          fold_rows(r0, rows, l, s, ldt, j0, j1, [](float x, float y) { return x + y; });
          // acc_r = fma(p_j, v_j, acc_r), j ascending: the keys every row of
          // the tile takes (up to key i0) together, then each row's own.
          const std::size_t jc = std::min(j0 + KB, i0 + 1);
          chains(rows, s, ldt, 1, vb, ldkv, j0, jc, Dh, acc, Dh);
          for (std::size_t r = 1; r < rows; ++r)
            chains(1, s + r * ldt, ldt, 1, vb, ldkv, std::max(jc, j0), std::min(j0 + KB, i0 + r + 1), Dh,
                   acc + r * Dh, Dh);
        }
        for (std::size_t r = 0; r < rows; ++r) {
          const std::size_t i = i0 + r;
          float* oi = o + ((b * T + i) * Hq + h) * Dh;
          for (std::size_t d = 0; d < Dh; ++d) oi[d] = acc[r * Dh + d] / l[r];
          lse[(b * Hq + h) * T + i] = m[r] + num::log(l[r]);
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------
// Backward.
// ---------------------------------------------------------------------------
void OpKernels::run(const ops::Attention::Config& c, const ops::Attention::BwdArgs<float>& args) {
  const auto& [q, ldq, k, v, ldkv, o, lse, dout, dq, dk, dv] = args;
  ops::Attention::validate(c);
  const std::size_t T = c.seq, Dh = c.head_dim, Hq = c.q_heads, Hkv = c.kv_heads, rep = Hq / Hkv;
  const std::size_t ldo = Hq * Dh;  // o, dout: contiguous [tokens, Hq·Dh]
  const float scale = ops::Attention::scale_of<float>(c);
  const std::size_t ldt = padded(T);
  const std::size_t grain = std::max<std::size_t>(1, min_parallel_work() / (rep * T * (T + 1) * Dh + 1));
  util::parallel_for(c.batch * Hkv, threads, grain, [&](std::size_t lo, std::size_t hi) {
    Scratch& sc = scratch();
    float* kt = grow(sc.kt, Dh * ldt);
    float* vt = grow(sc.vt, Dh * ldt);
    float* sd = grow(sc.s, kRows * ldt);
    float* pd = grow(sc.dp, kRows * ldt);
    float* acc = grow(sc.acc, kRows * Dh);
    // P and dS of the group's rep heads: [rep, T, ldt], row i valid for j <= i.
    float* P = grow(sc.P, rep * T * ldt);
    float* dS = grow(sc.dS, rep * T * ldt);
    for (std::size_t task = lo; task < hi; ++task) {
      const std::size_t b = task / Hkv, kv = task % Hkv;
      const float* kb = k + b * T * ldkv + kv * Dh;
      const float* vb = v + b * T * ldkv + kv * Dh;
      transpose(kb, ldkv, T, Dh, kt, ldt);
      transpose(vb, ldkv, T, Dh, vt, ldt);
      for (std::size_t r = 0; r < rep; ++r) {
        const std::size_t h = kv * rep + r;
        const float* qh = q + b * T * ldq + h * Dh;        // row i at i * ldq
        const float* doh = dout + b * T * ldo + h * Dh;    // row i at i * ldo
        float* Pr = P + r * T * ldt;
        float* dSr = dS + r * T * ldt;
        for (std::size_t i0 = 0; i0 < T; i0 += kRows) {
          const std::size_t rows = std::min(kRows, T - i0), i_last = i0 + rows - 1;
          const float* qr[kRows];
          const float* dor[kRows];
          for (std::size_t t = 0; t < kRows; ++t) {
            const std::size_t i = i0 + std::min(t, rows - 1);
            qr[t] = qh + i * ldq;
            dor[t] = doh + i * ldo;
          }
          // Raw dots q·k and dO·v of the tile's rows with keys 0..i_last.
          dots_range(qr, Dh, kt, ldt, 0, i_last + 1, sd, ldt);
          dots_range(dor, Dh, vt, ldt, 0, i_last + 1, pd, ldt);
          // D_i = dot_seq(dO_i, o_i): the tile's rows' chains interleaved (d ascending each).
          float Dv[kRows] = {};
          {
            const float* orow[kRows];
            for (std::size_t t = 0; t < kRows; ++t) orow[t] = o + (b * T + i0 + std::min(t, rows - 1)) * ldo + h * Dh;
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            for (std::size_t d = 0; d < Dh; ++d) {
              a0 = fma_rn(dor[0][d], orow[0][d], a0);
              a1 = fma_rn(dor[1][d], orow[1][d], a1);
              a2 = fma_rn(dor[2][d], orow[2][d], a2);
              a3 = fma_rn(dor[3][d], orow[3][d], a3);
            }
            Dv[0] = red::canonical_nan(a0), Dv[1] = red::canonical_nan(a1), Dv[2] = red::canonical_nan(a2),
            Dv[3] = red::canonical_nan(a3);
          }
          for (std::size_t t = 0; t < rows; ++t) {
            const std::size_t i = i0 + t;
            const float Di = Dv[t];
            const float ls = lse[(b * Hq + h) * T + i];
            const float* st = sd + t * ldt;
            const float* pt = pd + t * ldt;
            float* Pi = Pr + i * ldt;
            float* dSi = dSr + i * ldt;
            for (std::size_t j = 0; j <= i; ++j) Pi[j] = red::canonical_nan(st[j]) * scale - ls;
            exp_n(Pi, Pi, i + 1);  // P_ij = exp(s_ij - lse_i)
            for (std::size_t j = 0; j <= i; ++j) dSi[j] = Pi[j] * (red::canonical_nan(pt[j]) - Di);
          }
          // dq_i = chain_{j=0..i}(dS_ij · k_j) · scale: keys 0..i0 for the
          // whole tile, then each row's own tail i0+1..i.
          std::fill(acc, acc + kRows * Dh, 0.0f);
          chains(rows, dSr + i0 * ldt, ldt, 1, kb, ldkv, 0, i0 + 1, Dh, acc, Dh);
          for (std::size_t t = 1; t < rows; ++t)
            chains(1, dSr + (i0 + t) * ldt, ldt, 1, kb, ldkv, i0 + 1, i0 + t + 1, Dh, acc + t * Dh, Dh);
          for (std::size_t t = 0; t < rows; ++t) {
            float* dqi = dq + (b * T + i0 + t) * ldq + h * Dh;
            for (std::size_t d = 0; d < Dh; ++d) dqi[d] = acc[t * Dh + d] * scale;
          }
        }
      }
      // dk_j = chain_{r} chain_{i=j..T-1}(dS^r_ij · q^r_i) · scale and
      // dv_j = chain_{r} chain_{i=j..T-1}(P^r_ij · dO^r_i), 4 keys at a time:
      // key j0 + t joins the chain at i = j0 + t.
      for (int pass = 0; pass < 2; ++pass) {
        const float* W = pass == 0 ? dS : P;
        for (std::size_t j0 = 0; j0 < T; j0 += kRows) {
          const std::size_t keys = std::min(kRows, T - j0);
          std::fill(acc, acc + kRows * Dh, 0.0f);
          for (std::size_t r = 0; r < rep; ++r) {
            const std::size_t h = kv * rep + r;
            const float* x = pass == 0 ? q + b * T * ldq + h * Dh : dout + b * T * ldo + h * Dh;
            const std::size_t ldx = pass == 0 ? ldq : ldo;
            const float* Wr = W + r * T * ldt;
            // Rows i in [j0, j0 + keys - 1): only keys j0..i take part.
            for (std::size_t i = j0; i + 1 < j0 + keys; ++i)
              chains(i - j0 + 1, Wr + j0, 1, ldt, x, ldx, i, i + 1, Dh, acc, Dh);
            // Rows i >= j0 + keys - 1: every key of the tile.
            chains(keys, Wr + j0, 1, ldt, x, ldx, j0 + keys - 1, T, Dh, acc, Dh);
          }
          for (std::size_t t = 0; t < keys; ++t) {
            const std::size_t j = j0 + t;
            float* out = (pass == 0 ? dk : dv) + (b * T + j) * ldkv + kv * Dh;
            const float* at = acc + t * Dh;
            if (pass == 0)
              for (std::size_t d = 0; d < Dh; ++d) out[d] = at[d] * scale;
            else
              std::copy(at, at + Dh, out);
          }
        }
      }
    }
  });
}

}  // namespace lockstep::cpu
