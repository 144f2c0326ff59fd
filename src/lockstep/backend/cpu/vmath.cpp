#include "lockstep/backend/cpu/vmath.hpp"

#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "lockstep/num/elementary.hpp"

namespace lockstep::cpu {

#if defined(__AVX512F__)
namespace {

// One float per lane; every operation is the lane-wise IEEE primitive the
// scalar code's detail::V<HwArith> operator performs.
using F = __m512;
inline F k(float v) { return _mm512_set1_ps(v); }
inline F add(F a, F b) { return _mm512_add_ps(a, b); }
inline F sub(F a, F b) { return _mm512_sub_ps(a, b); }
inline F mul(F a, F b) { return _mm512_mul_ps(a, b); }
inline F div(F a, F b) { return _mm512_div_ps(a, b); }
inline F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
inline F neg(F a) {  // sign-bit flip, as V's unary minus
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
}

struct DF {
  F hi, lo;
};
// detail::fast_two_sum, two_sum, two_prod.
inline DF fast_two_sum(F a, F b) {
  const F s = add(a, b);
  return {s, sub(b, sub(s, a))};
}
inline DF two_sum(F a, F b) {
  const F s = add(a, b);
  const F bb = sub(s, a);
  return {s, add(sub(a, sub(s, bb)), sub(b, bb))};
}
inline DF two_prod(F a, F b) {
  const F p = mul(a, b);
  return {p, fma(a, b, neg(p))};
}
// detail::pow2i for k in the normal range.
inline F pow2i(__m512i kk) {
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, _mm512_add_epi32(kk, _mm512_set1_epi32(127)), 23));
}

// detail::exp_reduce.
struct ExpArg {
  __m512i k;
  F rh, rl;
};
inline ExpArg exp_reduce(F x) {
  const F shifter = k(0x1.8p23f);
  const F kf = sub(add(mul(x, k(0x1.715476p+0f)), shifter), shifter);  // round_int(x * log2(e))
  const F rh = fma(neg(kf), k(0x1.62e43p-1f), x);
  const F rl = mul(neg(kf), k(-0x1.05c61p-29f));
  // kf is an integer: the conversion is exact. (The maskz forms avoid GCC 12's
  // false "maybe uninitialized" on the unmasked intrinsics.)
  return {_mm512_maskz_cvttps_epi32(0xFFFF, kf), rh, rl};
}

// detail::expm1_core.
inline DF expm1_core(F rh, F rl) {
  const F half_r = mul(k(0.5f), rh);
  const DF h = two_prod(half_r, rh);
  const DF t = two_prod(h.hi, rh);
  const F tl = add(t.lo, mul(h.lo, rh));
  const F third_h = k(0x1.555556p-2f), third_l = k(-0x1.555556p-27f);
  const DF c = two_prod(t.hi, third_h);
  const F cl = add(c.lo, add(mul(t.hi, third_l), mul(tl, third_h)));
  F q = k(0x1.71de3ap-19f);
  q = fma(q, rh, k(0x1.a01a02p-16f));
  q = fma(q, rh, k(0x1.a01a02p-13f));
  q = fma(q, rh, k(0x1.6c16c2p-10f));
  q = fma(q, rh, k(0x1.111112p-7f));
  q = fma(q, rh, k(0x1.555556p-5f));
  const F r2 = mul(rh, rh);
  const DF s1 = fast_two_sum(rh, h.hi);
  const DF s2 = fast_two_sum(s1.hi, c.hi);
  const F tail = fma(mul(r2, r2), q, fma(rl, s2.hi, rl));
  const F lo = add(add(add(tail, add(h.lo, cl)), s1.lo), s2.lo);
  return fast_two_sum(s2.hi, lo);
}

// num::exp on 16 lanes; `ok` marks the lanes computed here (the others
// need the scalar function's special paths).
inline F exp16(F x, __mmask16& ok) {
  ok = _mm512_cmp_ps_mask(x, k(89.0f), _CMP_LE_OQ) & _mm512_cmp_ps_mask(x, k(-104.0f), _CMP_GE_OQ);
  const ExpArg e = exp_reduce(x);
  // exp_finish, normal results only (k in [-125, 127]).
  ok &= _mm512_cmpgt_epi32_mask(e.k, _mm512_set1_epi32(-126)) & _mm512_cmple_epi32_mask(e.k, _mm512_set1_epi32(127));
  const DF P = expm1_core(e.rh, e.rl);
  const DF S = fast_two_sum(k(1.0f), P.hi);
  const F sl = add(S.lo, P.lo);
  const F m = add(S.hi, sl);
  return mul(m, pow2i(_mm512_mask_mov_epi32(_mm512_setzero_si512(), ok, e.k)));
}

