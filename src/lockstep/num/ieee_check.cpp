// The comparison harness for the binary32 oracle (see ieee_check.hpp).
//
// This file is the one place where the oracle meets real floating point: the
// CPU reference evaluates float operators (compiled with -ffp-contract=off, so
// a*b+c is two roundings and an fma happens only through std::fma), and the
// MPFR reference emulates binary32 with precision 24, the binary32 exponent
// range and mpfr_subnormalize.
#include "lockstep/num/ieee_check.hpp"

#include <algorithm>
#include <cfenv>
#include <climits>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#if LOCKSTEP_HAVE_MPFR
#include <mpfr.h>
#endif

#include "lockstep/num/fp.hpp"

namespace lockstep::num::ieee::check {
namespace {

// ---------------------------------------------------------------------------
// Random inputs
// ---------------------------------------------------------------------------

// SplitMix64: small, fast, and the same sequence on every machine.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::uint32_t u32() { return static_cast<std::uint32_t>(next() >> 32); }
  int range(int lo, int hi) {  // uniform in [lo, hi]
    return lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  bool coin() { return (next() >> 63) != 0; }

 private:
  std::uint64_t state_;
};

std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  Rng r(seed ^ (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full));
  return r.next();
}

struct Inputs {
  bits32 a = 0, b = 0, c = 0;  // float operands, as bits
  std::int32_t i = 0;          // the int32 operand of from_i32
};

// A binary32 pattern from its fields.
bits32 make(bool neg, int field, bits32 frac) {
  return (neg ? kSignBit : 0u) | (static_cast<bits32>(field) << 23) | (frac & 0x7fffffu);
}
int field_of(bits32 x) { return static_cast<int>((x >> 23) & 0xffu); }

// Random sign and fraction, biased exponent field in [lo, hi] (0: subnormal).
bits32 finite_in(Rng& r, int lo, int hi) { return make(r.coin(), r.range(lo, hi), r.u32()); }

// x moved k ulps (k > 0: larger magnitude), kept finite and of the same sign.
bits32 nudge(bits32 x, int k) {
  const auto mag = static_cast<std::int64_t>(x & 0x7fffffffu) + k;
  const std::int64_t clamped = std::clamp<std::int64_t>(mag, 0, 0x7f7fffff);
  return (x & kSignBit) | static_cast<bits32>(clamped);
}

// A normal number whose significand has only `nbits` significant bits (1..24):
// products and sums of such numbers are often exact, or exact ties.
bits32 few_bits(Rng& r, bool neg, int field, int nbits) {
  const bits32 low = nbits <= 1 ? 0u : (r.u32() & ((1u << (nbits - 1)) - 1u));
  return make(neg, field, low << (24 - nbits));
}

// The values where IEEE arithmetic has its special rules, and their neighbours.
bits32 special(Rng& r) {
  static constexpr bits32 kSpecials[] = {
      0x00000000u, 0x80000000u,  // ±0
      0x7f800000u, 0xff800000u,  // ±inf
      0x7fc00000u, 0xffc00000u,  // quiet NaNs
      0x7f800001u, 0xffbfffffu,  // signalling NaNs
      0x00000001u, 0x80000001u,  // ±smallest subnormal
      0x007fffffu, 0x807fffffu,  // ±largest subnormal
      0x00800000u, 0x80800000u,  // ±smallest normal
      0x7f7fffffu, 0xff7fffffu,  // ±largest finite
      0x3f800000u, 0xbf800000u,  // ±1
      0x3f000000u, 0x3fc00000u,  // 0.5, 1.5
      0x40000000u, 0x4b000000u,  // 2, 2^23
      0x4b800000u, 0xcb800000u,  // ±2^24
      0x4f000000u, 0xcf000000u,  // ±2^31
      0x34000000u, 0x33800000u,  // 2^-23, 2^-24
  };
  constexpr int kCount = static_cast<int>(sizeof kSpecials / sizeof kSpecials[0]);
  const bits32 x = kSpecials[r.range(0, kCount - 1)];
  if (is_nan(x) || is_inf(x) || r.range(0, 3) != 0) return x;
  return nudge(x, r.range(-2, 2));
}

float f(bits32 x) { return float_of(x); }

// Fields (fa, fb) for two operands whose product's biased exponent is about t
// (t <= 0: a subnormal result; t >= 255: overflow).
void product_fields(Rng& r, int t, int* fa, int* fb) {
  const int lo = std::max(1, t + 127 - 254), hi = std::min(254, t + 127);
  *fa = r.range(lo, hi);
  *fb = std::clamp(t + 127 - *fa, 0, 254);
}

// Fields for a quotient whose biased exponent is about t.
void quotient_fields(Rng& r, int t, int* fa, int* fb) {
  const int lo = std::max(0, t - 127), hi = std::min(254, t + 127);
  *fa = r.range(lo, hi);
  *fb = std::clamp(*fa + 127 - t, 1, 254);
}

// ---- addition and subtraction: draw the two addends x + y ----------------
// (for sub the second operand is stored negated, so a - b is the same x + y)
using Pair = std::pair<bits32, bits32>;

Pair sum_raw(Rng& r) { return {r.u32(), r.u32()}; }
Pair sum_spread(Rng& r) { return {finite_in(r, 0, 254), finite_in(r, 0, 254)}; }
Pair sum_specials(Rng& r) {
  return {r.coin() ? special(r) : finite_in(r, 0, 254), r.coin() ? special(r) : finite_in(r, 0, 254)};
}
Pair sum_close(Rng& r) {  // exponents within 3: partial cancellation, carries
  const int fa = r.range(0, 254);
  return {make(r.coin(), fa, r.u32()), make(r.coin(), std::clamp(fa + r.range(-3, 3), 0, 254), r.u32())};
}
Pair sum_cancel(Rng& r) {  // x + y with y within 4 ulps of -x: catastrophic cancellation
  const bits32 x = finite_in(r, 0, 254);
  return {x, nudge(x, r.range(-4, 4)) ^ kSignBit};
}
Pair sum_gap(Rng& r) {  // exponent gaps up to 64, concentrated where the small one meets the sticky bit
  const int fa = r.range(1, 254);
  const int d = r.coin() ? r.range(0, 64) : r.range(22, 28);
  const bits32 x = make(r.coin(), fa, r.u32()), y = make(r.coin(), std::max(fa - d, 0), r.u32());
  return r.coin() ? Pair{x, y} : Pair{y, x};
}
Pair sum_ties(Rng& r) {  // y near half an ulp of x (exactly half, or just off): ties to even
  const int fa = r.range(26, 254);
  const bits32 x = make(r.coin(), fa, r.u32());
  static constexpr bits32 kFracs[] = {0u, 0u, 0u, 0x400000u, 0x000001u, 0x7fffffu, 0x200000u};
  bits32 frac = kFracs[r.range(0, 6)];
  if (r.range(0, 3) == 0) frac = r.u32() & 0x7c0000u;  // a few high bits
  const bits32 y = make(r.coin(), fa - r.range(23, 25), frac);
  return r.coin() ? Pair{x, y} : Pair{y, x};
}
Pair sum_tiny(Rng& r) { return {finite_in(r, 0, 2), finite_in(r, 0, 2)}; }  // subnormal results
Pair sum_huge(Rng& r) { return {finite_in(r, 250, 254), finite_in(r, 250, 254)}; }  // overflow

// ---- multiplication ----------------------------------------------------------
Inputs mul_raw(Rng& r) { return {r.u32(), r.u32(), 0, 0}; }
Inputs mul_spread(Rng& r) { return {finite_in(r, 0, 254), finite_in(r, 0, 254), 0, 0}; }
Inputs mul_specials(Rng& r) {
  return {r.coin() ? special(r) : finite_in(r, 0, 254), r.coin() ? special(r) : finite_in(r, 0, 254), 0, 0};
}
Inputs mul_underflow(Rng& r) {
  int fa = 0, fb = 0;
  product_fields(r, r.range(-26, 3), &fa, &fb);
  return {make(r.coin(), fa, r.u32()), make(r.coin(), fb, r.u32()), 0, 0};
}
Inputs mul_overflow(Rng& r) {
  int fa = 0, fb = 0;
  product_fields(r, r.range(250, 256), &fa, &fb);
  return {make(r.coin(), fa, r.u32()), make(r.coin(), fb, r.u32()), 0, 0};
}
Inputs mul_ties(Rng& r) {  // few-bit significands: 24..27-bit products, many exact ties
  const int na = r.range(1, 24), nb = std::clamp(r.range(24, 27) - na, 1, 24);
  return {few_bits(r, r.coin(), r.range(64, 190), na), few_bits(r, r.coin(), r.range(64, 190), nb), 0, 0};
}
Inputs mul_subnormal_ties(Rng& r) {  // the same, rounding at the subnormal quantum
  int fa = 0, fb = 0;
  product_fields(r, r.range(-24, 1), &fa, &fb);
  const int na = r.range(1, 24), nb = std::clamp(r.range(2, 27) - na, 1, 24);
  return {few_bits(r, r.coin(), std::max(fa, 1), na), few_bits(r, r.coin(), std::max(fb, 1), nb), 0, 0};
}

// ---- division ------------------------------------------------------------------
Inputs div_underflow(Rng& r) {
  int fa = 0, fb = 0;
  quotient_fields(r, r.range(-26, 3), &fa, &fb);
  return {make(r.coin(), fa, r.u32()), make(r.coin(), fb, r.u32()), 0, 0};
}
Inputs div_overflow(Rng& r) {
  int fa = 0, fb = 0;
  quotient_fields(r, r.range(250, 256), &fa, &fb);
  return {make(r.coin(), fa, r.u32()), make(r.coin(), fb, r.u32()), 0, 0};
}
Inputs div_exact(Rng& r) {  // a = b * q exactly (few-bit b, q), then nudged 0 or ±1 ulp
  const bits32 b = few_bits(r, r.coin(), r.range(100, 154), r.range(1, 12));
  const bits32 q = few_bits(r, r.coin(), r.range(100, 154), r.range(1, 12));
  const bits32 a = bits_of(f(b) * f(q));  // exact: at most 24 significant bits
  return {nudge(a, r.range(-1, 1)), b, 0, 0};
}
Inputs div_subnormal_ties(Rng& r) {  // few-bit a over a power of two, landing in the subnormals:
  // exact quotients with more bits than the subnormal quantum keeps, so exact ties occur
  const bits32 a = few_bits(r, r.coin(), r.range(1, 30), r.range(1, 24));
  const int fb = std::clamp(field_of(a) + 127 - r.range(-23, 0), 1, 254);
  return {a, make(r.coin(), fb, 0), 0, 0};
}
Inputs div_subnormal(Rng& r) {
  const bits32 a = r.coin() ? finite_in(r, 0, 0) : finite_in(r, 1, 254);
  const bits32 b = r.coin() ? finite_in(r, 0, 0) : finite_in(r, 1, 254);
  return {a, b, 0, 0};
}

// ---- fused multiply-add ----------------------------------------------------------
Inputs fma_raw(Rng& r) { return {r.u32(), r.u32(), r.u32(), 0}; }
Inputs fma_spread(Rng& r) { return {finite_in(r, 0, 254), finite_in(r, 0, 254), finite_in(r, 0, 254), 0}; }
Inputs fma_specials(Rng& r) {
  auto one = [&r] { return r.range(0, 2) == 0 ? special(r) : finite_in(r, 0, 254); };
  const bits32 a = one(), b = one(), c = one();
  return {a, b, c, 0};
}
Inputs fma_moderate(Rng& r) {  // all three in a range where nothing overflows
  return {finite_in(r, 96, 158), finite_in(r, 96, 158), finite_in(r, 64, 190), 0};
}
Inputs fma_cancel(Rng& r) {  // c within 3 ulps of -round(a*b): the exact product decides everything
  const bits32 a = finite_in(r, 64, 190), b = finite_in(r, 64, 190);
  const bits32 c = nudge(bits_of(f(a) * f(b)), r.range(-3, 3)) ^ kSignBit;
  return {a, b, c, 0};
}
Inputs fma_ties(Rng& r) {  // few-bit a, b: the product's last bits land around c's half ulp
  const bits32 a = few_bits(r, r.coin(), r.range(100, 154), r.range(1, 12));
  const bits32 b = few_bits(r, r.coin(), r.range(100, 154), r.range(1, 12));
  const int fp = field_of(a) + field_of(b) - 127;
  const int fc = std::clamp(fp + r.range(-2, 26), 1, 254);
  const bits32 c = r.coin() ? make(r.coin(), fc, r.u32()) : few_bits(r, r.coin(), fc, r.range(1, 24));
  return {a, b, c, 0};
}
// a*b = ±(half an ulp of c) * (1 + k*2^-23)(1 + j*2^-23): with j = -k the product is
// a hair (k^2 * 2^-46 relative) off an exact midpoint, below double's precision;
// otherwise it sits just above the midpoint by a few 2^-23. Both are where rounding
// twice (double, then float) goes wrong, and where a sloppy sticky bit goes wrong.
Inputs fma_near_tie(Rng& r) {
  const int fc = r.range(40, 220);
  const bits32 c = make(r.coin(), fc, r.u32());
  // k <= 256 keeps k^2 * 2^-46 below double's half ulp relative to c (2^-29 of c's half ulp).
  const int k = r.range(1, 256);
  const int j = r.coin() ? -k : r.range(-2048, 2048);
  const bits32 a = make(r.coin(), 127, static_cast<bits32>(k));  // 1 + k*2^-23
  // 2^(fc-151) * (1 + j*2^-23): the half ulp of c (field fc - 24) times a nearby factor.
  const bits32 b = j >= 0 ? make(r.coin(), fc - 24, static_cast<bits32>(j))
                          : make(r.coin(), fc - 25, 0x800000u - 2u * static_cast<bits32>(-j));
  return {a, b, c, 0};
}
Inputs fma_gap(Rng& r) {  // product and addend up to 64 binades apart
  const bits32 a = finite_in(r, 64, 190), b = finite_in(r, 64, 190);
  const int fp = field_of(a) + field_of(b) - 127;
  const int fc = std::clamp(fp + (r.coin() ? r.range(-64, 64) : r.range(-30, 30)), 0, 254);
  return {a, b, make(r.coin(), fc, r.u32()), 0};
}
Inputs fma_tiny(Rng& r) {  // product and addend in the subnormal range
  int fa = 0, fb = 0;
  product_fields(r, r.range(-30, 5), &fa, &fb);
  return {make(r.coin(), fa, r.u32()), make(r.coin(), fb, r.u32()), finite_in(r, 0, 5), 0};
}
Inputs fma_huge(Rng& r) {  // product and addend near overflow
  int fa = 0, fb = 0;
  product_fields(r, r.range(248, 256), &fa, &fb);
  return {make(r.coin(), fa, r.u32()), make(r.coin(), fb, r.u32()), finite_in(r, 248, 254), 0};
}

// ---- square root ----------------------------------------------------------------
Inputs sqrt_raw(Rng& r) { return {r.u32(), 0, 0, 0}; }
Inputs sqrt_positive(Rng& r) { return {make(false, r.range(0, 254), r.u32()), 0, 0, 0}; }
Inputs sqrt_specials(Rng& r) { return {special(r), 0, 0, 0}; }
Inputs sqrt_subnormal(Rng& r) { return {make(false, r.range(0, 2), r.u32()), 0, 0, 0}; }
Inputs sqrt_squares(Rng& r) {  // m^2 * 4^k (exact squares) and their 1-2 ulp neighbours
  const auto m = static_cast<std::uint32_t>(r.range(1, 4095));
  const bits32 sq = bits_of(static_cast<float>(m * m));  // exact, < 2^24
  const int field = field_of(sq) + 2 * r.range(-60, 60);
  const bits32 x = field >= 1 && field <= 254 ? make(false, field, sq) : sq;
  return {nudge(x, r.range(-2, 2)), 0, 0, 0};
}

// ---- int32 -> f32 -------------------------------------------------------------------
std::int32_t signed_i32(Rng& r, std::uint32_t mag) {
  // mag <= 2^31; a negative value of magnitude 2^31 is INT32_MIN.
  if (mag > 0x7fffffffu) return INT32_MIN;
  return r.coin() ? -static_cast<std::int32_t>(mag) : static_cast<std::int32_t>(mag);
}
Inputs int_raw(Rng& r) { return {0, 0, 0, static_cast<std::int32_t>(r.u32())}; }
Inputs int_spread(Rng& r) {  // magnitudes of every bit length 0..31
  const int len = r.range(0, 31);
  const std::uint32_t mag = len == 0 ? 0u : (1u << (len - 1)) | (r.u32() & ((1u << (len - 1)) - 1u));
  return {0, 0, 0, signed_i32(r, mag)};
}
Inputs int_ladder(Rng& r) {  // 2^s + k*ulp + small offsets, s = 24..30: around each rounding boundary
  const int s = r.range(24, 30);
  const std::int64_t base = std::int64_t{1} << s, ulp = base >> 23;
  std::int64_t v = base + r.range(-64, 64) * ulp + r.range(-2, 2) + (r.coin() ? ulp / 2 : 0);
  v = std::clamp<std::int64_t>(v, 0, 0x7fffffff);
  return {0, 0, 0, signed_i32(r, static_cast<std::uint32_t>(v))};
}
Inputs int_ties(Rng& r) {  // m*2^s + 2^(s-1) with a 24-bit m: exact halfway cases, and ±1
  const int s = r.range(1, 7);
  const std::int64_t hi = std::min<std::int64_t>(std::int64_t{1} << 24, std::int64_t{1} << (31 - s)) - 1;
  const std::int64_t m = std::int64_t{1 << 23} + static_cast<std::int64_t>(r.next() % static_cast<std::uint64_t>(hi - (1 << 23) + 1));
  const std::int64_t v = std::clamp<std::int64_t>((m << s) + (std::int64_t{1} << (s - 1)) + r.range(-1, 1), 0, 0x7fffffff);
  return {0, 0, 0, signed_i32(r, static_cast<std::uint32_t>(v))};
}
Inputs int_extremes(Rng& r) {
  const int k = r.range(0, 300);
  return {0, 0, 0, r.coin() ? INT32_MIN + k : INT32_MAX - k};
}

// ---- rounding to integral values, f32 -> int32 -------------------------------------
Inputs rnd_raw(Rng& r) { return {r.u32(), 0, 0, 0}; }
Inputs rnd_range(Rng& r) { return {finite_in(r, 100, 165), 0, 0, 0}; }  // 2^-27 .. 2^38
Inputs rnd_specials(Rng& r) { return {special(r), 0, 0, 0}; }
Inputs rnd_halves(Rng& r) {  // n + {0, 1/4, 1/2, 3/4} and their ulp neighbours
  const int len = r.range(0, 21);
  const float n = static_cast<float>(len == 0 ? 0u : r.u32() >> (32 - len));
  static constexpr float kFrac[] = {0.0f, 0.25f, 0.5f, 0.5f, 0.75f};
  const bits32 x = bits_of(n + kFrac[r.range(0, 4)]);  // exact: n < 2^21
  return {nudge(x, r.range(-1, 1)) ^ (r.coin() ? kSignBit : 0u), 0, 0, 0};
}
Inputs rnd_limits(Rng& r) {  // around ±2^31, where int32 conversion saturates
  return {nudge(r.coin() ? 0x4f000000u : 0xcf000000u, r.range(-8, 8)), 0, 0, 0};
}
Inputs rnd_small(Rng& r) { return {finite_in(r, 0, 127), 0, 0, 0}; }  // |x| < 2, subnormals
Inputs rnd_integers(Rng& r) {
  const int len = r.range(0, 31);
  const std::uint32_t mag = len == 0 ? 0u : (1u << (len - 1)) | (r.u32() & ((1u << (len - 1)) - 1u));
  return {bits_of(static_cast<float>(signed_i32(r, mag))), 0, 0, 0};
}

// ---- comparisons, min, max ------------------------------------------------------------
Inputs cmp_raw(Rng& r) { return {r.u32(), r.u32(), 0, 0}; }
Inputs cmp_spread(Rng& r) { return {finite_in(r, 0, 254), finite_in(r, 0, 254), 0, 0}; }
Inputs cmp_specials(Rng& r) { return {special(r), special(r), 0, 0}; }
Inputs cmp_near(Rng& r) {  // b = a, -a, or one ulp away (of either sign)
  const bits32 a = r.coin() ? finite_in(r, 0, 254) : special(r);
  bits32 b = a;
  switch (r.range(0, 3)) {
    case 0: break;
    case 1: b = a ^ kSignBit; break;
    case 2: b = nudge(a, r.coin() ? 1 : -1); break;
    default: b = nudge(a, r.coin() ? 1 : -1) ^ kSignBit; break;
  }
  return {a, b, 0, 0};
}
Inputs cmp_zeros(Rng& r) {
  static constexpr bits32 kZ[] = {0u, kSignBit, 1u, kSignBit | 1u};
  return {kZ[r.range(0, 3)], kZ[r.range(0, 3)], 0, 0};
}

// ---------------------------------------------------------------------------
// Regimes per op
// ---------------------------------------------------------------------------
using Draw = Inputs (*)(Rng&, Op);
struct Regime {
  const char* name;
  Draw draw;
};

template <Pair (*F)(Rng&)>
Inputs as_sum(Rng& r, Op op) {
  const Pair p = F(r);
  return {p.first, op == Op::sub ? p.second ^ kSignBit : p.second, 0, 0};
}
template <Inputs (*F)(Rng&)>
Inputs plain(Rng& r, Op) {
  return F(r);
}

const std::vector<Regime>& regimes(Op op) {
  static const std::vector<Regime> sum = {
      {"raw", as_sum<sum_raw>},          {"spread", as_sum<sum_spread>},
      {"specials", as_sum<sum_specials>}, {"close", as_sum<sum_close>},
      {"cancel", as_sum<sum_cancel>},    {"gap", as_sum<sum_gap>},
      {"ties", as_sum<sum_ties>},        {"subnormal", as_sum<sum_tiny>},
      {"overflow", as_sum<sum_huge>},
  };
  static const std::vector<Regime> mul = {
      {"raw", plain<mul_raw>},           {"spread", plain<mul_spread>},
      {"specials", plain<mul_specials>}, {"underflow", plain<mul_underflow>},
      {"overflow", plain<mul_overflow>}, {"ties", plain<mul_ties>},
      {"subnormal-ties", plain<mul_subnormal_ties>},
  };
  static const std::vector<Regime> div = {
      {"raw", plain<mul_raw>},            {"spread", plain<mul_spread>},
      {"specials", plain<mul_specials>},  {"underflow", plain<div_underflow>},
      {"overflow", plain<div_overflow>},  {"exact", plain<div_exact>},
      {"subnormal", plain<div_subnormal>}, {"subnormal-ties", plain<div_subnormal_ties>},
  };
  static const std::vector<Regime> fma = {
      {"raw", plain<fma_raw>},           {"spread", plain<fma_spread>},
      {"specials", plain<fma_specials>}, {"moderate", plain<fma_moderate>},
      {"cancel", plain<fma_cancel>},     {"ties", plain<fma_ties>},
      {"near-tie", plain<fma_near_tie>}, {"gap", plain<fma_gap>},
      {"subnormal", plain<fma_tiny>},    {"overflow", plain<fma_huge>},
  };
  static const std::vector<Regime> root = {
      {"raw", plain<sqrt_raw>},           {"positive", plain<sqrt_positive>},
      {"specials", plain<sqrt_specials>}, {"subnormal", plain<sqrt_subnormal>},
      {"squares", plain<sqrt_squares>},
  };
  static const std::vector<Regime> from_int = {
      {"raw", plain<int_raw>},       {"spread", plain<int_spread>}, {"ladder", plain<int_ladder>},
      {"ties", plain<int_ties>},     {"extremes", plain<int_extremes>},
  };
  static const std::vector<Regime> integral = {
      {"raw", plain<rnd_raw>},       {"range", plain<rnd_range>},   {"specials", plain<rnd_specials>},
      {"halves", plain<rnd_halves>}, {"limits", plain<rnd_limits>}, {"small", plain<rnd_small>},
      {"integers", plain<rnd_integers>},
  };
  static const std::vector<Regime> compare = {
      {"raw", plain<cmp_raw>},   {"spread", plain<cmp_spread>}, {"specials", plain<cmp_specials>},
      {"near", plain<cmp_near>}, {"zeros", plain<cmp_zeros>},
  };
  switch (op) {
    case Op::add:
    case Op::sub: return sum;
    case Op::mul: return mul;
    case Op::div: return div;
    case Op::fma: return fma;
    case Op::sqrt: return root;
    case Op::from_i32: return from_int;
    case Op::to_i32_rne:
    case Op::to_i32_rz:
    case Op::to_i32_floor:
    case Op::floor:
    case Op::ceil:
    case Op::trunc:
    case Op::rint: return integral;
    case Op::lt:
    case Op::le:
    case Op::eq:
    case Op::min:
    case Op::max: return compare;
  }
  return compare;
}

const Regime& regime_named(Op op, const char* name) {
  for (const Regime& g : regimes(op))
    if (std::string(g.name) == name) return g;
  return regimes(op).front();  // not reached: names below are spelled from the tables above
}

// ---------------------------------------------------------------------------
// Evaluation: every result as 32 bits (float bits, int32, or 0/1)
// ---------------------------------------------------------------------------
enum class Kind { f32, i32, boolean };

Kind kind_of(Op op) {
  switch (op) {
    case Op::to_i32_rne:
    case Op::to_i32_rz:
    case Op::to_i32_floor: return Kind::i32;
    case Op::lt:
    case Op::le:
    case Op::eq: return Kind::boolean;
    default: return Kind::f32;
  }
}

std::uint32_t as_u32(std::int32_t v) { return static_cast<std::uint32_t>(v); }
std::int32_t as_i32(std::uint32_t v) { return static_cast<std::int32_t>(v); }

std::uint32_t eval_oracle(Op op, const Inputs& in, Flaw flaw) {
  switch (op) {
    case Op::add: return mutant::add(flaw, in.a, in.b);
    case Op::sub: return mutant::sub(flaw, in.a, in.b);
    case Op::mul: return mutant::mul(flaw, in.a, in.b);
    case Op::fma: return mutant::fma(flaw, in.a, in.b, in.c);
    case Op::div: return mutant::div(flaw, in.a, in.b);
    case Op::sqrt: return mutant::sqrt(flaw, in.a);
    case Op::from_i32: return mutant::from_i32(flaw, in.i);
    case Op::to_i32_rne: return as_u32(to_i32_rne(in.a));
    case Op::to_i32_rz: return as_u32(to_i32_rz(in.a));
    case Op::to_i32_floor: return as_u32(to_i32_floor(in.a));
    case Op::floor: return ieee::floor(in.a);
    case Op::ceil: return ieee::ceil(in.a);
    case Op::trunc: return ieee::trunc(in.a);
    case Op::rint: return ieee::rint(in.a);
    case Op::lt: return lt(in.a, in.b) ? 1u : 0u;
    case Op::le: return le(in.a, in.b) ? 1u : 0u;
    case Op::eq: return eq(in.a, in.b) ? 1u : 0u;
    case Op::min: return ieee::min(in.a, in.b);
    case Op::max: return ieee::max(in.a, in.b);
  }
  return 0;
}

// The host's f32 -> int32 conversion made saturating the way the contract says
// (x86's cvt returns 0x80000000 for NaN and out-of-range inputs). For a binary32
// x, "x >= -2^31 and x < 2^31" means every rounding of x fits in int32: the
// floats next to ±2^31 are 128 or 256 away.
template <typename Convert>
std::int32_t cpu_to_i32(float x, Convert convert) {
  if (std::isnan(x)) return 0;
  if (x >= 2147483648.0f) return INT32_MAX;
  if (x < -2147483648.0f) return INT32_MIN;
  return convert(x);
}

// IEEE 754-2019 minimum/maximum from the C library's fmin/fmax, which agree with
// it except on NaN (fmin drops a NaN operand) and on a pair of zeros (unspecified).
float cpu_min(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0.0f && y == 0.0f) return std::signbit(x) ? x : y;
  return std::fmin(x, y);
}
float cpu_max(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0.0f && y == 0.0f) return std::signbit(x) ? y : x;
  return std::fmax(x, y);
}

