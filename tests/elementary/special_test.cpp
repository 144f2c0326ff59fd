// Special values, exact cases, symmetries and monotonicity of lockstep's
// elementary functions (num/elementary.hpp), and the ulp-error measure itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "lockstep/num/elementary.hpp"
#include "lockstep/num/elementary_ref.hpp"
#include "test_util.hpp"

namespace ln = lockstep::num;
namespace le = lockstep::num::elem;
using ln::bits_of;
using ln::float_of;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaNs[] = {float_of(0x7fc00000u), float_of(0xffc00000u), float_of(0x7f800001u),
                       float_of(0xff812345u), float_of(0x7fffffffu)};

// Bitwise equality (so -0 != +0); NaN equals NaN.
::testing::AssertionResult Same(float got, float want) {
  if (le::same_result(got, want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << le::hexf(got) << " [0x" << std::hex << bits_of(got)
                                       << "], want " << le::hexf(want) << " [0x" << bits_of(want) << "]";
}

float next_up(float x) { return std::nextafter(x, kInf); }
float next_down(float x) { return std::nextafter(x, -kInf); }

TEST(ElementarySpecial, NaNGivesNaN) {
  int n = 0;
  for (const le::FnSpec& s : le::all_fns()) {
    for (float q : kNaNs) {
      const float r = le::eval(s.fn, q, s.arity == 2 ? 2.0f : 0.0f);
      EXPECT_TRUE(std::isnan(r)) << s.name << "(" << le::hexf(q) << ") = " << le::hexf(r);
      ++n;
      if (s.arity == 2) {
        EXPECT_TRUE(std::isnan(ln::pow(2.0f, q)));
        ++n;
      }
    }
  }
  std::printf("[elementary] NaN inputs: %d cases\n", n);
}

TEST(ElementarySpecial, ZerosInfinitiesAndDomain) {
  // exp family
  EXPECT_TRUE(Same(ln::exp(0.0f), 1.0f));
  EXPECT_TRUE(Same(ln::exp(-0.0f), 1.0f));
  EXPECT_TRUE(Same(ln::exp(kInf), kInf));
  EXPECT_TRUE(Same(ln::exp(-kInf), 0.0f));
  EXPECT_TRUE(Same(ln::exp2(0.0f), 1.0f));
  EXPECT_TRUE(Same(ln::exp2(-0.0f), 1.0f));
  EXPECT_TRUE(Same(ln::exp2(kInf), kInf));
  EXPECT_TRUE(Same(ln::exp2(-kInf), 0.0f));
  EXPECT_TRUE(Same(ln::expm1(0.0f), 0.0f));
  EXPECT_TRUE(Same(ln::expm1(-0.0f), -0.0f));
  EXPECT_TRUE(Same(ln::expm1(kInf), kInf));
  EXPECT_TRUE(Same(ln::expm1(-kInf), -1.0f));
  // log family
  EXPECT_TRUE(Same(ln::log(1.0f), 0.0f));  // +0, not -0
  EXPECT_TRUE(Same(ln::log2(1.0f), 0.0f));
  EXPECT_TRUE(Same(ln::log1p(0.0f), 0.0f));
  EXPECT_TRUE(Same(ln::log1p(-0.0f), -0.0f));
  for (float z : {0.0f, -0.0f}) {
    EXPECT_TRUE(Same(ln::log(z), -kInf));
    EXPECT_TRUE(Same(ln::log2(z), -kInf));
  }
  EXPECT_TRUE(Same(ln::log(kInf), kInf));
  EXPECT_TRUE(Same(ln::log2(kInf), kInf));
  EXPECT_TRUE(Same(ln::log1p(kInf), kInf));
  EXPECT_TRUE(Same(ln::log1p(-1.0f), -kInf));
  for (float neg : {-1.0f, -0x1p-149f, -kInf, -3e38f}) {
    EXPECT_TRUE(std::isnan(ln::log(neg))) << neg;
    EXPECT_TRUE(std::isnan(ln::log2(neg))) << neg;
    EXPECT_TRUE(std::isnan(ln::rsqrt(neg))) << neg;
  }
  for (float below : {next_down(-1.0f), -2.0f, -kInf}) EXPECT_TRUE(std::isnan(ln::log1p(below))) << below;
  // tanh, sigmoid
  EXPECT_TRUE(Same(ln::tanh(0.0f), 0.0f));
  EXPECT_TRUE(Same(ln::tanh(-0.0f), -0.0f));
  EXPECT_TRUE(Same(ln::tanh(kInf), 1.0f));
  EXPECT_TRUE(Same(ln::tanh(-kInf), -1.0f));
  EXPECT_TRUE(Same(ln::sigmoid(0.0f), 0.5f));
  EXPECT_TRUE(Same(ln::sigmoid(-0.0f), 0.5f));
  EXPECT_TRUE(Same(ln::sigmoid(kInf), 1.0f));
  EXPECT_TRUE(Same(ln::sigmoid(-kInf), 0.0f));
  // sin, cos
  EXPECT_TRUE(Same(ln::sin(0.0f), 0.0f));
  EXPECT_TRUE(Same(ln::sin(-0.0f), -0.0f));
  EXPECT_TRUE(Same(ln::cos(0.0f), 1.0f));
  EXPECT_TRUE(Same(ln::cos(-0.0f), 1.0f));
  for (float inf : {kInf, -kInf}) {
    EXPECT_TRUE(std::isnan(ln::sin(inf)));
    EXPECT_TRUE(std::isnan(ln::cos(inf)));
  }
  // rsqrt: 1/sqrt(x) with IEEE signed zeros.
  EXPECT_TRUE(Same(ln::rsqrt(0.0f), kInf));
  EXPECT_TRUE(Same(ln::rsqrt(-0.0f), -kInf));
  EXPECT_TRUE(Same(ln::rsqrt(kInf), 0.0f));
  EXPECT_TRUE(Same(ln::rsqrt(4.0f), 0.5f));
  EXPECT_TRUE(Same(ln::rsqrt(0x1p-148f), 0x1p74f));
}

// pow: C99 Annex F special cases.
TEST(ElementarySpecial, PowAnnexF) {
  const float q = float_of(0x7fc00000u);
  struct Case {
    float x, y, want;
  };
  const Case cases[] = {
      {q, 0.0f, 1.0f},        {q, -0.0f, 1.0f},      {1.0f, q, 1.0f},        {1.0f, kInf, 1.0f},
      {-1.0f, kInf, 1.0f},    {-1.0f, -kInf, 1.0f},  {0.5f, kInf, 0.0f},     {0.5f, -kInf, kInf},
      {2.0f, kInf, kInf},     {2.0f, -kInf, 0.0f},   {-0.5f, kInf, 0.0f},    {-2.0f, -kInf, 0.0f},
      {0.0f, 3.0f, 0.0f},     {-0.0f, 3.0f, -0.0f},  {-0.0f, 2.0f, 0.0f},    {-0.0f, 0.5f, 0.0f},
      {0.0f, -3.0f, kInf},    {-0.0f, -3.0f, -kInf}, {-0.0f, -2.0f, kInf},   {-0.0f, -0.5f, kInf},
      {kInf, 2.0f, kInf},     {kInf, -2.0f, 0.0f},   {-kInf, 3.0f, -kInf},   {-kInf, 2.0f, kInf},
      {-kInf, -3.0f, -0.0f},  {-kInf, -2.0f, 0.0f},  {-kInf, 0.5f, kInf},    {-2.0f, 3.0f, -8.0f},
      {-2.0f, 2.0f, 4.0f},    {-2.0f, -1.0f, -0.5f}, {-2.0f, 0x1p24f, kInf}, {-0.5f, 0x1p25f, 0.0f},
      {2.0f, 10.0f, 1024.0f}, {4.0f, 0.5f, 2.0f},    {2.0f, 128.0f, kInf},   {2.0f, -151.0f, 0.0f},
      {-3.0f, 1e30f, kInf},   {0.5f, 1e30f, 0.0f},   {-8.0f, 1.0f / 3.0f, q},
  };
  for (const Case& c : cases)
    EXPECT_TRUE(Same(ln::pow(c.x, c.y), c.want)) << "pow(" << le::hexf(c.x) << ", " << le::hexf(c.y) << ")";
  for (float x : {-2.0f, -0.5f, -1e30f}) EXPECT_TRUE(std::isnan(ln::pow(x, 0.5f)));
  std::printf("[elementary] pow special cases: %zu\n", std::size(cases) + 3);
}

// Results that are exact (representable) must come out exactly.
TEST(ElementarySpecial, ExactCases) {
  int n = 0;
  for (int k = -149; k <= 127; ++k) {
    const float p = std::ldexp(1.0f, k);
    EXPECT_TRUE(Same(ln::exp2(static_cast<float>(k)), p)) << k;
    EXPECT_TRUE(Same(ln::log2(p), static_cast<float>(k))) << k;
    EXPECT_TRUE(Same(ln::pow(2.0f, static_cast<float>(k)), p)) << k;
    n += 3;
  }
  // pow(x, 1) = x, and pow(x, 2) = x*x when x*x is exact (x with 12 significant bits).
  std::uint64_t s = 12345;
  for (int i = 0; i < 20000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const float x = float_of(static_cast<std::uint32_t>(s >> 33) & 0x7f7fffffu);  // positive finite
    EXPECT_TRUE(Same(ln::pow(x, 1.0f), x)) << le::hexf(x);
    const float x12 = float_of(bits_of(x) & 0xfffff000u);
    const float sq = x12 * x12;
    if (std::isfinite(sq) && sq >= 0x1p-126f) {
      EXPECT_TRUE(Same(ln::pow(x12, 2.0f), sq)) << le::hexf(x12);
    }
    n += 2;
  }
  std::printf("[elementary] exact cases: %d\n", n);
}

// Tiny arguments: the functions whose value is x(1 + O(x)) return x itself
// (sign of zero included) below the documented thresholds, and subnormal
// inputs work.
TEST(ElementarySpecial, TinyArguments) {
  int n = 0;
  for (std::uint32_t b = 1; b < 0x39000000u; b += 0x00001357u) {  // up to 2^-13
    for (float x : {float_of(b), -float_of(b)}) {
      EXPECT_TRUE(Same(ln::tanh(x), x)) << le::hexf(x);
      EXPECT_TRUE(Same(ln::sin(x), x)) << le::hexf(x);
      EXPECT_TRUE(Same(ln::cos(x), 1.0f)) << le::hexf(x);
      if (std::fabs(x) < 0x1p-25f) {
        EXPECT_TRUE(Same(ln::expm1(x), x)) << le::hexf(x);
        EXPECT_TRUE(Same(ln::log1p(x), x)) << le::hexf(x);
        EXPECT_TRUE(Same(ln::exp(x), 1.0f)) << le::hexf(x);
        EXPECT_TRUE(Same(ln::sigmoid(x), 0.5f)) << le::hexf(x);
      }
      n += 1;
    }
  }
  std::printf("[elementary] tiny arguments: %d inputs\n", n);
}

// Overflow and underflow thresholds, and the sweeps around them: the error
// bound holds across each threshold and the saturated values are exact.
TEST(ElementarySpecial, Thresholds) {
  EXPECT_TRUE(std::isfinite(ln::exp(0x1.62e42ep+6f)));  // largest x with exp(x) < FLT_MAX rounded
  EXPECT_TRUE(Same(ln::exp(0x1.62e430p+6f), kInf));
  EXPECT_TRUE(Same(ln::exp(-104.0f), 0.0f));
  EXPECT_TRUE(Same(ln::exp2(128.0f), kInf));
  EXPECT_TRUE(std::isfinite(ln::exp2(next_down(128.0f))));
  EXPECT_TRUE(Same(ln::exp2(-149.0f), 0x1p-149f));
  EXPECT_TRUE(Same(ln::exp2(-150.0f), 0.0f));  // the tie 2^-150 rounds to even (0)
  EXPECT_TRUE(Same(ln::exp2(next_up(-150.0f)), 0x1p-149f));
  EXPECT_TRUE(Same(ln::expm1(-17.5f), -1.0f));
  EXPECT_TRUE(Same(ln::tanh(10.0f), 1.0f));
  EXPECT_TRUE(Same(ln::sigmoid(20.5f), 1.0f));
  struct Sweep {
    le::Fn fn;
    float center;
  };
  const Sweep sweeps[] = {
      {le::Fn::exp, 0x1.62e42ep+6f},  {le::Fn::exp, -0x1.9fe368p+6f}, {le::Fn::exp, -0x1.5d589ep+6f},
      {le::Fn::exp2, 128.0f},         {le::Fn::exp2, -150.0f},        {le::Fn::exp2, -126.0f},
      {le::Fn::expm1, -0x1.154246p+4f}, {le::Fn::expm1, -17.5f},       {le::Fn::expm1, 0x1.62e42ep+6f},
      {le::Fn::expm1, 0x1p-25f},      {le::Fn::exp, 89.0f},           {le::Fn::exp, -104.0f},
      {le::Fn::expm1, -0x1p-25f},     {le::Fn::log1p, 0x1p-25f},      {le::Fn::log1p, -0x1p-25f},
      {le::Fn::tanh, -10.0f},         {le::Fn::sigmoid, 0.0f},
      {le::Fn::log1p, -1.0f},         {le::Fn::tanh, 0x1p-13f},       {le::Fn::tanh, 9.0109f},
      {le::Fn::tanh, 10.0f},          {le::Fn::sigmoid, -40.0f},      {le::Fn::sigmoid, 20.0f},
      {le::Fn::sigmoid, 17.33f},      {le::Fn::sigmoid, -87.33f},     {le::Fn::log, 0x1p-126f},
      {le::Fn::log, 0x1.6a09e6p+0f},  {le::Fn::log2, 0x1.6a09e6p+0f}, {le::Fn::sin, 0x1.921fb6p-1f},
      {le::Fn::cos, 0x1.921fb6p-1f},  {le::Fn::rsqrt, 0x1p-126f},
  };
  int n = 0;
  for (const Sweep& w : sweeps) {
    const le::FnSpec& s = le::spec(w.fn);
    le::Sample smp;
    float x = w.center;
    for (int i = 0; i < 2000; ++i) x = next_down(x);
    for (int i = 0; i < 4001; ++i, x = next_up(x)) {
      smp.x.push_back(x);
      smp.y.push_back(0.0f);
    }
    const le::Measure m = le::measure(le::lockstep_impl(w.fn), w.fn, smp);
    EXPECT_LE(m.max_ulp, s.bound) << s.name << " around " << le::hexf(w.center) << " at " << le::hexf(m.argmax_x);
    n += static_cast<int>(m.cases);
  }
  std::printf("[elementary] threshold sweeps: %zu thresholds, %d inputs (+-2000 ulp each)\n", std::size(sweeps), n);
}

// Symmetries that hold exactly by construction: tanh and sin odd, cos even.
TEST(ElementarySpecial, Symmetries) {
  std::uint64_t s = 777;
  int n = 0;
  for (int i = 0; i < 200000 / static_cast<int>(lockstep_elem_test::kScaleDown); ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const float x = float_of(static_cast<std::uint32_t>(s >> 32));
    if (std::isnan(x)) continue;
    EXPECT_TRUE(Same(ln::tanh(-x), -ln::tanh(x))) << le::hexf(x);
    EXPECT_TRUE(Same(ln::sin(-x), -ln::sin(x))) << le::hexf(x);
    EXPECT_TRUE(Same(ln::cos(-x), ln::cos(x))) << le::hexf(x);
    const ln::SinCos sc = ln::sincos(x);
    EXPECT_TRUE(Same(sc.sin, ln::sin(x)) && Same(sc.cos, ln::cos(x))) << le::hexf(x);
    ++n;
  }
  std::printf("[elementary] symmetries (tanh odd, sin odd, cos even, sincos = sin, cos): %d inputs\n", n);
}

// Monotone functions stay monotone on runs of consecutive floats placed where
// the algorithm switches (reduction boundaries, thresholds, binade edges).
// (bench/ulp checks every pair of neighbouring floats.)
TEST(ElementarySpecial, MonotoneOnDenseRuns) {
  const double ln2 = 0.6931471805599453;
  struct Run {
    le::Fn fn;
    float center;
  };
  std::vector<Run> runs;
  for (int k = -150; k <= 127; k += 7) runs.push_back({le::Fn::exp, static_cast<float>((k + 0.5) * ln2)});
  for (int k = -150; k <= 127; k += 7) runs.push_back({le::Fn::exp2, static_cast<float>(k + 0.5)});
  for (int k = -25; k <= 127; k += 5) runs.push_back({le::Fn::expm1, static_cast<float>((k + 0.5) * ln2)});
  for (float c : {-17.5f, -17.33f, 0x1p-25f, -0x1p-25f, 88.72f}) runs.push_back({le::Fn::expm1, c});
  for (float c : {89.0f, 88.72f, -104.0f, -103.97f, -87.33f}) runs.push_back({le::Fn::exp, c});
  for (int e = -149; e <= 127; e += 9) {
    runs.push_back({le::Fn::log, std::ldexp(1.0f, e)});
    runs.push_back({le::Fn::log, std::ldexp(1.41421356f, e)});
    runs.push_back({le::Fn::log2, std::ldexp(1.41421356f, e)});
    runs.push_back({le::Fn::rsqrt, std::ldexp(1.0f, e)});
  }
  for (float c : {1.0f, -0.5f, 0x1p-25f, -0x1p-25f, 0.41421356f, -0.29289322f, 1e30f})
    runs.push_back({le::Fn::log1p, c});
  for (float c : {0x1p-13f, -0x1p-13f, 0.1733f, -0.1733f, 0.5f, 9.0109f, 10.0f})
    runs.push_back({le::Fn::tanh, c});
  for (float c : {-40.0f, -0.3466f, 0.3466f, 0.0f, 17.33f, 20.0f, -87.33f, -103.97f})
    runs.push_back({le::Fn::sigmoid, c});
  int n = 0;
  for (const Run& r : runs) {
    const int dir = r.fn == le::Fn::rsqrt ? -1 : 1;
    float x = r.center;
    for (int i = 0; i < 1000; ++i) x = next_down(x);
    float prev = le::eval(r.fn, x);
    for (int i = 0; i < 2000; ++i) {
      const float xn = next_up(x);
      const float y = le::eval(r.fn, xn);
      // rsqrt's domain starts at +0 (rsqrt(-0) = -inf): compare only positive pairs.
      const bool in_domain = r.fn != le::Fn::rsqrt || x > 0.0f || bits_of(x) == 0u;
      const bool ok = !in_domain || (dir > 0 ? !(y < prev) : !(y > prev));
      EXPECT_TRUE(ok) << le::spec(r.fn).name << " not monotone between " << le::hexf(x) << " and " << le::hexf(xn)
                      << ": " << le::hexf(prev) << " then " << le::hexf(y);
      prev = y;
      x = xn;
      ++n;
    }
  }
  std::printf("[elementary] monotonicity: %zu runs, %d neighbouring pairs\n", runs.size(), n);
}

// The ulp-error measure on hand-computed cases.
TEST(ElementaryMeasure, UlpDefinition) {
  EXPECT_EQ(le::ulp_of(1.0), 0x1p-23);
  EXPECT_EQ(le::ulp_of(0.75), 0x1p-24);
  EXPECT_EQ(le::ulp_of(-3.0), 0x1p-22);
  EXPECT_EQ(le::ulp_of(0x1p-126), 0x1p-149);
  EXPECT_EQ(le::ulp_of(0x1.fp-127), 0x1p-149);  // subnormal grid
  EXPECT_EQ(le::ulp_of(0.0), 0x1p-149);
  EXPECT_EQ(le::ulp_of(0x1p200), 0x1p104);  // beyond the largest binade
  EXPECT_EQ(le::ulp_error(1.0f, 1.0), 0.0);
  EXPECT_EQ(le::ulp_error(next_up(1.0f), 1.0), 1.0);
  EXPECT_EQ(le::ulp_error(next_down(1.0f), 1.0), 0.5);  // below 1 the grid is finer
  EXPECT_EQ(le::ulp_error(1.0f, 1.0 + 0x1p-24), 0.5);
  EXPECT_EQ(le::ulp_error(0x1p-149f, 0.0), 1.0);
  EXPECT_EQ(le::ulp_error(0.0f, 0x1p-150), 0.5);
  const double big = 3.5e38;  // beyond FLT_MAX + ulp/2: rounds to inf
  EXPECT_EQ(le::ulp_error(kInf, big), 0.0);
  EXPECT_EQ(le::ulp_error(-kInf, big), std::fabs(-0x1p128 - big) / 0x1p104);
  EXPECT_EQ(le::ulp_error(kInf, 0x1.fffffep127), 1.0);  // inf counts as 2^128
  EXPECT_TRUE(std::isinf(le::ulp_error(1.0f, std::nan(""))));
  EXPECT_TRUE(std::isinf(le::ulp_error(std::nanf(""), 1.0)));
  EXPECT_EQ(le::ulp_error(std::nanf(""), std::nan("")), 0.0);
  EXPECT_EQ(le::ulp_error(-kInf, -HUGE_VAL), 0.0);
  EXPECT_TRUE(std::isinf(le::ulp_error(-3e38f, -HUGE_VAL)));
  EXPECT_TRUE(le::near_midpoint(1.0 + 0x1p-24));
  EXPECT_TRUE(le::near_midpoint(1.0 + 0x1p-24 - 0x1p-50));
  EXPECT_FALSE(le::near_midpoint(1.0 + 0x1p-24 - 0x1p-40));
  EXPECT_FALSE(le::near_midpoint(1.0));
}

}  // namespace
