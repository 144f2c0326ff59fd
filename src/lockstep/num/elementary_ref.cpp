// References, ulp error and input samples for the elementary functions
// (elementary_ref.hpp says what each piece means).
#include "lockstep/num/elementary_ref.hpp"

#include <omp.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"

#if defined(LOCKSTEP_HAVE_MPFR) && LOCKSTEP_HAVE_MPFR
#include <mpfr.h>
#define LOCKSTEP_ELEM_MPFR 1
#else
#define LOCKSTEP_ELEM_MPFR 0
#endif

namespace lockstep::num::elem {

namespace {

// The documented bounds (docs/NUMERICS.md, "Elementary functions"): the
// exhaustive maximum over all 2^32 inputs (bench/ulp), rounded up to the next
// 0.01 ulp. pow is not exhaustively measurable (2^64 inputs): its bound is the
// sampled maximum over the regimes below and the exhaustive RoPE slices, with margin.
constexpr FnSpec kSpecs[] = {
    {Fn::exp, "exp", 1, 0.51, true},         {Fn::exp2, "exp2", 1, 0.51, true},
    {Fn::expm1, "expm1", 1, 0.51, true},     {Fn::log, "log", 1, 0.51, true},
    {Fn::log2, "log2", 1, 0.51, true},       {Fn::log1p, "log1p", 1, 0.51, true},
    {Fn::tanh, "tanh", 1, 0.51, true},       {Fn::sigmoid, "sigmoid", 1, 0.51, true},
    {Fn::sin, "sin", 1, 0.53, false},        {Fn::cos, "cos", 1, 0.52, false},
    {Fn::rsqrt, "rsqrt", 1, 1.50, true},     {Fn::pow, "pow", 2, 0.52, false},
};

}  // namespace

std::span<const FnSpec> all_fns() { return kSpecs; }

const FnSpec& spec(Fn fn) {
  for (const FnSpec& s : kSpecs)
    if (s.fn == fn) return s;
  throw std::logic_error("elem::spec: unknown function");
}

float eval(Fn fn, float x, float y) {
  switch (fn) {
    case Fn::exp: return num::exp(x);
    case Fn::exp2: return num::exp2(x);
    case Fn::expm1: return num::expm1(x);
    case Fn::log: return num::log(x);
    case Fn::log2: return num::log2(x);
    case Fn::log1p: return num::log1p(x);
    case Fn::tanh: return num::tanh(x);
    case Fn::sigmoid: return num::sigmoid(x);
    case Fn::sin: return num::sin(x);
    case Fn::cos: return num::cos(x);
    case Fn::rsqrt: return num::rsqrt(x);
    case Fn::pow: return num::pow(x, y);
  }
  return 0.0f;
}

Impl lockstep_impl(Fn fn) {
  return [fn](float x, float y) { return eval(fn, x, y); };
}

// ---------------------------------------------------------------------------
// References
// ---------------------------------------------------------------------------

Exact libm_ref(Fn fn, float xf, float yf) {
  const double x = xf, y = yf;
  double v = 0.0;
  switch (fn) {
    case Fn::exp: v = std::exp(x); break;
    case Fn::exp2: v = std::exp2(x); break;
    case Fn::expm1: v = std::expm1(x); break;
    case Fn::log: v = std::log(x); break;
    case Fn::log2: v = std::log2(x); break;
    case Fn::log1p: v = std::log1p(x); break;
    case Fn::tanh: v = std::tanh(x); break;
    case Fn::sigmoid: v = 1.0 / (1.0 + std::exp(-x)); break;
    case Fn::sin: v = std::sin(x); break;
    case Fn::cos: v = std::cos(x); break;
    case Fn::rsqrt: v = 1.0 / std::sqrt(x); break;
    case Fn::pow: v = std::pow(x, y); break;
  }
  return {v, static_cast<float>(v)};
}

bool mpfr_available() { return LOCKSTEP_ELEM_MPFR != 0; }

#if LOCKSTEP_ELEM_MPFR
namespace {
// Working precision: 160 bits. Every function here is correctly rounded by
// MPFR at that precision, so the value is exact to 2^-160 relative — the
// double and the binary32 rounding taken from it are both exact roundings
// (a double rounding could only bite within 2^-160 of a float midpoint).
constexpr mpfr_prec_t kPrec = 160;

struct Mp {
  mpfr_t v;
  explicit Mp(mpfr_prec_t p = kPrec) { mpfr_init2(v, p); }
  ~Mp() { mpfr_clear(v); }
  Mp(const Mp&) = delete;
  Mp& operator=(const Mp&) = delete;
};
}  // namespace

Exact mpfr_ref(Fn fn, float xf, float yf) {
  Mp x(24), y(24), r;
  mpfr_set_flt(x.v, xf, MPFR_RNDN);  // exact
  mpfr_set_flt(y.v, yf, MPFR_RNDN);
  switch (fn) {
    case Fn::exp: mpfr_exp(r.v, x.v, MPFR_RNDN); break;
    case Fn::exp2: mpfr_exp2(r.v, x.v, MPFR_RNDN); break;
    case Fn::expm1: mpfr_expm1(r.v, x.v, MPFR_RNDN); break;
    case Fn::log: mpfr_log(r.v, x.v, MPFR_RNDN); break;
    case Fn::log2: mpfr_log2(r.v, x.v, MPFR_RNDN); break;
    case Fn::log1p: mpfr_log1p(r.v, x.v, MPFR_RNDN); break;
    case Fn::tanh: mpfr_tanh(r.v, x.v, MPFR_RNDN); break;
    case Fn::sigmoid: {
      // 1 / (1 + e^-x) at 2*kPrec bits: three roundings of 2^-320 each.
      Mp t(2 * kPrec);
      mpfr_neg(t.v, x.v, MPFR_RNDN);
      mpfr_exp(t.v, t.v, MPFR_RNDN);
      mpfr_add_ui(t.v, t.v, 1, MPFR_RNDN);
      mpfr_ui_div(r.v, 1, t.v, MPFR_RNDN);
      break;
    }
    case Fn::sin: mpfr_sin(r.v, x.v, MPFR_RNDN); break;
    case Fn::cos: mpfr_cos(r.v, x.v, MPFR_RNDN); break;
    case Fn::rsqrt:
      // mpfr_rec_sqrt gives +inf for -0 (MPFR's convention); the IEEE 754
      // rSqrt and 1/sqrt(-0) give -inf.
      if (mpfr_zero_p(x.v) && mpfr_signbit(x.v)) {
        mpfr_set_inf(r.v, -1);
      } else {
        mpfr_rec_sqrt(r.v, x.v, MPFR_RNDN);
      }
      break;
    case Fn::pow: mpfr_pow(r.v, x.v, y.v, MPFR_RNDN); break;
  }
  return {mpfr_get_d(r.v, MPFR_RNDN), mpfr_get_flt(r.v, MPFR_RNDN)};
}
#else
Exact mpfr_ref(Fn, float, float) { throw std::logic_error("mpfr_ref: this build has no MPFR"); }
#endif

Exact best_ref(Fn fn, float x, float y) { return mpfr_available() ? mpfr_ref(fn, x, y) : libm_ref(fn, x, y); }

std::string best_ref_name() {
  return mpfr_available() ? "MPFR (160 bits)" : "glibc double libm (no MPFR in this build)";
}

// ---------------------------------------------------------------------------
// ulp error
// ---------------------------------------------------------------------------

double ulp_of(double exact) {
  const double a = std::fabs(exact);
  if (!(a >= 0x1p-126)) return 0x1p-149;
  if (a >= 0x1p128) return 0x1p104;
  int e = 0;
  std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1): floor(log2 a) = e - 1
  return std::ldexp(1.0, e - 24);
}

