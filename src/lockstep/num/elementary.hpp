// lockstep's elementary functions: exp, exp2, expm1, log, log2, log1p, tanh,
// sigmoid, sin, cos, sincos, rsqrt, pow — float -> float, identical bits on
// every IEEE-754 device.
//
// Why our own: libm/CUDA implementations differ between platforms and versions
// (different polynomials, tables, fma use), so the same input gives different
// bits on the CPU and the GPU. Here every function is ONE fixed sequence of
// correctly rounded binary32 primitives — add, sub, mul, fma, div, sqrt,
// int32->f32, comparisons, selects, exponent-bit manipulation — plus exact
// integer arithmetic (sin/cos argument reduction). No double, no table in
// memory, no libm call. Any machine that rounds those primitives as IEEE 754
// says computes the same bits. docs/NUMERICS.md ("Elementary functions")
// states each algorithm and its measured error.
//
// Arithmetic policy. Every function is a template over a policy `A` that
// supplies the rounded primitives (A::add, sub, mul, div, sqrt, fma, from_int).
// The default, HwArith, is the machine's float arithmetic (num::fma_rn for fma;
// CUDA's __f*_rn intrinsics on the device, so no contraction can creep in).
// The tests instantiate the same templates with the integer IEEE oracle
// (num/ieee.hpp) as the policy and require identical bits: that proves the
// expression really is a fixed sequence of IEEE primitives and nothing else.
// Inside the functions, values are wrapped in detail::V<A>, whose operators
// call the policy, so `a * b + c` is a mul then an add through A — never an
// fma, never hardware arithmetic behind the policy's back.
//
// Usage: num::exp(x) (default policy). Calling with a double is a compile
// error (deleted overloads below) so a double expression never narrows into
// these functions silently.
#pragma once

#include <cstdint>

#include "lockstep/num/fp.hpp"

namespace lockstep::num {

// ---------------------------------------------------------------------------
// The default arithmetic policy: the machine's correctly rounded float ops.
// ---------------------------------------------------------------------------
struct HwArith {
#if defined(__CUDA_ARCH__)
  static __device__ float add(float a, float b) { return __fadd_rn(a, b); }
  static __device__ float sub(float a, float b) { return __fsub_rn(a, b); }
  static __device__ float mul(float a, float b) { return __fmul_rn(a, b); }
  static __device__ float div(float a, float b) { return __fdiv_rn(a, b); }
  static __device__ float sqrt(float a) { return __fsqrt_rn(a); }
  static __device__ float fma(float a, float b, float c) { return fma_rn(a, b, c); }
  static __device__ float from_int(std::int32_t i) { return __int2float_rn(i); }
#else
  // Host: compiled with -ffp-contract=off (CMakeLists.txt), so each operator
  // is exactly one rounded SSE instruction; std::sqrt(float) is sqrtss.
  static float add(float a, float b) { return a + b; }
  static float sub(float a, float b) { return a - b; }
  static float mul(float a, float b) { return a * b; }
  static float div(float a, float b) { return a / b; }
  static float sqrt(float a) { return std::sqrt(a); }
  static float fma(float a, float b, float c) { return fma_rn(a, b, c); }
  static float from_int(std::int32_t i) { return static_cast<float>(i); }
#endif
};

namespace detail {

// A float whose arithmetic goes through the policy A.
template <class A>
struct V {
  float v;
  LOCKSTEP_HD constexpr V(float x) : v(x) {}  // NOLINT: constants are written as float literals