// num::tanh on 16 lanes (|x| in [2^-13, 10): the others are the scalar's).
inline F tanh16(F x, __mmask16& ok) {
  const __m512i bits = _mm512_castps_si512(x);
  const __m512i sign = _mm512_and_si512(bits, _mm512_set1_epi32(INT32_MIN));
  const F a = _mm512_castsi512_ps(_mm512_and_si512(bits, _mm512_set1_epi32(INT32_MAX)));
  ok = _mm512_cmp_ps_mask(a, k(10.0f), _CMP_LT_OQ) & _mm512_cmp_ps_mask(a, k(0x1p-13f), _CMP_GE_OQ);
  // u = expm1_dd(-(a + a)), detail::expm1_dd: k in [-29, 0] here.
  const ExpArg e = exp_reduce(neg(add(a, a)));
  const DF P = expm1_core(e.rh, e.rl);
  const DF S = fast_two_sum(k(1.0f), P.hi);
  const F scale = pow2i(e.k);
  const F th = mul(S.hi, scale);
  const F tl = mul(add(S.lo, P.lo), scale);
  const DF w = two_sum(th, k(-1.0f));
  const DF uk = fast_two_sum(w.hi, add(w.lo, tl));
  const __mmask16 k0 = _mm512_cmpeq_epi32_mask(e.k, _mm512_setzero_si512());
  const DF u{_mm512_mask_blend_ps(k0, uk.hi, P.hi), _mm512_mask_blend_ps(k0, uk.lo, P.lo)};
  // tanh|x| = -u / (2 + u), the division corrected by its exact remainder.
  const DF d = fast_two_sum(k(2.0f), u.hi);
  const F dl = add(d.lo, u.lo);
  const F nh = neg(u.hi), nl = neg(u.lo);
  const F q = div(nh, d.hi);
  const F rho = add(fma(neg(q), d.hi, nh), sub(nl, mul(q, dl)));
  const F t = add(q, div(rho, d.hi));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), sign));
}

// num::sigmoid on 16 lanes (x in [-40, 20]: the others are the scalar's).
inline F sigmoid16(F x, __mmask16& ok) {
  ok = _mm512_cmp_ps_mask(x, k(20.0f), _CMP_LE_OQ) & _mm512_cmp_ps_mask(x, k(-40.0f), _CMP_GE_OQ);
  const F a = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MAX)));
  // E = exp_dd(exp_reduce(-a)): k in [-58, 0] here.
  const ExpArg e = exp_reduce(neg(a));
  const DF P = expm1_core(e.rh, e.rl);
  const DF S = fast_two_sum(k(1.0f), P.hi);
  const F scale = pow2i(e.k);
  const DF E = fast_two_sum(mul(S.hi, scale), mul(add(S.lo, P.lo), scale));
  const DF d = fast_two_sum(k(1.0f), E.hi);
  const F dl = add(d.lo, E.lo);
  const __mmask16 neg_x = _mm512_cmp_ps_mask(x, k(0.0f), _CMP_LT_OQ);  // pos = !(x < 0)
  const F nh = _mm512_mask_blend_ps(neg_x, k(1.0f), E.hi);
  const F nl = _mm512_mask_blend_ps(neg_x, k(0.0f), E.lo);
  const F q = div(nh, d.hi);
  const F rho = add(fma(neg(q), d.hi, nh), sub(nl, mul(q, dl)));
  return add(q, div(rho, d.hi));
}

template <float (*Scalar)(float), F (*Lanes)(F, __mmask16&)>
void apply(const float* x, float* y, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const F xv = _mm512_loadu_ps(x + i);
    __mmask16 ok;
    const F r = Lanes(xv, ok);
    if (ok != 0xFFFF) {  // (y may alias x: keep the inputs of the scalar lanes)
      alignas(64) float xs[16];
      _mm512_store_ps(xs, xv);
      _mm512_storeu_ps(y + i, r);
      for (unsigned l = 0; l < 16; ++l)
        if (!(ok >> l & 1u)) y[i + l] = Scalar(xs[l]);
    } else {
      _mm512_storeu_ps(y + i, r);
    }
  }
  for (; i < n; ++i) y[i] = Scalar(x[i]);
}

float exp1(float x) { return num::exp(x); }
float tanh1(float x) { return num::tanh(x); }
float sigmoid1(float x) { return num::sigmoid(x); }

}  // namespace

void exp_n(const float* x, float* y, std::size_t n) { apply<exp1, exp16>(x, y, n); }
void tanh_n(const float* x, float* y, std::size_t n) { apply<tanh1, tanh16>(x, y, n); }
void sigmoid_n(const float* x, float* y, std::size_t n) { apply<sigmoid1, sigmoid16>(x, y, n); }
bool vmath_vectorized() { return true; }

#else

void exp_n(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = num::exp(x[i]);
}
void tanh_n(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = num::tanh(x[i]);
}
void sigmoid_n(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = num::sigmoid(x[i]);
}
bool vmath_vectorized() { return false; }

#endif

}  // namespace lockstep::cpu