double ulp_error(float y, double exact) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (std::isnan(exact)) return std::isnan(y) ? 0.0 : kInf;
  if (std::isnan(y)) return kInf;
  if (std::isinf(exact)) return static_cast<double>(y) == exact ? 0.0 : kInf;
  double yd = y;
  if (std::isinf(y)) {
    // Rounds to inf: |e| >= 2^128 (1 - 2^-25), the midpoint above FLT_MAX.
    if (std::fabs(exact) >= 0x1p128 - 0x1p103 && std::signbit(exact) == std::signbit(y)) return 0.0;
    yd = std::copysign(0x1p128, yd);
  }
  return std::fabs(yd - exact) / ulp_of(exact);
}

bool same_result(float a, float b) {
  return bits_of(a) == bits_of(b) || (std::isnan(a) && std::isnan(b));
}

bool near_midpoint(double d) {
  if (!std::isfinite(d)) return false;
  const float f = static_cast<float>(d);
  if (std::isinf(f)) return std::fabs(std::fabs(d) - (0x1p128 - 0x1p103)) < 0x1p84;
  const double t = (d - static_cast<double>(f)) / ulp_of(d);  // in [-0.5, 0.5]
  return 0.5 - std::fabs(t) < 0x1p-20;
}

std::string hexf(float x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a (%.9g)", static_cast<double>(x), static_cast<double>(x));
  return buf;
}

