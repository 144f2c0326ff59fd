// The 16-bit float conversions (src/lockstep/tensor/convert.hpp) against
// references that share no code with them:
//   * f16: the compiler's _Float16 (GCC: the CPU's F16C/AVX512-FP16 conversion
//     instructions under -march=native, libgcc's soft-float routines otherwise);
//     and the exact value m * 2^(e - 25) computed with std::ldexp in double;
//   * bf16: nearest-of-two-neighbours by distance in double (the two bf16
//     values around x, the distances compared exactly, ties to the even pattern);
//   * both: numpy's float16 and ml_dtypes' bfloat16 (convert_cross_check.py,
//     in tensor_numpy_test.cpp).
// Every 16-bit pattern is checked both ways, and every midpoint between two
// neighbouring 16-bit values (the ties) and its binary32 neighbours; then
// random binary32 values, seeded from $LOCKSTEP_SEED or the clock (printed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

#include "lockstep/ad/rng.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/tensor/convert.hpp"

#include "../common/test_seed.hpp"

namespace t = lockstep::tensor;
using lockstep::num::bits_of;
using lockstep::num::float_of;
using lockstep::test::test_seed;

namespace {

bool f16_is_nan(std::uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }
bool bf16_is_nan(std::uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }
bool f32_is_nan(std::uint32_t x) { return (x & 0x7fffffffu) > 0x7f800000u; }

// The exact value of a binary16 pattern, in double, from its fields.
double f16_exact(std::uint16_t h) {
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  const double sign = (h & 0x8000u) ? -1.0 : 1.0;
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(m + 1024, e - 25);
}

// bf16 of a binary32 pattern by distance: lo = x with the low 16 bits cleared
// (the neighbour toward zero), hi = the next bf16 away from zero (its value
// 2^128 when it is the Inf pattern, as IEEE's unbounded-exponent rounding has
// it). Doubles hold both neighbours, x and the two differences exactly.
std::uint16_t bf16_by_distance(std::uint32_t x) {
  if (f32_is_nan(x)) return t::kBf16CanonicalNaN;
  const std::uint16_t lo = static_cast<std::uint16_t>(x >> 16);
  if ((x & 0xffffu) == 0) return lo;
  const std::uint16_t hi = static_cast<std::uint16_t>(lo + 1);
  auto value = [](std::uint16_t h) {
    if ((h & 0x7fffu) == 0x7f80u) return (h & 0x8000u) ? -0x1p128 : 0x1p128;
    return static_cast<double>(float_of(static_cast<std::uint32_t>(h) << 16));
  };
  const double v = static_cast<double>(float_of(x));
  const double dlo = std::fabs(v - value(lo)), dhi = std::fabs(value(hi) - v);
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1u) ? hi : lo;
}

#if defined(__FLT16_MAX__)
std::uint16_t f16_by_compiler(float x) {
  volatile float in = x;  // the conversion happens at run time, in the CPU's (or libgcc's) code
  const _Float16 h = static_cast<_Float16>(in);
  std::uint16_t b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}
std::uint32_t f32_from_f16_by_compiler(std::uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, sizeof h);
  volatile _Float16 in = h;
  return bits_of(static_cast<float>(in));
}
#endif

// Our f16 rounding against the compiler's; NaN: ours is canonical, theirs any NaN.
::testing::AssertionResult f16_agrees(std::uint32_t x) {
#if defined(__FLT16_MAX__)
  const std::uint16_t ours = t::f16_from_f32_bits(x), theirs = f16_by_compiler(float_of(x));
  if (f32_is_nan(x) ? (ours == t::kF16CanonicalNaN && f16_is_nan(theirs)) : ours == theirs)
    return ::testing::AssertionSuccess();
  char buf[160];
  std::snprintf(buf, sizeof buf, "f32 %08x (%.9g): lockstep f16 %04x, _Float16 %04x", x,
                static_cast<double>(float_of(x)), ours, theirs);
  return ::testing::AssertionFailure() << buf;
#else
  static const bool noted =
      (std::printf("no _Float16 in this compiler: f16 is checked against ldexp and numpy only\n"), true);
  (void)noted;
  (void)x;
  return ::testing::AssertionSuccess();
#endif
}

::testing::AssertionResult bf16_agrees(std::uint32_t x) {
  const std::uint16_t ours = t::bf16_from_f32_bits(x), ref = bf16_by_distance(x);
  if (ours == ref) return ::testing::AssertionSuccess();
  char buf[160];
  std::snprintf(buf, sizeof buf, "f32 %08x (%.9g): lockstep bf16 %04x, nearest-even by distance %04x", x,
                static_cast<double>(float_of(x)), ours, ref);
  return ::testing::AssertionFailure() << buf;
}

}  // namespace