std::uint32_t eval_cpu(Op op, const Inputs& in) {
  const float x = f(in.a), y = f(in.b), z = f(in.c);
  switch (op) {
    case Op::add: return bits_of(x + y);
    case Op::sub: return bits_of(x - y);
    case Op::mul: return bits_of(x * y);
    case Op::fma: return bits_of(std::fma(x, y, z));
    case Op::div: return bits_of(x / y);
    case Op::sqrt: return bits_of(std::sqrt(x));
    case Op::from_i32: return bits_of(static_cast<float>(in.i));
    case Op::to_i32_rne:  // lrint: the current rounding mode, round to nearest even
      return as_u32(cpu_to_i32(x, [](float v) { return static_cast<std::int32_t>(std::lrint(v)); }));
    case Op::to_i32_rz:  // C's conversion truncates (cvttss2si)
      return as_u32(cpu_to_i32(x, [](float v) { return static_cast<std::int32_t>(v); }));
    case Op::to_i32_floor:
      return as_u32(cpu_to_i32(x, [](float v) { return static_cast<std::int32_t>(std::floor(v)); }));
    case Op::floor: return bits_of(std::floor(x));
    case Op::ceil: return bits_of(std::ceil(x));
    case Op::trunc: return bits_of(std::trunc(x));
    case Op::rint: return bits_of(std::nearbyint(x));
    case Op::lt: return x < y ? 1u : 0u;
    case Op::le: return x <= y ? 1u : 0u;
    case Op::eq: return x == y ? 1u : 0u;
    case Op::min: return bits_of(cpu_min(x, y));
    case Op::max: return bits_of(cpu_max(x, y));
  }
  return 0;
}