// ---------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------

namespace {

// splitmix64: a tiny explicit generator, identical everywhere.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double u01() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  // Uniform in [lo, hi] (in double), rounded to float.
  float uniform(double lo, double hi) { return static_cast<float>(lo + (hi - lo) * u01()); }
  std::int64_t integer(std::int64_t lo, std::int64_t hi) {  // inclusive
    return lo + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  float bits() { return float_of(static_cast<std::uint32_t>(next() >> 32)); }
  // |x| = 2^e * (1 + random mantissa), e uniform in [elo, ehi]; random sign if both_signs.
  float logscale(int elo, int ehi, bool both_signs) {
    const int e = static_cast<int>(integer(elo, ehi));
    const std::uint32_t mant = static_cast<std::uint32_t>(next() >> 41);  // 23 bits
    float v;
    if (e < -126) {  // subnormal: random bits below the implicit position
      v = float_of(mant >> (-126 - e));
    } else {
      v = float_of((static_cast<std::uint32_t>(e + 127) << 23) | mant);
    }
    if (both_signs && (next() & 1)) v = -v;
    return v;
  }
  // c moved by a random number of ulps in [-k, k] (stays finite and on c's side of 0).
  float near(double c, int k) {
    const float f = static_cast<float>(c);
    const std::int64_t d = integer(-k, k);
    const std::uint32_t b = bits_of(f);
    const std::int64_t nb = static_cast<std::int64_t>(b & 0x7fffffffu) + d;
    const std::uint32_t mag = static_cast<std::uint32_t>(nb < 0 ? 0 : (nb > 0x7f7fffff ? 0x7f7fffff : nb));
    return float_of((b & 0x80000000u) | mag);
  }
};

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kPi = 3.14159265358979323846;

struct Regime {
  const char* name;
  std::function<void(Rng&, float&, float&)> gen;
};

std::vector<Regime> regimes_for(Fn fn) {
  using R = Rng;
  std::vector<Regime> v;
  auto one = [](const char* name, std::function<float(R&)> g) {
    return Regime{name, [g](R& r, float& x, float& y) {
                    x = g(r);
                    y = 0.0f;
                  }};
  };
  // Every function: random bit patterns over the whole domain (NaNs, infinities,
  // subnormals, both signs included).
  if (fn != Fn::pow) v.push_back(one("random bits", [](R& r) { return r.bits(); }));
  switch (fn) {
    case Fn::exp:
      v.push_back(one("[-104, 89]", [](R& r) { return r.uniform(-104, 89); }));
      v.push_back(one("|x| in [2^-30, 4]", [](R& r) { return r.logscale(-30, 1, true); }));
      v.push_back(one("overflow edge [88, 89]", [](R& r) { return r.uniform(88, 89); }));
      v.push_back(one("subnormal results [-104, -87]", [](R& r) { return r.uniform(-104, -87); }));
      v.push_back(one("(k+1/2) ln2 +- 64 ulp", [](R& r) {
        return r.near((static_cast<double>(r.integer(-150, 127)) + 0.5) * kLn2, 64);
      }));
      break;
    case Fn::exp2:
      v.push_back(one("[-151, 128]", [](R& r) { return r.uniform(-151, 128); }));
      v.push_back(one("|x| in [2^-30, 4]", [](R& r) { return r.logscale(-30, 1, true); }));
      v.push_back(one("overflow edge [127, 128]", [](R& r) { return r.uniform(127, 128); }));
      v.push_back(one("subnormal results [-150, -126]", [](R& r) { return r.uniform(-150, -126); }));
      v.push_back(one("k + 1/2 +- 64 ulp", [](R& r) {
        return r.near(static_cast<double>(r.integer(-150, 127)) + 0.5, 64);
      }));
      v.push_back(one("integers +- 64 ulp", [](R& r) {
        return r.near(static_cast<double>(r.integer(-149, 127)), 64);
      }));
      break;
    case Fn::expm1:
      v.push_back(one("[-18, 89]", [](R& r) { return r.uniform(-18, 89); }));
      v.push_back(one("|x| in [2^-30, 1]", [](R& r) { return r.logscale(-30, -1, true); }));
      v.push_back(one("near +-2^-25", [](R& r) { return r.logscale(-27, -23, true); }));
      v.push_back(one("-1 threshold [-17.6, -17]", [](R& r) { return r.uniform(-17.6, -17); }));
      v.push_back(one("overflow edge [88, 89]", [](R& r) { return r.uniform(88, 89); }));
      v.push_back(one("(k+1/2) ln2 +- 64 ulp", [](R& r) {
        return r.near((static_cast<double>(r.integer(-26, 127)) + 0.5) * kLn2, 64);
      }));
      break;
    case Fn::log:
    case Fn::log2:
      v.push_back(one("(0, 4]", [](R& r) { return r.uniform(0, 4); }));
      v.push_back(one("1 +- [2^-30, 1/4]", [](R& r) { return 1.0f + r.logscale(-30, -3, true); }));
      v.push_back(one("subnormal inputs", [](R& r) { return r.logscale(-149, -127, false); }));
      v.push_back(one("m near sqrt2, any E", [](R& r) {
        return r.near(std::ldexp(1.41421356237309504880, static_cast<int>(r.integer(-126, 127))), 64);
      }));
      v.push_back(one("powers of 2 +- 64 ulp", [](R& r) {
        return r.near(std::ldexp(1.0, static_cast<int>(r.integer(-126, 127))), 64);
      }));
      v.push_back(one("all positive floats", [](R& r) { return r.logscale(-149, 127, false); }));
      break;
    case Fn::log1p:
      v.push_back(one("(-1, 3]", [](R& r) { return r.uniform(-1, 3); }));
      v.push_back(one("|x| in [2^-30, 1]", [](R& r) { return r.logscale(-30, -1, true); }));
      v.push_back(one("near +-2^-25", [](R& r) { return r.logscale(-27, -23, true); }));
      v.push_back(one("-1 + [2^-24, 1/2]", [](R& r) { return -1.0f + r.logscale(-24, -2, false); }));
      v.push_back(one("large [2^20, 2^128)", [](R& r) { return r.logscale(20, 127, false); }));
      break;
    case Fn::tanh:
      v.push_back(one("[-10, 10]", [](R& r) { return r.uniform(-10, 10); }));
      v.push_back(one("|x| in [2^-20, 2]", [](R& r) { return r.logscale(-20, 0, true); }));
      v.push_back(one("tiny threshold |x| ~ 2^-13", [](R& r) { return r.logscale(-15, -11, true); }));
      v.push_back(one("+-1 threshold [8.5, 10.5]", [](R& r) { return (r.next() & 1 ? 1.0f : -1.0f) * r.uniform(8.5, 10.5); }));
      v.push_back(one("(k+1/2) ln2/2 +- 64 ulp", [](R& r) {
        return r.near((static_cast<double>(r.integer(-29, 0)) + 0.5) * kLn2 * -0.5, 64);
      }));
      break;
    case Fn::sigmoid:
      v.push_back(one("[-110, 25]", [](R& r) { return r.uniform(-110, 25); }));
      v.push_back(one("|x| in [2^-30, 4]", [](R& r) { return r.logscale(-30, 1, true); }));
      v.push_back(one("exp switch [-41, -39]", [](R& r) { return r.uniform(-41, -39); }));
      v.push_back(one("1 threshold [16, 21]", [](R& r) { return r.uniform(16, 21); }));
      v.push_back(one("subnormal results [-104, -87]", [](R& r) { return r.uniform(-104, -87); }));
      v.push_back(one("(k+1/2) ln2 +- 64 ulp", [](R& r) {
        return r.near((static_cast<double>(r.integer(-58, 58)) + 0.5) * kLn2, 64);
      }));
      break;
    case Fn::sin:
    case Fn::cos:
      v.push_back(one("[-pi, pi]", [](R& r) { return r.uniform(-kPi, kPi); }));
      v.push_back(one("[-1e6, 1e6]", [](R& r) { return r.uniform(-1e6, 1e6); }));
      v.push_back(one("|x| in [2^-30, 1]", [](R& r) { return r.logscale(-30, -1, true); }));
      v.push_back(one("k pi/2 +- 16 ulp, k < 2^21", [](R& r) {
        return r.near(static_cast<double>(r.integer(-(1 << 21), 1 << 21)) * kPi / 2, 16);
      }));
      v.push_back(one("pi/4 +- 64 ulp", [](R& r) { return r.near((r.next() & 1 ? 1 : -1) * kPi / 4, 64); }));
      v.push_back(one("huge |x| in [2^20, 2^128)", [](R& r) { return r.logscale(20, 127, true); }));
      break;
    case Fn::rsqrt:
      v.push_back(one("(0, 4]", [](R& r) { return r.uniform(0, 4); }));
      v.push_back(one("all positive floats", [](R& r) { return r.logscale(-149, 127, false); }));
      v.push_back(one("subnormal inputs", [](R& r) { return r.logscale(-149, -127, false); }));
      break;
    case Fn::pow: {
      auto two = [](const char* name, std::function<void(R&, float&, float&)> g) { return Regime{name, g}; };
      v.push_back(two("RoPE theta^(-2i/d)", [](R& r, float& x, float& y) {
        static constexpr float thetas[] = {10000.0f, 500000.0f, 1000000.0f, 50000.0f};
        x = thetas[r.next() % 4];
        const int d = 32 << (r.next() % 4);  // 32 .. 256
        const int i = static_cast<int>(r.integer(0, d / 2 - 1));
        y = -static_cast<float>(2 * i) / static_cast<float>(d);
      }));
      v.push_back(two("theta in {1e4, 5e5}, y in [-1, 0]", [](R& r, float& x, float& y) {
        x = r.next() & 1 ? 10000.0f : 500000.0f;
        y = r.uniform(-1, 0);
      }));
      v.push_back(two("x in (0, 10], y in [-30, 30]", [](R& r, float& x, float& y) {
        x = r.uniform(0, 10);
        y = r.uniform(-30, 30);
      }));
      v.push_back(two("x in [2^-20, 2^20], y in [-5, 5]", [](R& r, float& x, float& y) {
        x = r.logscale(-20, 19, false);
        y = r.uniform(-5, 5);
      }));
      v.push_back(two("near overflow y log x ~ 88.7", [](R& r, float& x, float& y) {
        x = r.uniform(1.5, 100);
        y = static_cast<float>(88.72 / std::log(static_cast<double>(x)) * (1 + 0.002 * (r.u01() - 0.5)));
      }));
      v.push_back(two("subnormal results y log x in [-104, -87]", [](R& r, float& x, float& y) {
        x = r.uniform(0.05, 0.95);
        y = static_cast<float>((-104.0 + 17.0 * r.u01()) / std::log(static_cast<double>(x)));
      }));
      v.push_back(two("x < 0, integer y", [](R& r, float& x, float& y) {
        x = r.uniform(-10, -0.1);
        y = static_cast<float>(r.integer(-20, 20));
      }));
      v.push_back(two("x in [0.1, 10], |y| in [2^-30, 2^-5]", [](R& r, float& x, float& y) {
        x = r.uniform(0.1, 10);
        y = r.logscale(-30, -6, true);
      }));
      v.push_back(two("x near 1, |y| large", [](R& r, float& x, float& y) {
        x = 1.0f + r.logscale(-24, -8, true);
        y = r.uniform(-2e4, 2e4);
      }));
      v.push_back(two("random bits", [](R& r, float& x, float& y) {
        x = r.bits();
        y = r.bits();
      }));
      v.push_back(two("x random bits > 0, y in [-2, 2]", [](R& r, float& x, float& y) {
        x = float_of(static_cast<std::uint32_t>(r.next() >> 33));
        y = r.uniform(-2, 2);
      }));
      break;
    }
  }
  return v;
}

}  // namespace