// Every binary16 pattern widens to its exact value (= the compiler's widening),
// and narrows back to itself; NaNs become the canonical NaN both ways.
TEST(TensorConvert, EveryF16PatternRoundTrips) {
  int nan_patterns = 0;
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const std::uint32_t w = t::f32_bits_from_f16(h);
    if (f16_is_nan(h)) {
      ++nan_patterns;
      ASSERT_EQ(w, t::kF32CanonicalNaN) << std::hex << i;
      ASSERT_EQ(t::f16_from_f32_bits(w), t::kF16CanonicalNaN) << std::hex << i;
      continue;
    }
    const double exact = f16_exact(h);
    ASSERT_EQ(static_cast<double>(float_of(w)), exact) << std::hex << i;
    ASSERT_EQ(w >> 31, static_cast<std::uint32_t>(h >> 15)) << "sign of " << std::hex << i;  // -0 stays -0
#if defined(__FLT16_MAX__)
    ASSERT_EQ(w, f32_from_f16_by_compiler(h)) << std::hex << i;
#endif
    ASSERT_EQ(t::f16_from_f32_bits(w), h) << std::hex << i;
  }
  EXPECT_EQ(nan_patterns, 2 * 1023);
}

TEST(TensorConvert, EveryBf16PatternRoundTrips) {
  int nan_patterns = 0;
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const std::uint32_t w = t::f32_bits_from_bf16(h);
    if (bf16_is_nan(h)) {
      ++nan_patterns;
      ASSERT_EQ(w, t::kF32CanonicalNaN) << std::hex << i;
      ASSERT_EQ(t::bf16_from_f32_bits(w), t::kBf16CanonicalNaN) << std::hex << i;
      continue;
    }
    ASSERT_EQ(w, i << 16) << std::hex << i;  // bf16 is binary32's upper half: exact
    ASSERT_EQ(t::bf16_from_f32_bits(w), h) << std::hex << i;
  }
  EXPECT_EQ(nan_patterns, 2 * 127);
}

// The ties: for every pair of neighbouring finite 16-bit values of one sign,
// the binary32 midpoint between them (exact: it needs 12 significant bits for
// f16, 9 for bf16) rounds to the one with the even pattern, and the binary32
// values just below and above it round to the nearer. The pairs include
// 0 / the smallest subnormal, the subnormal / normal boundary and, for the
// largest finite value, the overflow threshold (its upper neighbour is Inf).
TEST(TensorConvert, EveryMidpointRoundsToEvenAndItsNeighboursToTheNearer) {
  std::size_t ties = 0;
  for (std::uint32_t sign : {0u, 0x8000u}) {
    for (std::uint32_t m = 0; m < 0x7c00u; ++m) {  // f16: m and m + 1 (0x7c00 = Inf)
      const auto lo = static_cast<std::uint16_t>(sign | m), hi = static_cast<std::uint16_t>(sign | (m + 1));
      const double mid = (f16_exact(lo) + (m + 1 == 0x7c00u ? (sign ? -65536.0 : 65536.0) : f16_exact(hi))) / 2;
      const float midf = static_cast<float>(mid);
      ASSERT_EQ(static_cast<double>(midf), mid) << "f16 midpoint not exact in f32";
      const std::uint32_t x = bits_of(midf);
      const std::uint16_t even = (lo & 1u) ? hi : lo;
      ASSERT_EQ(t::f16_from_f32_bits(x), even) << std::hex << "f16 tie " << lo << "/" << hi;
      ASSERT_EQ(t::f16_from_f32_bits(x - 1), lo) << std::hex << "below the f16 tie " << lo << "/" << hi;
      ASSERT_EQ(t::f16_from_f32_bits(x + 1), hi) << std::hex << "above the f16 tie " << lo << "/" << hi;
      ASSERT_TRUE(f16_agrees(x));
      ASSERT_TRUE(f16_agrees(x - 1));
      ASSERT_TRUE(f16_agrees(x + 1));
      ++ties;
    }
    for (std::uint32_t m = 0; m < 0x7f80u; ++m) {  // bf16: m and m + 1 (0x7f80 = Inf)
      const std::uint32_t x = ((sign | m) << 16) | 0x8000u;  // the midpoint, exact in f32
      const auto lo = static_cast<std::uint16_t>(sign | m), hi = static_cast<std::uint16_t>(sign | (m + 1));
      const std::uint16_t even = (lo & 1u) ? hi : lo;
      ASSERT_EQ(t::bf16_from_f32_bits(x), even) << std::hex << "bf16 tie " << lo << "/" << hi;
      ASSERT_EQ(t::bf16_from_f32_bits(x - 1), lo) << std::hex << "below the bf16 tie " << lo << "/" << hi;
      ASSERT_EQ(t::bf16_from_f32_bits(x + 1), hi) << std::hex << "above the bf16 tie " << lo << "/" << hi;
      ASSERT_TRUE(bf16_agrees(x));
      ++ties;
    }
  }
  EXPECT_EQ(ties, 2u * (0x7c00u + 0x7f80u));
}