#if LOCKSTEP_HAVE_MPFR
// binary32 emulated in MPFR: precision 24, exponents limited to binary32's range
// (MPFR writes x = 0.1b... * 2^e, so normal binary32 is e in [-125, 128] and the
// smallest subnormal 2^-149 is e = -148), and mpfr_subnormalize to round a tiny
// result again at the subnormal quantum, using the first rounding's ternary
// value so that this second rounding is not a double rounding.
class Mpfr32 {
 public:
  Mpfr32() : emin_(mpfr_get_emin()), emax_(mpfr_get_emax()) {
    mpfr_set_emin(-148);
    mpfr_set_emax(128);
    for (mpfr_t* v : {&x_, &y_, &z_, &r_}) mpfr_init2(*v, 24);
  }
  ~Mpfr32() {
    for (mpfr_t* v : {&x_, &y_, &z_, &r_}) mpfr_clear(*v);
    mpfr_set_emin(emin_);
    mpfr_set_emax(emax_);
  }
  Mpfr32(const Mpfr32&) = delete;
  Mpfr32& operator=(const Mpfr32&) = delete;

  std::uint32_t eval(Op op, const Inputs& in) {
    mpfr_set_flt(x_, f(in.a), MPFR_RNDN);  // exact: every binary32 fits
    mpfr_set_flt(y_, f(in.b), MPFR_RNDN);
    mpfr_set_flt(z_, f(in.c), MPFR_RNDN);
    switch (op) {
      case Op::add: return rounded(mpfr_add(r_, x_, y_, MPFR_RNDN));
      case Op::sub: return rounded(mpfr_sub(r_, x_, y_, MPFR_RNDN));
      case Op::mul: return rounded(mpfr_mul(r_, x_, y_, MPFR_RNDN));
      case Op::fma: return rounded(mpfr_fma(r_, x_, y_, z_, MPFR_RNDN));
      case Op::div: return rounded(mpfr_div(r_, x_, y_, MPFR_RNDN));
      case Op::sqrt: return rounded(mpfr_sqrt(r_, x_, MPFR_RNDN));
      case Op::from_i32: return rounded(mpfr_set_si(r_, in.i, MPFR_RNDN));
      case Op::to_i32_rne: return as_u32(to_int(MPFR_RNDN));
      case Op::to_i32_rz: return as_u32(to_int(MPFR_RNDZ));
      case Op::to_i32_floor: return as_u32(to_int(MPFR_RNDD));
      // Rounding a 24-bit value to an integer needs at most 24 bits: exact in r_.
      case Op::floor: mpfr_floor(r_, x_); return result();
      case Op::ceil: mpfr_ceil(r_, x_); return result();
      case Op::trunc: mpfr_trunc(r_, x_); return result();
      case Op::rint: mpfr_rint(r_, x_, MPFR_RNDN); return result();
      case Op::lt: return mpfr_less_p(x_, y_) ? 1u : 0u;
      case Op::le: return mpfr_lessequal_p(x_, y_) ? 1u : 0u;
      case Op::eq: return mpfr_equal_p(x_, y_) ? 1u : 0u;
      case Op::min:
      case Op::max: break;  // no MPFR reference (has_reference)
    }
    return 0;
  }