Sample sample_inputs(Fn fn, std::size_t n, std::uint64_t seed) {
  const std::vector<Regime> regimes = regimes_for(fn);
  Rng rng{seed * 0x100000001b3ull + static_cast<std::uint64_t>(fn) * 0x9e3779b97f4a7c15ull + 1};
  Sample s;
  s.x.resize(n);
  s.y.resize(n);
  s.regime_of.resize(n);
  for (const Regime& r : regimes) s.regime_names.emplace_back(r.name);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = i % regimes.size();  // equal shares, interleaved
    regimes[k].gen(rng, s.x[i], s.y[i]);
    s.regime_of[i] = static_cast<std::uint8_t>(k);
  }
  return s;
}

Sample tie_prone_inputs(Fn fn) {
  Sample s;
  s.regime_names.emplace_back("6-bit significands, |x| in [2^-30, 2^31)");
  for (int e = -30; e <= 30; ++e)
    for (std::uint32_t m = 0; m < 64; ++m)
      for (std::uint32_t sign : {0u, 0x80000000u}) {
        s.x.push_back(float_of(sign | (static_cast<std::uint32_t>(e + 127) << 23) | (m << 17)));
        s.y.push_back(fn == Fn::pow ? 2.5f : 0.0f);
        s.regime_of.push_back(0);
      }
  return s;
}