TEST(TensorConvert, EdgeCases) {
  struct Case {
    float x;
    std::uint16_t f16, bf16;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const Case cases[] = {
      {0.0f, 0x0000, 0x0000},
      {-0.0f, 0x8000, 0x8000},
      {1.0f, 0x3c00, 0x3f80},
      {-2.0f, 0xc000, 0xc000},
      {inf, 0x7c00, 0x7f80},
      {-inf, 0xfc00, 0xff80},
      {65504.0f, 0x7bff, 0x4780},     // f16 max; bf16: 65504 = 2^16 - 32 rounds to 65536 (0x4780)
      {65519.996f, 0x7bff, 0x4780},   // just below f16's overflow threshold
      {65520.0f, 0x7c00, 0x4780},     // the threshold: a tie to the even neighbour 2^16, i.e. Inf
      {-65520.0f, 0xfc00, 0xc780},
      {0x1p-14f, 0x0400, 0x3880},     // smallest normal f16
      {0x1p-24f, 0x0001, 0x3380},     // smallest subnormal f16
      {0x1p-25f, 0x0000, 0x3300},     // half of it: a tie, to the even 0
      {0x1.000002p-25f, 0x0001, 0x3300},  // just above: up to the smallest subnormal
      {0x1.8p-24f, 0x0002, 0x33c0},   // 1.5 units: a tie, to the even 2
      {0x1p-149f, 0x0000, 0x0000},    // binary32's smallest subnormal: 0 in f16, itself (rounded) in bf16
      {0x1p-133f, 0x0000, 0x0001},    // binary32 subnormal = bf16's smallest subnormal
      {std::numeric_limits<float>::max(), 0x7c00, 0x7f80},  // bf16 overflow to Inf
      {0x1.fep127f, 0x7c00, 0x7f7f},  // bf16 max
      {1.00390625f, 0x3c04, 0x3f80},  // bf16 tie (1 + 2^-8) to the even 1.0
      {1.01171875f, 0x3c0c, 0x3f82},  // bf16 tie (1 + 3·2^-8) to the even 1 + 2^-6
  };
  for (const Case& c : cases) {
    EXPECT_EQ(t::f32_to_f16(c.x), c.f16) << std::hexfloat << c.x;
    EXPECT_EQ(t::f32_to_bf16(c.x), c.bf16) << std::hexfloat << c.x;
    EXPECT_TRUE(f16_agrees(bits_of(c.x)));
    EXPECT_TRUE(bf16_agrees(bits_of(c.x)));
  }
  // Every NaN (both signs, quiet and signalling, any payload) gives the canonical NaN.
  for (std::uint32_t x : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0xffffffffu, 0x7fa00000u,
                          0x7f802000u}) {
    EXPECT_EQ(t::f16_from_f32_bits(x), t::kF16CanonicalNaN) << std::hex << x;
    EXPECT_EQ(t::bf16_from_f32_bits(x), t::kBf16CanonicalNaN) << std::hex << x;
    EXPECT_TRUE(f16_agrees(x));
  }
  // The constexpr forms are the same functions (usable in device code and constants).
  static_assert(t::f16_from_f32_bits(0x3f800000u) == 0x3c00);
  static_assert(t::bf16_from_f32_bits(0x3f808000u) == 0x3f80);
  static_assert(t::f32_bits_from_f16(0x0001) == 0x33800000u);
}

// 10^6 binary32 patterns drawn uniformly over all 2^32 (NaN, Inf, subnormals
// and overflow included), and 10^6 drawn with exponents in f16's range and
// around it (2^-27 .. 2^17), where most of f16's rounding happens.
TEST(TensorConvert, RandomFloatsAgreeWithTheReferences) {
  lockstep::ad::Rng rng(lockstep::ad::derive_seed(test_seed(), "TensorConvert.Random", 0));
  for (int i = 0; i < 1'000'000; ++i) {
    const auto x = static_cast<std::uint32_t>(rng.next());
    ASSERT_TRUE(f16_agrees(x));
    ASSERT_TRUE(bf16_agrees(x));
  }
  for (int i = 0; i < 1'000'000; ++i) {
    const std::uint64_t r = rng.next();
    const std::uint32_t exponent = 100 + static_cast<std::uint32_t>((r >> 32) % 45);  // biased 100 .. 144
    const std::uint32_t x = (static_cast<std::uint32_t>(r >> 63) << 31) | (exponent << 23) |
                            (static_cast<std::uint32_t>(r) & 0x7fffffu);
    ASSERT_TRUE(f16_agrees(x));
    ASSERT_TRUE(bf16_agrees(x));
  }
}