  friend LOCKSTEP_HD V operator+(V a, V b) { return A::add(a.v, b.v); }
  friend LOCKSTEP_HD V operator-(V a, V b) { return A::sub(a.v, b.v); }
  friend LOCKSTEP_HD V operator*(V a, V b) { return A::mul(a.v, b.v); }
  friend LOCKSTEP_HD V operator/(V a, V b) { return A::div(a.v, b.v); }
  // Negation flips the sign bit: exact, no rounding, no arithmetic.
  friend LOCKSTEP_HD V operator-(V a) { return float_of(bits_of(a.v) ^ 0x80000000u); }
  friend LOCKSTEP_HD V fma(V a, V b, V c) { return A::fma(a.v, b.v, c.v); }
  friend LOCKSTEP_HD V sqrt(V a) { return A::sqrt(a.v); }
  // Comparisons are exact on every IEEE machine (no rounding involved).
  friend LOCKSTEP_HD bool operator<(V a, V b) { return a.v < b.v; }
  friend LOCKSTEP_HD bool operator>(V a, V b) { return a.v > b.v; }
  friend LOCKSTEP_HD bool operator<=(V a, V b) { return a.v <= b.v; }
  friend LOCKSTEP_HD bool operator>=(V a, V b) { return a.v >= b.v; }
  friend LOCKSTEP_HD bool operator==(V a, V b) { return a.v == b.v; }
  friend LOCKSTEP_HD bool operator!=(V a, V b) { return a.v != b.v; }
};

// A double-float: the unevaluated sum hi + lo, |lo| much smaller than |hi|.
// It carries ~48 bits through the steps where one float's 24 would lose the
// last ulp (range reduction, the leading terms of a series).
template <class A>
struct DF {
  V<A> hi, lo;
};

// Error-free transformations (exact: hi + lo equals the true result).
// fast_two_sum needs exponent(a) >= exponent(b) (or a == 0); 3 ops.
template <class A>
LOCKSTEP_HD DF<A> fast_two_sum(V<A> a, V<A> b) {
  const V<A> s = a + b;
  const V<A> e = b - (s - a);
  return {s, e};
}
// two_sum: any a, b (Knuth); 6 ops.
template <class A>
LOCKSTEP_HD DF<A> two_sum(V<A> a, V<A> b) {
  const V<A> s = a + b;
  const V<A> bb = s - a;
  const V<A> e = (a - (s - bb)) + (b - bb);
  return {s, e};
}
// two_prod: a*b exactly, through the fma (no underflow assumed).
template <class A>
LOCKSTEP_HD DF<A> two_prod(V<A> a, V<A> b) {
  const V<A> p = a * b;
  return {p, fma(a, b, -p)};
}

// 2^k as a float, k in [-126, 127] (normal range): built from the exponent bits.
LOCKSTEP_HD inline float pow2i(std::int32_t k) {
  return float_of(static_cast<std::uint32_t>(k + 127) << 23);
}

LOCKSTEP_HD inline float quiet_nan() { return float_of(0x7fc00000u); }
LOCKSTEP_HD inline float plus_inf() { return float_of(0x7f800000u); }
LOCKSTEP_HD inline bool is_nan(float x) { return (bits_of(x) & 0x7fffffffu) > 0x7f800000u; }

// Round x to the nearest integer (ties to even) for |x| < 2^22, by the
// "shifter" trick: adding 1.5 * 2^23 leaves no fraction bits, and the
// addition rounds to nearest even; subtracting it back is exact.
template <class A>
LOCKSTEP_HD V<A> round_int(V<A> x) {
  const V<A> shifter = 0x1.8p23f;
  return (x + shifter) - shifter;
}

// ---------------------------------------------------------------------------
// The exponential core.
//
// expm1_core: P = expm1(rh + rl) as a double-float, for |rh| <= 0.35 and rl a
// small correction (|rl| <= 2^-20 |rh| or |rl| <= 2^-21). Written as
//     expm1(r) = r + r^2/2 + r^3/6 + r^4 q(r),   q(r) = sum_{j>=0} r^j / (j+4)!
// with q the Taylor polynomial through r^5/9!: the first omitted term,
// r^10/10!, is below 2^-35 of the result at |r| = 0.35. r, r^2/2 and r^3/6
// (which carry all but 2^-8 of the value) are summed as double-floats
// (two_prod, fast_two_sum); the rounding errors of the small tail r^4 q stay
// below 2^-30 of the result. rl enters to first order, as rl e^rh.
// ---------------------------------------------------------------------------
template <class A>
LOCKSTEP_HD DF<A> expm1_core(V<A> rh, V<A> rl) {
  using W = V<A>;
  const W half_r = W(0.5f) * rh;          // exact (unless rh is subnormal: then r^2 is 0 anyway)
  const DF<A> h = two_prod(half_r, rh);   // r^2/2 exactly
  // r^3/6 = (r^2/2) r (1/3) as a double-float: t = r^3/2, then times 1/3 = third_h + third_l.
  const DF<A> t = two_prod(h.hi, rh);
  const W tl = t.lo + h.lo * rh;
  const W third_h = 0x1.555556p-2f, third_l = -0x1.555556p-27f;
  const DF<A> c = two_prod(t.hi, third_h);
  const W cl = c.lo + (t.hi * third_l + tl * third_h);
  // q(r) = 1/4! + r/5! + r^2/6! + r^3/7! + r^4/8! + r^5/9!  (Horner)
  W q = 0x1.71de3ap-19f;                // 1/9!
  q = fma(q, rh, 0x1.a01a02p-16f);      // 1/8!
  q = fma(q, rh, 0x1.a01a02p-13f);      // 1/7!
  q = fma(q, rh, 0x1.6c16c2p-10f);      // 1/6!
  q = fma(q, rh, 0x1.111112p-7f);       // 1/5!
  q = fma(q, rh, 0x1.555556p-5f);       // 1/4!
  const W r2 = rh * rh;
  const DF<A> s1 = fast_two_sum(rh, h.hi);    // |r| >= r^2/2 for |r| <= 2
  const DF<A> s2 = fast_two_sum(s1.hi, c.hi); // |r + r^2/2| >= |r^3/6| for |r| <= 1
  // rl enters as rl e^rh = rl (1 + expm1(rh)), expm1(rh) ~ s2.hi.
  const W tail = fma(r2 * r2, q, fma(rl, s2.hi, rl));
  const W lo = ((tail + (h.lo + cl)) + s1.lo) + s2.lo;
  return fast_two_sum(s2.hi, lo);  // renormalize: |lo| <= ulp(hi)/2
}

// exp_finish: 2^k * (1 + P), correctly scaled, for k in [-151, 128].
// 1 + P is first formed as a double-float S (exact: |P| < 1), rounded once to m.
//  - normal results: m * 2^k is exact (k = 128 is split as 2^127 * 2 so an
//    overflow rounds to inf exactly as the hardware multiply does);
//  - subnormal results: rounding m to 24 bits and then again into the
//    subnormal grid would round twice. Instead S is scaled by 2^(k+126) into
//    [0, 1) and 1 is added: 1 + y has ulp 2^-23, which is exactly the subnormal
//    grid once scaled back by 2^-126, so the ONE rounding of (1 + y) is the
//    rounding to the final grid; subtracting 1 and scaling are exact.
template <class A>
LOCKSTEP_HD float exp_finish(std::int32_t k, DF<A> P) {
  using W = V<A>;
  const W one = 1.0f;
  const DF<A> S = fast_two_sum(one, P.hi);
  const W sl = S.lo + P.lo;
  const W m = S.hi + sl;
  if (k > -126 || (k == -126 && m >= one)) {
    if (k <= 127) return (m * W(pow2i(k))).v;
    return ((m * W(0x1p127f)) * W(2.0f)).v;  // may overflow to +inf: correctly
  }
  const W scale = pow2i(k + 126);  // 2^-25 .. 1
  const W yh = S.hi * scale;       // exact (normal range)
  const W yl = sl * scale;
  const DF<A> t = fast_two_sum(one, yh);  // yh <= 1
  const W y = (t.hi + (t.lo + yl)) - one;  // one rounding, then exact
  return (y * W(0x1p-126f)).v;              // exact: y is a multiple of 2^-23
}

// Reduction for exp: x = k ln2 + (rh + rl), k = round(x / ln2), |rh| <= 0.35.
// rh = x - k*ln2_hi is EXACT (one fma, and the difference fits in 24 bits:
// x and k*ln2_hi are multiples of 2^-24 when |x| >= 1, Sterbenz otherwise);
// rl = -k*ln2_lo carries the rest of ln2. Valid for |x| <= 104.
template <class A>
struct ExpArg {
  std::int32_t k;
  V<A> rh, rl;
};
template <class A>
LOCKSTEP_HD ExpArg<A> exp_reduce(V<A> x) {
  using W = V<A>;
  const W kf = round_int(x * W(0x1.715476p+0f));  // x * log2(e)
  const W rh = fma(-kf, 0x1.62e43p-1f, x);         // ln2_hi (float nearest ln 2)
  const W rl = -kf * W(-0x1.05c61p-29f);           // ln2_lo = ln 2 - ln2_hi
  return {static_cast<std::int32_t>(kf.v), rh, rl};
}

// exp(rh + rl) * 2^k as a double-float BEFORE the final rounding (used by
// sigmoid, where the result is divided further). Only for k >= -100 (no
// underflow of the low part): callers guarantee it.
template <class A>
LOCKSTEP_HD DF<A> exp_dd(ExpArg<A> e) {
  using W = V<A>;
  const DF<A> P = expm1_core(e.rh, e.rl);
  const DF<A> S = fast_two_sum(W(1.0f), P.hi);
  const W scale = pow2i(e.k);
  return fast_two_sum(S.hi * scale, (S.lo + P.lo) * scale);
}

// expm1(x) as a double-float for x in (-20, 0) (tanh's core): k = 0 gives P
// directly; otherwise 2^k (1 + P) - 1 with the subtraction done by two_sum.
template <class A>
LOCKSTEP_HD DF<A> expm1_dd(V<A> x) {
  using W = V<A>;
  const ExpArg<A> e = exp_reduce(x);
  const DF<A> P = expm1_core(e.rh, e.rl);
  if (e.k == 0) return P;
  const DF<A> S = fast_two_sum(W(1.0f), P.hi);
  const W scale = pow2i(e.k);
  const W th = S.hi * scale;
  const W tl = (S.lo + P.lo) * scale;
  const DF<A> u = two_sum(th, W(-1.0f));
  return fast_two_sum(u.hi, u.lo + tl);
}

// ---------------------------------------------------------------------------
// The logarithm core.
//
// log_dd_core: log(m + ml) as a double-float for m in [sqrt(1/2), sqrt(2)],
// ml a small correction. With s = (m - 1 + ml)/(m + 1 + ml), |s| <= 0.1716,
//     log(m) = 2 atanh(s) = 2s + 2s^3/3 + 2s^5/5 + ... + 2s^15/15 + ...
// The first omitted term, 2s^17/17, is below 2^-44 of the sum. s is a
// double-float (division + exact fma remainder), 2s^3/3 and 2s^5/5 are
// double-float products, the rest (<= 2^-18 of the sum) is one float Horner
// polynomial: the result is accurate to about 2^-40 relative — enough for
// pow, whose result error is |y log x| times this.
// ---------------------------------------------------------------------------
template <class A>
LOCKSTEP_HD DF<A> log_dd_core(V<A> m, V<A> ml) {
  using W = V<A>;
  const W one = 1.0f;
  const W f = m - one;                        // exact (Sterbenz)
  const DF<A> n = two_sum(f, ml);             // numerator m - 1 + ml
  const DF<A> d0 = fast_two_sum(one, m);      // m + 1 exactly (exponent(1) >= exponent(m))
  const W dl = d0.lo + ml;                    // denominator d0.hi + dl
  const W sh = n.hi / d0.hi;
  W rho = fma(-sh, d0.hi, n.hi);              // exact remainder of the division
  rho = rho + (n.lo - sh * dl);
  const W sl = rho / d0.hi;                   // s = sh + sl
  // s^2, s^3 and (2/3) s^3 as double-floats.
  const DF<A> s2p = two_prod(sh, sh);
  const W s2l = s2p.lo + (sh + sh) * sl;
  const DF<A> s3p = two_prod(sh, s2p.hi);
  const W s3l = s3p.lo + (sh * s2l + sl * s2p.hi);
  const W c3h = 0x1.555556p-1f, c3l = -0x1.555556p-26f;  // 2/3 = c3h + c3l
  const DF<A> t3p = two_prod(c3h, s3p.hi);
  const W t3l = t3p.lo + (c3h * s3l + c3l * s3p.hi);
  // s^5 and (2/5) s^5 as double-floats.
  const DF<A> s5p = two_prod(s3p.hi, s2p.hi);
  const W s5l = s5p.lo + (s3p.hi * s2l + s3l * s2p.hi);
  const W c5h = 0x1.99999ap-2f, c5l = -0x1.99999ap-28f;  // 2/5 = c5h + c5l
  const DF<A> t5p = two_prod(c5h, s5p.hi);
  const W t5l = t5p.lo + (c5h * s5l + c5l * s5p.hi);
  // 2/7 + 2/9 s^2 + ... + 2/15 s^8 (Horner in s^2), times s^7.
  const W z = s2p.hi;
  W T = 0x1.111112p-3f;          // 2/15
  T = fma(T, z, 0x1.3b13b2p-3f);  // 2/13
  T = fma(T, z, 0x1.745d18p-3f);  // 2/11
  T = fma(T, z, 0x1.c71c72p-3f);  // 2/9
  T = fma(T, z, 0x1.24924ap-2f);  // 2/7
  const W t7 = (s5p.hi * z) * T;   // s^7 T(s^2)
  const W two_sh = sh + sh;        // exact
  const DF<A> L3 = fast_two_sum(two_sh, t3p.hi);  // |2s| >= (2/3)|s|^3
  const DF<A> L5 = fast_two_sum(L3.hi, t5p.hi);   // ... >= (2/5)|s|^5
  const W lo = ((sl + sl) + ((t3l + t5l) + t7)) + (L3.lo + L5.lo);
  return fast_two_sum(L5.hi, lo);
}

// log(a) as a double-float for finite a > 0 (subnormals included):
// a = 2^E m with m in [sqrt(1/2), sqrt(2)); log a = E ln2 + log m, E*ln2_hi
// exact (ln2_hi has 15 significant bits, |E| < 2^8).
template <class A>
struct LogSplit {
  std::int32_t E;
  V<A> m;
};
template <class A>
LOCKSTEP_HD LogSplit<A> log_split(V<A> a) {
  std::int32_t E = 0;
  if (a < V<A>(0x1p-126f)) {  // subnormal: scale into the normal range (exact)
    a = a * V<A>(0x1p23f);
    E = -23;
  }
  const std::uint32_t u = bits_of(a.v);
  E += static_cast<std::int32_t>(u >> 23) - 127;
  std::uint32_t mant = u & 0x007fffffu;
  // m = 1.mant in [1, 2); above sqrt(2) (0x1.6a09e6p0 rounds up) use m/2, E+1.
  if (mant > 0x3504f3u) {
    E += 1;
    return {E, float_of(mant | 0x3f000000u)};  // exponent of [0.5, 1)
  }
  return {E, float_of(mant | 0x3f800000u)};
}

template <class A>
LOCKSTEP_HD DF<A> add_E_ln2(std::int32_t E, DF<A> L) {
  using W = V<A>;
  if (E == 0) return L;
  const W Ef = A::from_int(E);
  const W ah = Ef * W(0x1.62e4p-1f);      // exact: 15-bit constant times |E| < 2^8
  const W al = Ef * W(0x1.7f7d1cp-20f);   // ln 2 - 0x1.62e4p-1
  const DF<A> T = fast_two_sum(ah, L.hi); // |E ln2| >= 0.69 > |log m| <= 0.35
  return fast_two_sum(T.hi, T.lo + (L.lo + al));
}

template <class A>
LOCKSTEP_HD DF<A> log_dd(V<A> a) {
  const LogSplit<A> sp = log_split(a);
  return add_E_ln2(sp.E, log_dd_core(sp.m, V<A>(0.0f)));
}

// ---------------------------------------------------------------------------
// sin / cos.
//
// Argument reduction: |x| = N pi/2 + r, |r| <= pi/4, by Payne-Hanek in exact
// integer arithmetic, for every finite float (up to 3.4e38). x = M 2^E with
// M a 24-bit integer; x * 2/pi mod 4 needs only the bits of 2/pi from weight
// 2^-(E-1) on (earlier bits give multiples of 4): a 96-bit window of them times
// M is a 120-bit product whose bits give N mod 4 and 64 bits of fraction.
// The window's truncation and the dropped low bits cost < 2^-63 absolute in
// the fraction; the worst cancellation for binary32 inputs (the float closest
// to a multiple of pi/2, x = 0x1.47d0fep+34, |r| = 2^-29.2) still leaves 35
// significant bits (measured over every float: ulp_exhaustive --reduction),
// so r is good to far better than float precision.
// ---------------------------------------------------------------------------

// Bits of 2/pi: word j holds the bits of weights 2^-(32j+1) .. 2^-(32j+32).
LOCKSTEP_HD inline std::uint32_t two_over_pi_word(int j) {
  switch (j) {
    case 0: return 0xA2F9836Eu;
    case 1: return 0x4E441529u;
    case 2: return 0xFC2757D1u;
    case 3: return 0xF534DDC0u;
    case 4: return 0xDB629599u;
    case 5: return 0x3C439041u;
    case 6: return 0xFE5163ABu;
    case 7: return 0xDEBBC561u;
    default: return 0xB7246E3Au;
  }
}

// 32 bits of 2/pi starting at bit offset o (o = 0: weight 2^-1 first).
LOCKSTEP_HD inline std::uint32_t two_over_pi_bits(int o) {
  const int j = o >> 5, b = o & 31;
  const std::uint64_t pair =
      (static_cast<std::uint64_t>(two_over_pi_word(j)) << 32) | two_over_pi_word(j + 1);
  return static_cast<std::uint32_t>(pair >> (32 - b));
}

LOCKSTEP_HD inline int clz64(std::uint64_t v) {  // v != 0
#if defined(__CUDA_ARCH__)
  return __clzll(static_cast<long long>(v));
#else
  return __builtin_clzll(v);
#endif
}

template <class A>
struct Reduced {
  std::uint32_t n;  // quadrant, mod 4
  V<A> rh, rl;      // r = rh + rl, |r| <= pi/4 (plus a hair)
};

// a = |x|, finite, a > pi/4.
template <class A>
LOCKSTEP_HD Reduced<A> reduce_pio2(V<A> a) {
  using W = V<A>;
  const std::uint32_t u = bits_of(a.v);
  const std::int32_t E = static_cast<std::int32_t>(u >> 23) - 150;  // a = M 2^E
  const std::uint64_t M = (u & 0x007fffffu) | 0x00800000u;
  // Window start i0 (weight 2^-i0 of 2/pi) and the shift that places the
  // binary point of x*2/pi at bit 64 of (P >> s).
  const int i0 = E <= 2 ? 1 : E - 1;
  const int s = E <= 2 ? 32 - E : 30;
  const std::uint64_t w0 = two_over_pi_bits(i0 - 1);
  const std::uint64_t w1 = two_over_pi_bits(i0 + 31);
  const std::uint64_t w2 = two_over_pi_bits(i0 + 63);
  // P = M * (w0 2^64 + w1 2^32 + w2) as hi:lo (128 bits; P < 2^120).
  const std::uint64_t a2 = M * w2, a1 = M * w1, a0 = M * w0;
  const std::uint64_t lo = a2 + (a1 << 32);
  const std::uint64_t carry = lo < a2 ? 1u : 0u;
  const std::uint64_t hi = a0 + (a1 >> 32) + carry;
  std::uint64_t frac = (lo >> s) | (hi << (64 - s));  // 64 fraction bits
  std::uint32_t n = static_cast<std::uint32_t>(hi >> s) & 3u;
  // Round to the nearest quadrant: a fraction >= 1/2 becomes negative.
  const bool neg = (frac >> 63) != 0;
  if (neg) {
    n = (n + 1) & 3u;
    frac = ~frac + 1;  // magnitude 2^64 - frac
  }
  if (frac == 0) return {n, W(0.0f), W(0.0f)};  // cannot happen for a float (pi irrational)
  const int L = clz64(frac);
  const std::uint64_t norm = frac << L;  // top bit set; value = norm 2^(-64-L)
  const std::int32_t hi24 = static_cast<std::int32_t>(norm >> 40);
  const std::int32_t lo24 = static_cast<std::int32_t>((norm >> 16) & 0xffffffu);
  const W fh = W(A::from_int(hi24)) * W(pow2i(-24 - L));  // exact
  const W fl = W(A::from_int(lo24)) * W(pow2i(-48 - L));  // exact
  // r = f * pi/2 as a double-float.
  const W c_h = 0x1.921fb6p+0f, c_l = -0x1.777a5cp-25f;  // pi/2 = c_h + c_l
  const DF<A> p = two_prod(fh, c_h);
  const W pl = p.lo + (fh * c_l + fl * c_h);
  DF<A> r = fast_two_sum(p.hi, pl);
  if (neg) r = {-r.hi, -r.lo};
  return {n, r.hi, r.lo};
}

template <class A>
LOCKSTEP_HD Reduced<A> reduce_trig(V<A> a) {
  if (a <= V<A>(0x1.921fb6p-1f)) return {0u, a, V<A>(0.0f)};  // |x| <= pi/4: r = x
  return reduce_pio2(a);
}

// sin(rh + rl), |r| <= pi/4:  r - r^3/6 + r^5 S(r^2), with r - r^3/6 in
// double-float (it carries all but 2^-8 of the value) and
// S = 1/5! - r^2/7! + r^4/9! - r^6/11! + r^8/13! (Taylor; first omitted term
// r^15/15! < 2^-44 |r|).
template <class A>
LOCKSTEP_HD V<A> sin_poly(V<A> rh, V<A> rl) {
  using W = V<A>;
  const DF<A> r2p = two_prod(rh, rh);
  const W r2l = r2p.lo + (rh + rh) * rl;  // (rh + rl)^2 = r2p.hi + r2l
  const DF<A> r3p = two_prod(rh, r2p.hi);
  const W r3l = r3p.lo + (rh * r2l + rl * r2p.hi);
  const W c3h = -0x1.555556p-3f, c3l = 0x1.555556p-28f;  // -1/6 = c3h + c3l
  const DF<A> t3 = two_prod(c3h, r3p.hi);
  const W t3l = t3.lo + (c3h * r3l + c3l * r3p.hi);
  const W z = r2p.hi;
  W S = 0x1.612462p-33f;          // 1/13!
  S = fma(S, z, -0x1.ae6456p-26f);  // -1/11!
  S = fma(S, z, 0x1.71de3ap-19f);   // 1/9!
  S = fma(S, z, -0x1.a01a02p-13f);  // -1/7!
  S = fma(S, z, 0x1.111112p-7f);    // 1/5!
  const W t5 = (r3p.hi * z) * S;
  const DF<A> sum = fast_two_sum(rh, t3.hi);  // |r| >= |r^3/6|
  return sum.hi + (sum.lo + (rl + (t3l + t5)));
}

// cos(rh + rl), |r| <= pi/4: 1 - r^2/2 + r^4/24 + r^6 C(r^2), with
// 1 - r^2/2 + r^4/24 in double-float (all but 2^-11 of the value) and
// C = -1/6! + r^2/8! - r^4/10! + r^6/12! - r^8/14! (Taylor; first omitted term
// r^16/16! < 2^-50).
template <class A>
LOCKSTEP_HD V<A> cos_poly(V<A> rh, V<A> rl) {
  using W = V<A>;
  const DF<A> r2p = two_prod(rh, rh);
  const W r2l = r2p.lo + (rh + rh) * rl;  // (rh + rl)^2 = r2p.hi + r2l
  const W hh = W(0.5f) * r2p.hi;          // r^2/2 = hh + hl (exact scaling)
  const W hl = W(0.5f) * r2l;
  // r^4/24 = (r^2/2)^2 / 6 as a double-float.
  const DF<A> h2 = two_prod(hh, hh);
  const W h2l = h2.lo + (hh + hh) * hl;
  const W sixth_h = 0x1.555556p-3f, sixth_l = -0x1.555556p-28f;  // 1/6
  const DF<A> c4 = two_prod(h2.hi, sixth_h);
  const W c4l = c4.lo + (h2.hi * sixth_l + h2l * sixth_h);
  const W z = r2p.hi;
  W C = -0x1.93974ap-37f;           // -1/14!
  C = fma(C, z, 0x1.1eed8ep-29f);   // 1/12!
  C = fma(C, z, -0x1.27e4fcp-22f);  // -1/10!
  C = fma(C, z, 0x1.a01a02p-16f);   // 1/8!
  C = fma(C, z, -0x1.6c16c2p-10f);  // -1/6!
  const W t6 = ((z * z) * z) * C;
  const DF<A> w = fast_two_sum(W(1.0f), -hh);  // 1 >= r^2/2
  const DF<A> sum = fast_two_sum(w.hi, c4.hi);  // |1 - r^2/2| >= r^4/24
  return sum.hi + (sum.lo + (w.lo + ((c4l - hl) + t6)));
}

}  // namespace detail

// ===========================================================================
// The functions. Each: float in, float out, correctly handling NaN (-> NaN),
// ±inf, ±0, subnormal inputs and outputs, overflow and underflow.
// ===========================================================================

// e^x.  Overflow above 88.72 (-> +inf), 0 below -103.97.
template <class A = HwArith>
LOCKSTEP_HD float exp(float x) {
  using W = detail::V<A>;
  if (detail::is_nan(x)) return A::add(x, x);
  if (x > 89.0f) return detail::plus_inf();
  if (x < -104.0f) return 0.0f;
  const detail::ExpArg<A> e = detail::exp_reduce(W(x));
  return detail::exp_finish(e.k, detail::expm1_core(e.rh, e.rl));
}

// 2^x.  x = k + f, |f| <= 1/2 (f exact), 2^f = e^(f ln2) with f*ln2 a double-float.
template <class A = HwArith>
LOCKSTEP_HD float exp2(float x) {
  using W = detail::V<A>;
  if (detail::is_nan(x)) return A::add(x, x);
  if (x >= 128.0f) return detail::plus_inf();
  if (x <= -150.0f) return 0.0f;  // 2^-150 is the tie between 0 and 2^-149: even
  const W kf = detail::round_int(W(x));
  const W f = W(x) - kf;  // exact
  const W c_h = 0x1.62e43p-1f, c_l = -0x1.05c61p-29f;  // ln 2 = c_h + c_l
  const detail::DF<A> p = detail::two_prod(f, c_h);
  const W rl = p.lo + f * c_l;
  return detail::exp_finish(static_cast<std::int32_t>(kf.v), detail::expm1_core(p.hi, rl));
}

// e^x - 1, accurate near 0.
template <class A = HwArith>
LOCKSTEP_HD float expm1(float x) {
  using W = detail::V<A>;
  if (detail::is_nan(x)) return A::add(x, x);
  if (x > 89.0f) return detail::plus_inf();
  if (x < -17.5f) return -1.0f;  // e^x < 2^-25: -1 + e^x rounds to -1
  // |x| < 2^-25: x + x^2/2 rounds to x (and ±0, subnormals return themselves).
  if (W(x) < W(0x1p-25f) && W(x) > W(-0x1p-25f)) return x;
  const detail::ExpArg<A> e = detail::exp_reduce(W(x));
  const detail::DF<A> P = detail::expm1_core(e.rh, e.rl);
  if (e.k == 0) return (P.hi + P.lo).v;
  if (e.k == 128) return detail::exp_finish(e.k, P);  // the -1 is far below an ulp
  const detail::DF<A> S = detail::fast_two_sum(W(1.0f), P.hi);
  const W scale = detail::pow2i(e.k);
  const W th = S.hi * scale;                 // exact
  const W tl = (S.lo + P.lo) * scale;        // exact scaling
  const detail::DF<A> u = detail::two_sum(th, W(-1.0f));
  return (u.hi + (u.lo + tl)).v;
}

// Natural logarithm. log(±0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, log(1) = +0.
template <class A = HwArith>
LOCKSTEP_HD float log(float x) {
  using W = detail::V<A>;
  if (detail::is_nan(x)) return A::add(x, x);
  if (W(x) == W(0.0f)) return -detail::plus_inf();
  if (x < 0.0f) return detail::quiet_nan();
  if (bits_of(x) == 0x7f800000u) return x;
  const detail::DF<A> L = detail::log_dd(W(x));
  return (L.hi + L.lo).v;
}

// Base-2 logarithm: E + log(m) * log2(e), the product in double-float, so
// log2(2^n) = n exactly.
template <class A = HwArith>
LOCKSTEP_HD float log2(float x) {
  using W = detail::V<A>;
  if (detail::is_nan(x)) return A::add(x, x);
  if (W(x) == W(0.0f)) return -detail::plus_inf();
  if (x < 0.0f) return detail::quiet_nan();
  if (bits_of(x) == 0x7f800000u) return x;
  const detail::LogSplit<A> sp = detail::log_split(W(x));
  const detail::DF<A> L = detail::log_dd_core(sp.m, W(0.0f));
  const W c_h = 0x1.715476p+0f, c_l = 0x1.4ae0cp-26f;  // log2(e) = c_h + c_l
  const detail::DF<A> p = detail::two_prod(L.hi, c_h);
  const W pl = p.lo + (L.hi * c_l + L.lo * c_h);
  if (sp.E == 0) return (p.hi + pl).v;
  const detail::DF<A> T = detail::fast_two_sum(W(A::from_int(sp.E)), p.hi);  // |E| >= 1 > |p|
  return (T.hi + (T.lo + pl)).v;
}

// log(1 + x), accurate near 0: 1 + x is formed exactly as a double-float
// (uh + ul), and ul enters the series through the numerator/denominator of s.
template <class A = HwArith>
LOCKSTEP_HD float log1p(float x) {
  using W = detail::V<A>;
  if (detail::is_nan(x)) return A::add(x, x);
  if (W(x) < W(0x1p-25f) && W(x) > W(-0x1p-25f)) return x;  // x - x^2/2 rounds to x
  if (x == -1.0f) return -detail::plus_inf();
  if (x < -1.0f) return detail::quiet_nan();
  if (bits_of(x) == 0x7f800000u) return x;
  const detail::DF<A> u = detail::two_sum(W(1.0f), W(x));  // uh >= 2^-24: normal
  const detail::LogSplit<A> sp = detail::log_split(u.hi);
  // ml = ul / 2^E. For E > 100, ul/uh < 2^-24 and log(1+x) > 69: the term is
  // far below an ulp of the result, and 2^-E would leave the normal range.
  const W ml = sp.E > 100 ? W(0.0f) : u.lo * W(detail::pow2i(-sp.E));
  const detail::DF<A> L = detail::add_E_ln2(sp.E, detail::log_dd_core(sp.m, ml));
  return (L.hi + L.lo).v;
}

// Hyperbolic tangent: tanh|x| = -u / (2 + u) with u = expm1(-2|x|) as a
// double-float, the division corrected by its exact fma remainder; the sign
// is copied from x. |x| >= 10 gives ±1 (1 - tanh < 2^-28); tiny |x| gives x.
template <class A = HwArith>
LOCKSTEP_HD float tanh(float x) {
  using W = detail::V<A>;
  if (detail::is_nan(x)) return A::add(x, x);
  const std::uint32_t sign = bits_of(x) & 0x80000000u;
  const W a = float_of(bits_of(x) & 0x7fffffffu);
  if (a >= W(10.0f)) return float_of(sign | 0x3f800000u);
  if (a < W(0x1p-13f)) return x;  // tanh x = x - x^3/3: x^2/3 < 2^-27, rounds to x
  const detail::DF<A> u = detail::expm1_dd(-(a + a));  // u in (-1, 0)
  const detail::DF<A> d = detail::fast_two_sum(W(2.0f), u.hi);
  const W dl = d.lo + u.lo;
  const W nh = -u.hi, nl = -u.lo;
  const W q = nh / d.hi;
  const W rho = fma(-q, d.hi, nh) + (nl - q * dl);  // fma part exact
  const W t = q + rho / d.hi;
  return float_of(bits_of(t.v) | sign);
}

// Logistic sigmoid 1 / (1 + e^-x), accurate for both signs:
// x >= 0: 1 / (1 + E), x < 0: E / (1 + E), with E = e^-|x| a double-float.
// x > 20 gives 1; x < -40 gives e^x (then E/(1+E) = e^x (1 - 2^-57...)).
template <class A = HwArith>
LOCKSTEP_HD float sigmoid(float x) {
  using W = detail::V<A>;
  if (detail::is_nan(x)) return A::add(x, x);
  if (x > 20.0f) return 1.0f;
  if (x < -40.0f) return exp<A>(x);
  const W a = float_of(bits_of(x) & 0x7fffffffu);
  const detail::DF<A> E = detail::exp_dd(detail::exp_reduce(-a));  // E in (2^-58, 1]
  const detail::DF<A> d = detail::fast_two_sum(W(1.0f), E.hi);
  const W dl = d.lo + E.lo;
  const bool pos = !(x < 0.0f);
  const W nh = pos ? W(1.0f) : E.hi;
  const W nl = pos ? W(0.0f) : E.lo;
  const W q = nh / d.hi;
  const W rho = fma(-q, d.hi, nh) + (nl - q * dl);
  return (q + rho / d.hi).v;
}

// sin and cos of the same argument, one reduction.
struct SinCos {
  float sin, cos;
};
template <class A = HwArith>
LOCKSTEP_HD SinCos sincos(float x) {
  using W = detail::V<A>;
  const std::uint32_t ux = bits_of(x);
  if ((ux & 0x7f800000u) == 0x7f800000u) {  // NaN or ±inf -> NaN
    const float nan = detail::is_nan(x) ? A::add(x, x) : detail::quiet_nan();
    return {nan, nan};
  }
  const W a = float_of(ux & 0x7fffffffu);
  const detail::Reduced<A> r = detail::reduce_trig(a);
  const W s = detail::sin_poly(r.rh, r.rl);
  const W c = detail::cos_poly(r.rh, r.rl);
  // x = ±(n pi/2 + r): sin: s, c, -s, -c; cos: c, -s, -c, s (n = 0..3).
  W sv = (r.n & 1u) ? c : s;
  if (r.n & 2u) sv = -sv;
  if (ux & 0x80000000u) sv = -sv;  // sin is odd
  W cv = (r.n & 1u) ? s : c;
  if ((r.n + 1u) & 2u) cv = -cv;
  return {sv.v, cv.v};
}

template <class A = HwArith>
LOCKSTEP_HD float sin(float x) {
  return sincos<A>(x).sin;
}
template <class A = HwArith>
LOCKSTEP_HD float cos(float x) {
  return sincos<A>(x).cos;
}

// 1/sqrt(x), the canonical definition: two correctly rounded operations
// (so any device's 1.0f / sqrtf(x) under the contract gives the same bits).
// rsqrt(+0) = +inf, rsqrt(-0) = -inf, rsqrt(x < 0) = NaN, rsqrt(+inf) = +0.
template <class A = HwArith>
LOCKSTEP_HD float rsqrt(float x) {
  return A::div(1.0f, A::sqrt(x));
}

// x^y = e^(y log x) with log x a double-float good to ~2^-36 relative and
// y log x formed exactly (two_prod): the error stays near 0.5 ulp for every
// result in range. Special cases as C99 Annex F (pow(x, ±0) = 1, pow(1, y) = 1,
// pow(-1, ±inf) = 1, negative x only with integer y, ...).
template <class A = HwArith>
LOCKSTEP_HD float pow(float x, float y) {
  using W = detail::V<A>;
  const std::uint32_t ux = bits_of(x), uy = bits_of(y);
  const std::uint32_t ax = ux & 0x7fffffffu, ay = uy & 0x7fffffffu;
  if (ay == 0) return 1.0f;            // x^±0 = 1, even for NaN x
  if (ux == 0x3f800000u) return 1.0f;  // 1^y = 1, even for NaN y
  if (ax > 0x7f800000u || ay > 0x7f800000u) return A::add(x, y);  // NaN
  // y's integer class: 0 not an integer, 1 odd integer, 2 even integer.
  int yint = 0;
  const std::int32_t ey = static_cast<std::int32_t>(ay >> 23);
  if (ey >= 151) {
    yint = 2;  // |y| >= 2^24: an even integer
  } else if (ey >= 127) {
    const std::uint32_t my = (ay & 0x007fffffu) | 0x00800000u;
    const int shift = 150 - ey;  // bits below the units position
    if ((my & ((1u << shift) - 1u)) == 0) yint = ((my >> shift) & 1u) ? 1 : 2;
  }
  const bool yneg = (uy & 0x80000000u) != 0;
  const bool xneg = (ux & 0x80000000u) != 0;
  const float inf = detail::plus_inf();
  if (ay == 0x7f800000u) {  // y = ±inf
    if (ax == 0x3f800000u) return 1.0f;       // (-1)^±inf = 1
    return ((ax < 0x3f800000u) == yneg) ? inf : 0.0f;
  }
  const std::uint32_t rsign = (xneg && yint == 1) ? 0x80000000u : 0u;
  if (ax == 0) return float_of(rsign | (yneg ? 0x7f800000u : 0u));
  if (ax == 0x7f800000u) return float_of(rsign | (yneg ? 0u : 0x7f800000u));
  if (xneg && yint == 0) return detail::quiet_nan();  // negative base, non-integer power
  // General case: |x|^y, then the sign.
  const detail::DF<A> L = detail::log_dd(W(float_of(ax)));
  const detail::DF<A> zp = detail::two_prod(W(y), L.hi);
  const W zh = zp.hi;
  if (zh > W(89.0f)) return float_of(rsign | 0x7f800000u);
  if (zh < W(-104.0f)) return float_of(rsign);
  const W zl = zp.lo + W(y) * L.lo;
  // exp(zh + zl): as exp_reduce, with zl joining the low part.
  const W kf = detail::round_int(zh * W(0x1.715476p+0f));
  const W rh = fma(-kf, 0x1.62e43p-1f, zh);  // exact (as in exp_reduce)
  const W rl = zl - kf * W(-0x1.05c61p-29f);
  const detail::DF<A> r = detail::two_sum(rh, rl);
  const float m = detail::exp_finish(static_cast<std::int32_t>(kf.v), detail::expm1_core(r.hi, r.lo));
  return float_of(bits_of(m) | rsign);
}

// A double argument is a compile error, not a silent narrowing.
float exp(double) = delete;
float exp2(double) = delete;
float expm1(double) = delete;
float log(double) = delete;
float log2(double) = delete;
float log1p(double) = delete;
float tanh(double) = delete;
float sigmoid(double) = delete;
float sin(double) = delete;
float cos(double) = delete;
SinCos sincos(double) = delete;
float rsqrt(double) = delete;
float pow(double, double) = delete;

}  // namespace lockstep::num