 private:
  std::uint32_t rounded(int ternary) {
    mpfr_subnormalize(r_, ternary, MPFR_RNDN);
    return result();
  }
  std::uint32_t result() { return bits_of(mpfr_get_flt(r_, MPFR_RNDN)); }
  std::int32_t to_int(mpfr_rnd_t mode) {
    if (mpfr_nan_p(x_)) return 0;
    mpfr_rint(r_, x_, mode);
    if (mpfr_cmp_si(r_, INT32_MAX) > 0) return INT32_MAX;
    if (mpfr_cmp_si(r_, INT32_MIN) < 0) return INT32_MIN;
    return static_cast<std::int32_t>(mpfr_get_si(r_, MPFR_RNDN));
  }

  mpfr_exp_t emin_, emax_;
  mpfr_t x_, y_, z_, r_;
};
#endif

bool agree(Kind k, std::uint32_t x, std::uint32_t y) {
  return k == Kind::f32 ? same_value(x, y) : x == y;
}

// Distance between two disagreeing results (CheckStats::max_distance).
std::uint64_t distance(Kind k, std::uint32_t x, std::uint32_t y) {
  if (k == Kind::boolean) return 1;
  if (k == Kind::i32) {
    const std::int64_t d = static_cast<std::int64_t>(as_i32(x)) - as_i32(y);
    return static_cast<std::uint64_t>(d < 0 ? -d : d);
  }
  if (is_nan(x) || is_nan(y)) return kNaNDistance;
  // Position on the number line in ulps: -0 is just below +0.
  auto pos = [](std::uint32_t v) {
    const auto mag = static_cast<std::int64_t>(v & 0x7fffffffu);
    return sign_of(v) ? -mag - 1 : mag;
  };
  const std::int64_t d = pos(x) - pos(y);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

std::string hex(std::uint32_t v) { return fmt::format("0x{:08x}", v); }

std::string describe_inputs(Op op, const Inputs& in) {
  switch (op) {
    case Op::from_i32: return fmt::format("{}", in.i);
    case Op::fma: return fmt::format("{}, {}, {}", hex(in.a), hex(in.b), hex(in.c));
    case Op::sqrt:
    case Op::to_i32_rne:
    case Op::to_i32_rz:
    case Op::to_i32_floor:
    case Op::floor:
    case Op::ceil:
    case Op::trunc:
    case Op::rint: return fmt::format("{} ({:g})", hex(in.a), static_cast<double>(f(in.a)));
    default: return fmt::format("{}, {}", hex(in.a), hex(in.b));
  }
}

std::string describe_result(Kind k, std::uint32_t v) {
  if (k == Kind::f32) return fmt::format("{} ({:g})", hex(v), static_cast<double>(f(v)));
  if (k == Kind::i32) return fmt::format("{}", as_i32(v));
  return v != 0 ? "true" : "false";
}

}  // namespace