Measure measure(const Impl& impl, Fn fn, const Sample& s, RefKind ref) {
  const std::int64_t n = static_cast<std::int64_t>(s.x.size());
  Measure total;
  total.cases = static_cast<std::uint64_t>(n);
  const int nt = omp_get_max_threads();
  std::vector<Measure> part(static_cast<std::size_t>(nt));
  std::vector<std::int64_t> arg(static_cast<std::size_t>(nt), -1);
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    Measure& m = part[static_cast<std::size_t>(t)];
    std::int64_t& a = arg[static_cast<std::size_t>(t)];
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const float x = s.x[static_cast<std::size_t>(i)], y = s.y[static_cast<std::size_t>(i)];
      const float got = impl(x, y);
      const Exact e = ref == RefKind::libm ? libm_ref(fn, x, y)
                      : ref == RefKind::mpfr ? mpfr_ref(fn, x, y)
                                             : best_ref(fn, x, y);
      const double err = ulp_error(got, e.value);
      if (!same_result(got, e.rounded)) ++m.not_correctly_rounded;
      if (a < 0 || err > m.max_ulp) {  // this thread's indices increase: ties keep the earliest
        m.max_ulp = err;
        m.argmax_x = x;
        m.argmax_y = y;
        m.argmax_got = got;
        m.argmax_exact = e.value;
        a = i;
      }
    }
  }
  std::int64_t best = -1;
  for (std::size_t t = 0; t < part.size(); ++t) {
    total.not_correctly_rounded += part[t].not_correctly_rounded;
    if (arg[t] < 0) continue;
    if (best < 0 || part[t].max_ulp > total.max_ulp || (part[t].max_ulp == total.max_ulp && arg[t] < best)) {
      total.max_ulp = part[t].max_ulp;
      total.argmax_x = part[t].argmax_x;
      total.argmax_y = part[t].argmax_y;
      total.argmax_got = part[t].argmax_got;
      total.argmax_exact = part[t].argmax_exact;
      best = arg[t];
    }
  }
  return total;
}