// ---------------------------------------------------------------------------
// Public harness
// ---------------------------------------------------------------------------
const char* op_name(Op op) {
  switch (op) {
    case Op::add: return "add";
    case Op::sub: return "sub";
    case Op::mul: return "mul";
    case Op::fma: return "fma";
    case Op::div: return "div";
    case Op::sqrt: return "sqrt";
    case Op::from_i32: return "i32->f32";
    case Op::to_i32_rne: return "f32->i32 rne";
    case Op::to_i32_rz: return "f32->i32 rz";
    case Op::to_i32_floor: return "f32->i32 floor";
    case Op::floor: return "floor";
    case Op::ceil: return "ceil";
    case Op::trunc: return "trunc";
    case Op::rint: return "rint";
    case Op::lt: return "lt";
    case Op::le: return "le";
    case Op::eq: return "eq";
    case Op::min: return "min";
    case Op::max: return "max";
  }
  return "?";
}

const std::vector<Op>& all_ops() {
  static const std::vector<Op> ops = {
      Op::add,          Op::sub,   Op::mul,  Op::fma,   Op::div,  Op::sqrt,      Op::from_i32,
      Op::to_i32_rne,   Op::to_i32_rz,      Op::to_i32_floor,     Op::floor,     Op::ceil,
      Op::trunc,        Op::rint,  Op::lt,   Op::le,    Op::eq,   Op::min,       Op::max,
  };
  return ops;
}

const char* reference_name(Reference ref) { return ref == Reference::cpu ? "cpu" : "mpfr"; }

bool mpfr_available() {
#if LOCKSTEP_HAVE_MPFR
  return true;
#else
  return false;
#endif
}

bool has_reference(Op op, Reference ref) {
  if (ref == Reference::cpu) return true;
  return mpfr_available() && op != Op::min && op != Op::max;
}

std::vector<std::string> regime_names(Op op) {
  std::vector<std::string> names;
  for (const Regime& g : regimes(op)) names.emplace_back(g.name);
  return names;
}

CheckStats check_op(Op op, Reference ref, std::uint64_t n, std::uint64_t seed, Flaw flaw) {
  CheckStats s;
  s.op = op;
  s.ref = ref;
  s.flaw = flaw;
  if (!has_reference(op, ref)) return s;
  const std::vector<Regime>& gs = regimes(op);
  for (const Regime& g : gs) s.regimes.push_back({g.name, 0, 0});
  const Kind kind = kind_of(op);
  Rng rng(mix_seed(seed, static_cast<std::uint64_t>(op) + 1, static_cast<std::uint64_t>(ref) + 1));
#if LOCKSTEP_HAVE_MPFR
  std::optional<Mpfr32> mp;
  if (ref == Reference::mpfr) mp.emplace();
#endif
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::size_t gi = static_cast<std::size_t>(i % gs.size());
    const Inputs in = gs[gi].draw(rng, op);
    const std::uint32_t mine = eval_oracle(op, in, flaw);
    std::uint32_t theirs = 0;
#if LOCKSTEP_HAVE_MPFR
    theirs = ref == Reference::cpu ? eval_cpu(op, in) : mp->eval(op, in);
#else
    theirs = eval_cpu(op, in);
#endif
    ++s.cases;
    ++s.regimes[gi].cases;
    if (agree(kind, mine, theirs)) continue;
    ++s.mismatches;
    ++s.regimes[gi].mismatches;
    s.max_distance = std::max(s.max_distance, distance(kind, mine, theirs));
    if (s.first_mismatch.empty())
      s.first_mismatch = fmt::format("{}({}) [{}]: oracle{} {}, {} {}", op_name(op), describe_inputs(op, in),
                                     gs[gi].name, flaw == Flaw::none ? "" : std::string(" (") + flaw_name(flaw) + ")",
                                     describe_result(kind, mine), reference_name(ref),
                                     describe_result(kind, theirs));
  }
  return s;
}