// ---------------------------------------------------------------------------
// The oracle policy
// ---------------------------------------------------------------------------

namespace {

template <ieee::Flaw F>
struct FlawedArith {
  static float add(float a, float b) { return float_of(ieee::mutant::add(F, bits_of(a), bits_of(b))); }
  static float sub(float a, float b) { return float_of(ieee::mutant::sub(F, bits_of(a), bits_of(b))); }
  static float mul(float a, float b) { return float_of(ieee::mutant::mul(F, bits_of(a), bits_of(b))); }
  static float div(float a, float b) { return float_of(ieee::mutant::div(F, bits_of(a), bits_of(b))); }
  static float sqrt(float a) { return float_of(ieee::mutant::sqrt(F, bits_of(a))); }
  static float fma(float a, float b, float c) {
    return float_of(ieee::mutant::fma(F, bits_of(a), bits_of(b), bits_of(c)));
  }
  static float from_int(std::int32_t i) { return float_of(ieee::mutant::from_i32(F, i)); }
};

template <class A>
float eval_with(Fn fn, float x, float y) {
  switch (fn) {
    case Fn::exp: return num::exp<A>(x);
    case Fn::exp2: return num::exp2<A>(x);
    case Fn::expm1: return num::expm1<A>(x);
    case Fn::log: return num::log<A>(x);
    case Fn::log2: return num::log2<A>(x);
    case Fn::log1p: return num::log1p<A>(x);
    case Fn::tanh: return num::tanh<A>(x);
    case Fn::sigmoid: return num::sigmoid<A>(x);
    case Fn::sin: return num::sin<A>(x);
    case Fn::cos: return num::cos<A>(x);
    case Fn::rsqrt: return num::rsqrt<A>(x);
    case Fn::pow: return num::pow<A>(x, y);
  }
  return 0.0f;
}

}  // namespace