std::string format_distance(std::uint64_t d) {
  if (d == 0) return "0";
  if (d == kNaNDistance) return "nan";
  return fmt::format("{}", d);
}

std::string summary(const CheckStats& s) {
  std::string line = fmt::format("{:<15} vs {:<4}{}: {} cases, {} mismatches, max distance {}", op_name(s.op),
                                 reference_name(s.ref),
                                 s.flaw == Flaw::none ? "" : std::string(" [mutant ") + flaw_name(s.flaw) + "]",
                                 s.cases, s.mismatches, format_distance(s.max_distance));
  line += " | per regime (cases/mismatches):";
  for (const RegimeStats& g : s.regimes) line += fmt::format(" {} {}/{}", g.name, g.cases, g.mismatches);
  if (!s.first_mismatch.empty()) line += "\n    first mismatch: " + s.first_mismatch;
  return line;
}

std::vector<std::pair<Flaw, Op>> mutant_cases() {
  return {
      {Flaw::ties_away, Op::add},        {Flaw::ties_away, Op::sub},        {Flaw::ties_away, Op::mul},
      {Flaw::ties_away, Op::fma},        {Flaw::ties_away, Op::div},        {Flaw::ties_away, Op::from_i32},
      {Flaw::flush_subnormals, Op::add}, {Flaw::flush_subnormals, Op::sub}, {Flaw::flush_subnormals, Op::mul},
      {Flaw::flush_subnormals, Op::fma}, {Flaw::flush_subnormals, Op::div},
      {Flaw::no_sticky, Op::add},        {Flaw::no_sticky, Op::sub},        {Flaw::no_sticky, Op::mul},
      {Flaw::no_sticky, Op::fma},        {Flaw::no_sticky, Op::div},        {Flaw::no_sticky, Op::sqrt},
      {Flaw::no_sticky, Op::from_i32},
  };
}