float eval_oracle(Fn fn, float x, float y, ieee::Flaw flaw) {
  switch (flaw) {
    case ieee::Flaw::none: return eval_with<OracleArith>(fn, x, y);
    case ieee::Flaw::ties_away: return eval_with<FlawedArith<ieee::Flaw::ties_away>>(fn, x, y);
    case ieee::Flaw::flush_subnormals: return eval_with<FlawedArith<ieee::Flaw::flush_subnormals>>(fn, x, y);
    case ieee::Flaw::no_sticky: return eval_with<FlawedArith<ieee::Flaw::no_sticky>>(fn, x, y);
  }
  throw std::logic_error("eval_oracle: unknown flaw");
}

BitCheck compare_with_oracle(Fn fn, const Sample& s, ieee::Flaw flaw) {
  BitCheck c;
  c.cases = s.x.size();
  const std::int64_t n = static_cast<std::int64_t>(s.x.size());
  std::int64_t first = n;
  std::uint64_t differing = 0;
#pragma omp parallel for schedule(static) reduction(+ : differing) reduction(min : first)
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = s.x[static_cast<std::size_t>(i)], y = s.y[static_cast<std::size_t>(i)];
    if (!same_result(eval(fn, x, y), eval_oracle(fn, x, y, flaw))) {
      ++differing;
      if (i < first) first = i;
    }
  }
  c.differing = differing;
  if (first < n) {
    c.first_x = s.x[static_cast<std::size_t>(first)];
    c.first_y = s.y[static_cast<std::size_t>(first)];
    c.first_hw = eval(fn, c.first_x, c.first_y);
    c.first_oracle = eval_oracle(fn, c.first_x, c.first_y, flaw);
  }
  return c;
}

// ---------------------------------------------------------------------------
// Deliberately wrong implementations. Each is lockstep's algorithm with one
// typical bug; they use the same building blocks (num::detail) so only the bug
// differs.
// ---------------------------------------------------------------------------

namespace {

using W = detail::V<HwArith>;
using DFh = detail::DF<HwArith>;

// exp whose reduction forgets ln2_lo: x - k ln2 is off by k * 1.9e-9.
float exp_no_ln2_lo(float x) {
  if (std::isnan(x) || x > 89.0f || x < -104.0f) return num::exp(x);
  detail::ExpArg<HwArith> e = detail::exp_reduce(W(x));
  e.rl = 0.0f;
  return detail::exp_finish(e.k, detail::expm1_core(e.rh, e.rl));
}

// exp whose polynomial has the 1/5! coefficient off by 2^-10 (relative): as
// detail::expm1_core with that one constant changed.
float exp_perturbed_coefficient(float x) {
  if (std::isnan(x) || x > 89.0f || x < -104.0f) return num::exp(x);
  const detail::ExpArg<HwArith> e = detail::exp_reduce(W(x));
  const W rh = e.rh, rl = e.rl;
  const W half_r = W(0.5f) * rh;
  const DFh h = detail::two_prod(half_r, rh);
  const DFh t = detail::two_prod(h.hi, rh);
  const W tl = t.lo + h.lo * rh;
  const W third_h = 0x1.555556p-2f, third_l = -0x1.555556p-27f;
  const DFh c = detail::two_prod(t.hi, third_h);
  const W cl = c.lo + (t.hi * third_l + tl * third_h);
  W q = 0x1.71de3ap-19f;
  q = fma(q, rh, 0x1.a01a02p-16f);
  q = fma(q, rh, 0x1.a01a02p-13f);
  q = fma(q, rh, 0x1.6c16c2p-10f);
  q = fma(q, rh, 0x1.111112p-7f * (1.0f + 0x1p-10f));  // the bug
  q = fma(q, rh, 0x1.555556p-5f);
  const W r2 = rh * rh;
  const DFh s1 = detail::fast_two_sum(rh, h.hi);
  const DFh s2 = detail::fast_two_sum(s1.hi, c.hi);
  const W tail = fma(r2 * r2, q, fma(rl, s2.hi, rl));
  const W lo = ((tail + (h.lo + cl)) + s1.lo) + s2.lo;
  return detail::exp_finish(e.k, detail::fast_two_sum(s2.hi, lo));
}

// log whose E*ln2 forgets the low part of ln2 (E * 1.4e-6 off).
float log_no_ln2_lo(float x) {
  if (!(x > 0.0f) || std::isinf(x)) return num::log(x);
  const detail::LogSplit<HwArith> sp = detail::log_split(W(x));
  const DFh L = detail::log_dd_core(sp.m, W(0.0f));
  const W ah = W(static_cast<float>(sp.E)) * W(0x1.62e4p-1f);
  return (ah + (L.hi + L.lo)).v;
}

// expm1 as exp(x) - 1: cancellation near 0.
float expm1_naive(float x) { return num::exp(x) - 1.0f; }

// log1p as log(1 + x): 1 + x loses x's low bits near 0.
float log1p_naive(float x) { return num::log(1.0f + x); }

// tanh returning x below 2^-8 instead of 2^-13 (x^3/3 dropped too early).
float tanh_threshold(float x) { return std::fabs(x) < 0x1p-8f ? x : num::tanh(x); }

// sigmoid written naively as 1 / (1 + exp(-x)) in float: two extra roundings.
float sigmoid_naive(float x) { return 1.0f / (1.0f + num::exp(-x)); }

// sin with a float Cody-Waite reduction x - n*pi/2 (two-part pi/2) instead of
// Payne-Hanek: fine for small x, wrong once n*pi/2 needs more bits than it has.
float sin_float_reduction(float x) {
  const float a = std::fabs(x);
  if (!(a > 0x1.921fb6p-1f) || std::isinf(a)) return num::sin(x);
  const W nf = detail::round_int(W(a) * W(0x1.45f306p-1f));  // 2/pi
  if (nf.v > 4e6f) return num::sin(x);  // keep the mutant within its own failure
  const W r = fma(-nf, 0x1.921fb6p+0f, W(a));
  const W rl = -nf * W(-0x1.777a5cp-25f);
  const DFh rr = detail::two_sum(r, rl);
  const std::uint32_t n = static_cast<std::uint32_t>(nf.v) & 3u;
  W v = (n & 1u) ? detail::cos_poly(rr.hi, rr.lo) : detail::sin_poly(rr.hi, rr.lo);
  if (n & 2u) v = -v;
  return x < 0.0f ? -v.v : v.v;
}

// cos whose double-float reduction result keeps only its high part.
float cos_no_low_part(float x) {
  const float a = std::fabs(x);
  if (!(a > 0x1.921fb6p-1f) || std::isinf(a) || std::isnan(a)) return num::cos(x);
  const detail::Reduced<HwArith> r = detail::reduce_pio2(W(a));
  W v = (r.n & 1u) ? detail::sin_poly(r.rh, W(0.0f)) : detail::cos_poly(r.rh, W(0.0f));
  if ((r.n + 1u) & 2u) v = -v;
  return v.v;
}

// pow through a float log: y * log(x) loses the bits of log x's low part.
float pow_float_log(float x, float y) {
  if (!(x > 0.0f) || std::isinf(x) || std::isnan(y) || std::isinf(y)) return num::pow(x, y);
  return num::exp(y * num::log(x));
}

}  // namespace

const std::vector<Mutant>& mutants() {
  static const std::vector<Mutant> m = {
      {Fn::exp, "exp: reduction without ln2_lo", [](float x, float) { return exp_no_ln2_lo(x); }},
      {Fn::exp, "exp: 1/5! coefficient off by 2^-10", [](float x, float) { return exp_perturbed_coefficient(x); }},
      {Fn::expm1, "expm1 = exp(x) - 1", [](float x, float) { return expm1_naive(x); }},
      {Fn::log, "log: E*ln2 without ln2_lo", [](float x, float) { return log_no_ln2_lo(x); }},
      {Fn::log1p, "log1p = log(1 + x)", [](float x, float) { return log1p_naive(x); }},
      {Fn::tanh, "tanh: tiny-x threshold 2^-8", [](float x, float) { return tanh_threshold(x); }},
      {Fn::sigmoid, "sigmoid = 1/(1+exp(-x)) in float", [](float x, float) { return sigmoid_naive(x); }},
      {Fn::sin, "sin: float Cody-Waite reduction", [](float x, float) { return sin_float_reduction(x); }},
      {Fn::cos, "cos: reduced argument without its low part", [](float x, float) { return cos_no_low_part(x); }},
      {Fn::pow, "pow = exp(y * log(x)) in float", [](float x, float y) { return pow_float_log(x, y); }},
  };
  return m;
}

}  // namespace lockstep::num::elem