std::string cpu_environment_problem() {
  std::string problem;
  if (std::fegetround() != FE_TONEAREST) problem += "rounding mode is not round-to-nearest; ";
#if defined(__x86_64__) || defined(__i386__)
  const unsigned csr = _mm_getcsr();
  if ((csr & 0x8000u) != 0) problem += "MXCSR.FTZ (flush to zero) is set; ";
  if ((csr & 0x0040u) != 0) problem += "MXCSR.DAZ (denormals are zero) is set; ";
  if ((csr & 0x6000u) != 0) problem += "MXCSR rounding control is not nearest; ";
#endif
  return problem;
}

// ---------------------------------------------------------------------------
// Wrong mirrors
// ---------------------------------------------------------------------------
const char* mirror_name(Mirror m) {
  switch (m) {
    case Mirror::fma_via_f64: return "fma as f32(f64 a*b + c)";
    case Mirror::sum3_round_once: return "(a+b)+c rounded once";
    case Mirror::dot_round_once: return "dot16 rounded once";
  }
  return "?";
}

const std::vector<Mirror>& all_mirrors() {
  static const std::vector<Mirror> ms = {Mirror::fma_via_f64, Mirror::sum3_round_once, Mirror::dot_round_once};
  return ms;
}

std::vector<MirrorRegime> mirror_regimes(Mirror m) {
  switch (m) {
    case Mirror::fma_via_f64: return {{"random", false}, {"cancel", false}, {"near-tie", true}};
    case Mirror::sum3_round_once: return {{"random", true}, {"close", true}, {"cancel", false}, {"absorb", true}};
    case Mirror::dot_round_once: return {{"random", true}, {"mixed", true}};
  }
  return {};
}

MirrorStats check_mirror(Mirror m, std::size_t regime, std::uint64_t n, std::uint64_t seed) {
  MirrorStats s;
  s.mirror = m;
  const std::vector<MirrorRegime> rs = mirror_regimes(m);
  if (regime >= rs.size()) return s;
  s.regime = rs[regime].name;
  s.must_reject = rs[regime].must_reject;
  Rng rng(mix_seed(seed, 1000 + static_cast<std::uint64_t>(m), regime));
  constexpr int kDot = 16;
  for (std::uint64_t i = 0; i < n; ++i) {
    bits32 canonical = 0, mirror = 0;
    std::string input;
    if (m == Mirror::fma_via_f64) {
      const char* name = regime == 0 ? "moderate" : regime == 1 ? "cancel" : "near-tie";
      const Inputs in = regime_named(Op::fma, name).draw(rng, Op::fma);
      canonical = ieee::fma(in.a, in.b, in.c);
      // The product of two floats is exact in double; the sum is rounded to double,
      // then again to float.
      const double wide = static_cast<double>(f(in.a)) * static_cast<double>(f(in.b)) + static_cast<double>(f(in.c));
      mirror = bits_of(static_cast<float>(wide));
      input = describe_inputs(Op::fma, in);
    } else if (m == Mirror::sum3_round_once) {
      bits32 a = 0, b = 0, c = 0;
      if (regime == 0) {  // moderate magnitudes, random signs
        a = finite_in(rng, 112, 142), b = finite_in(rng, 112, 142), c = finite_in(rng, 112, 142);
      } else if (regime == 1) {  // all three exponents within 1
        const int e = rng.range(2, 252);
        a = finite_in(rng, e - 1, e + 1), b = finite_in(rng, e - 1, e + 1), c = finite_in(rng, e - 1, e + 1);
      } else if (regime == 2) {  // b ≈ -a, c smaller: a + b is exact (Sterbenz), so both agree
        a = finite_in(rng, 64, 190);
        b = nudge(a, rng.range(-64, 64)) ^ kSignBit;
        c = finite_in(rng, std::max(field_of(a) - 30, 0), field_of(a));
      } else {  // b below half an ulp of a (absorbed by a + b), c ≈ -a brings it back
        a = finite_in(rng, 100, 180);
        b = finite_in(rng, field_of(a) - rng.range(25, 40), field_of(a) - 25);
        c = nudge(a, rng.range(-4, 4)) ^ kSignBit;
      }
      canonical = ieee::add(ieee::add(a, b), c);
      mirror = bits_of(static_cast<float>(static_cast<double>(f(a)) + static_cast<double>(f(b)) +
                                          static_cast<double>(f(c))));
      input = fmt::format("{}, {}, {}", hex(a), hex(b), hex(c));
    } else {
      // The canonical dot product of a K-loop: acc = fma(x_k, y_k, acc) for k = 0..15.
      bits32 acc = 0;
      double wide = 0.0;
      for (int k = 0; k < kDot; ++k) {
        const bits32 x = regime == 0 ? finite_in(rng, 120, 127) : finite_in(rng, 100, 150);
        const bits32 y = regime == 0 ? finite_in(rng, 120, 127) : finite_in(rng, 100, 150);
        acc = ieee::fma(x, y, acc);
        wide += static_cast<double>(f(x)) * static_cast<double>(f(y));
        if (k == 0) input = fmt::format("x0 {}, y0 {}, ...", hex(x), hex(y));
      }
      canonical = acc;
      mirror = bits_of(static_cast<float>(wide));
    }
    ++s.cases;
    if (same_value(canonical, mirror)) continue;
    ++s.rejected;
    if (s.example.empty())
      s.example = fmt::format("{}: oracle {}, mirror {}", input, hex(canonical), hex(mirror));
  }
  return s;
}

}  // namespace lockstep::num::ieee::check
