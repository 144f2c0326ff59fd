// Known answers for the binary32 oracle: each IEEE rule and each lockstep
// convention (docs/NUMERICS.md, "The IEEE-754 binary32 oracle") written out
// once, with the value worked by hand in the comment.
#include <gtest/gtest.h>

#include <cctype>
#include <climits>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "lockstep/num/fp.hpp"
#include "lockstep/num/ieee.hpp"

namespace ieee = lockstep::num::ieee;
using ieee::bits32;
using lockstep::num::bits_of;

namespace {

constexpr bits32 kOne = 0x3f800000u;           // 1.0
constexpr bits32 kNegZero = 0x80000000u;       // -0
constexpr bits32 kInf = 0x7f800000u;           // +inf
constexpr bits32 kNegInf = 0xff800000u;        // -inf
constexpr bits32 kNaN = 0x7fc00000u;           // the canonical NaN
constexpr bits32 kSNaN = 0x7f800001u;          // a signalling NaN
constexpr bits32 kNegNaNPayload = 0xffc01234u; // a negative quiet NaN with a payload
constexpr bits32 kMinSub = 0x00000001u;        // 2^-149
constexpr bits32 kMaxSub = 0x007fffffu;        // (1 - 2^-23) * 2^-126
constexpr bits32 kMinNormal = 0x00800000u;     // 2^-126
constexpr bits32 kMax = 0x7f7fffffu;           // (2 - 2^-23) * 2^127
constexpr bits32 k2p24 = 0x4b800000u;          // 2^24
constexpr bits32 k2p31 = 0x4f000000u;          // 2^31

bits32 B(float x) { return bits_of(x); }
// (field, fraction) -> positive binary32
constexpr bits32 make(bits32 field, bits32 frac) { return (field << 23) | frac; }

// Each test prints how many answers it checked, so `ctest -V` shows the counts.
int g_checked = 0;
#define EXPECT_BITS(actual, expected)                                                       \
  do {                                                                                      \
    ++g_checked;                                                                            \
    EXPECT_EQ(static_cast<bits32>(actual), static_cast<bits32>(expected)) << #actual;       \
  } while (0)
#define EXPECT_INT(actual, expected)      \
  do {                                    \
    ++g_checked;                          \
    EXPECT_EQ((actual), (expected)) << #actual; \
  } while (0)

class IeeeUnit : public ::testing::Test {
 protected:
  void SetUp() override { g_checked = 0; }
  void TearDown() override {
    std::printf("[ieee] %s: %d known answers checked\n",
                ::testing::UnitTest::GetInstance()->current_test_info()->name(), g_checked);
  }
};

TEST_F(IeeeUnit, AddRoundsToNearestEven) {
  EXPECT_BITS(ieee::add(kOne, B(0x1p-24f)), kOne);                         // 1 + half ulp: tie, 1 is even
  EXPECT_BITS(ieee::add(B(1.0f + 0x1p-23f), B(0x1p-24f)), B(1.0f + 0x1p-22f));  // tie, odd rounds up
  EXPECT_BITS(ieee::add(kOne, B(0x1p-24f + 0x1p-47f)), B(1.0f + 0x1p-23f));     // just above the tie
  EXPECT_BITS(ieee::add(k2p24, kOne), k2p24);                              // 2^24 + 1: tie to even
  EXPECT_BITS(ieee::add(B(16777218.0f), kOne), B(16777220.0f));            // 2^24 + 3 -> +4 (even)
  EXPECT_BITS(ieee::add(kOne, B(0x1p-60f)), kOne);                         // far below: sticky only
  // Below 1 the spacing halves (2^-24): 1 - 2^-60 is above the midpoint 1 - 2^-25, so it
  // rounds back to 1; 1 - 2^-25 is that midpoint (tie: 1 is even); a hair below it is not.
  EXPECT_BITS(ieee::add(kOne, B(-0x1p-60f)), kOne);
  EXPECT_BITS(ieee::add(kOne, B(-0x1p-25f)), kOne);
  EXPECT_BITS(ieee::add(kOne, B(-0x1p-25f - 0x1p-48f)), 0x3f7fffffu);
  EXPECT_BITS(ieee::add(kMax, kMax), kInf);                                // overflow
  EXPECT_BITS(ieee::add(kMax, make(230, 0)), kInf);             // max + half ulp (2^103): tie, max is odd -> 2^128 = inf
  EXPECT_BITS(ieee::add(kMax, make(229, 0x7fffff)), kMax);      // max + just under half an ulp
  EXPECT_BITS(ieee::add(kMinSub, kMinSub), 0x00000002u);                   // subnormals add exactly
  EXPECT_BITS(ieee::add(kMinNormal, kMinSub | 0x80000000u), kMaxSub);      // gradual underflow
}

TEST_F(IeeeUnit, AddZerosInfinitiesNaN) {
  EXPECT_BITS(ieee::add(B(3.5f), B(-3.5f)), 0u);            // x + (-x) = +0
  EXPECT_BITS(ieee::add(kNegZero, kNegZero), kNegZero);     // (-0) + (-0) = -0
  EXPECT_BITS(ieee::add(kNegZero, 0u), 0u);                 // (-0) + (+0) = +0
  EXPECT_BITS(ieee::add(kNegZero, B(2.0f)), B(2.0f));
  EXPECT_BITS(ieee::add(kInf, kNegInf), kNaN);              // inf - inf
  EXPECT_BITS(ieee::add(kInf, kMax), kInf);
  EXPECT_BITS(ieee::add(kSNaN, kOne), kNaN);                // any NaN in: the canonical NaN out
  EXPECT_BITS(ieee::add(kOne, kNegNaNPayload), kNaN);
  EXPECT_BITS(ieee::sub(B(2.0f), B(2.0f)), 0u);             // x - x = +0
  EXPECT_BITS(ieee::sub(kNegZero, 0u), kNegZero);           // (-0) - (+0) = -0
  EXPECT_BITS(ieee::sub(0u, 0u), 0u);
  EXPECT_BITS(ieee::sub(kInf, kInf), kNaN);
  EXPECT_BITS(ieee::sub(kOne, B(0x1p-25f)), kOne);          // 1 - 2^-25: tie between 1 - 2^-24 (odd) and 1
}

TEST_F(IeeeUnit, Mul) {
  EXPECT_BITS(ieee::mul(B(3.0f), B(0.5f)), B(1.5f));
  EXPECT_BITS(ieee::mul(B(0x1p-75f), B(0x1p-75f)), 0u);           // 2^-150: tie between 0 and 2^-149 -> 0
  EXPECT_BITS(ieee::mul(B(0x1p-75f), B(-0x1.8p-75f)), 0x80000001u);  // -0.75 * 2^-149 -> -2^-149
  EXPECT_BITS(ieee::mul(B(-1.0f), 0u), kNegZero);
  EXPECT_BITS(ieee::mul(kInf, 0u), kNaN);
  EXPECT_BITS(ieee::mul(kNegInf, B(-2.0f)), kInf);
  EXPECT_BITS(ieee::mul(kMax, B(2.0f)), kInf);
  EXPECT_BITS(ieee::mul(kMaxSub, B(2.0f)), 0x00fffffeu);           // subnormal * 2 becomes normal
  EXPECT_BITS(ieee::mul(B(1.0f + 0x1p-23f), B(1.0f + 0x1p-23f)), B(1.0f + 0x1p-22f));  // 1 + 2^-22 + 2^-46
}

TEST_F(IeeeUnit, FmaRoundsOnce) {
  // (1 + 2^-23)^2 = 1 + 2^-22 + 2^-46: the fma returns the product's rounding error exactly.
  const bits32 a = B(1.0f + 0x1p-23f);
  EXPECT_BITS(ieee::fma(a, a, B(-(1.0f + 0x1p-22f))), B(0x1p-46f));
  EXPECT_BITS(ieee::fma(B(2.0f), B(3.0f), B(-6.0f)), 0u);           // exact zero sum: +0
  EXPECT_BITS(ieee::fma(B(-2.0f), B(3.0f), B(6.0f)), 0u);
  EXPECT_BITS(ieee::fma(kNegZero, kOne, kNegZero), kNegZero);       // (-0) + (-0)
  EXPECT_BITS(ieee::fma(0u, kOne, kNegZero), 0u);                   // (+0) + (-0)
  EXPECT_BITS(ieee::fma(B(0x1p-100f), B(-0x1p-100f), 0u), kNegZero);  // tiny negative product rounds to -0
  EXPECT_BITS(ieee::fma(0u, kInf, kOne), kNaN);                     // 0 * inf
  EXPECT_BITS(ieee::fma(kInf, kOne, kNegInf), kNaN);                // inf - inf
  EXPECT_BITS(ieee::fma(kOne, kOne, kInf), kInf);
  EXPECT_BITS(ieee::fma(kMax, B(2.0f), B(-0x1p127f)), kInf);       // 2*max - 2^127 ~ 1.5 * 2^128: overflow
  EXPECT_BITS(ieee::fma(kMax, B(2.0f), kMax | 0x80000000u), kMax);  // 2*max - max: the product alone would overflow
  // The double-rounding trap: a*b = 2^-24 * (1 + 2^-23)(1 - 2^-23) = 2^-24 - 2^-70, c = 1 + 2^-23.
  // Exact: c + 2^-24 - 2^-70, just below the midpoint, so the answer is c. Rounding the sum to
  // double first gives c + 2^-24, a tie, which rounds to the even 1 + 2^-22: wrong.
  const bits32 x = 0x3f800001u, y = make(102, 0x7ffffe), c = 0x3f800001u;
  EXPECT_BITS(ieee::fma(x, y, c), c);
  const double twice = static_cast<double>(lockstep::num::float_of(x)) * static_cast<double>(lockstep::num::float_of(y)) +
                       static_cast<double>(lockstep::num::float_of(c));
  EXPECT_BITS(bits_of(static_cast<float>(twice)), 0x3f800002u);
}

TEST_F(IeeeUnit, DivAndSqrt) {
  EXPECT_BITS(ieee::div(kOne, B(3.0f)), 0x3eaaaaabu);       // 1/3 rounds up
  EXPECT_BITS(ieee::div(kOne, 0u), kInf);
  EXPECT_BITS(ieee::div(B(-1.0f), 0u), kNegInf);
  EXPECT_BITS(ieee::div(kOne, kNegZero), kNegInf);
  EXPECT_BITS(ieee::div(0u, 0u), kNaN);
  EXPECT_BITS(ieee::div(kInf, kNegInf), kNaN);
  EXPECT_BITS(ieee::div(kOne, kInf), 0u);
  EXPECT_BITS(ieee::div(kNegZero, B(5.0f)), kNegZero);
  EXPECT_BITS(ieee::div(kMinSub, B(2.0f)), 0u);             // 2^-150: tie to even (0)
  EXPECT_BITS(ieee::div(0x00000003u, B(2.0f)), 0x00000002u);  // 1.5 quanta: tie to even (2)
  EXPECT_BITS(ieee::div(kOne, kMax), 0x00200000u);          // 2^-128 * (1 + 2^-24 + ...) -> 2^-128
  EXPECT_BITS(ieee::sqrt(B(4.0f)), B(2.0f));
  EXPECT_BITS(ieee::sqrt(B(2.0f)), 0x3fb504f3u);
  EXPECT_BITS(ieee::sqrt(kNegZero), kNegZero);
  EXPECT_BITS(ieee::sqrt(B(-1.0f)), kNaN);
  EXPECT_BITS(ieee::sqrt(kNegInf), kNaN);
  EXPECT_BITS(ieee::sqrt(kInf), kInf);
  EXPECT_BITS(ieee::sqrt(kMinSub), 0x1a3504f3u);           // 2^-74.5 = sqrt(2) * 2^-75
  EXPECT_BITS(ieee::sqrt(0xffc00001u), kNaN);
}

TEST_F(IeeeUnit, IntToFloat) {
  EXPECT_BITS(ieee::from_i32(0), 0u);
  EXPECT_BITS(ieee::from_i32(-1), B(-1.0f));
  EXPECT_BITS(ieee::from_i32(16777217), k2p24);               // 2^24 + 1: tie to even
  EXPECT_BITS(ieee::from_i32(16777219), B(16777220.0f));      // 2^24 + 3: tie to even (up)
  EXPECT_BITS(ieee::from_i32(-16777217), k2p24 | 0x80000000u);
  EXPECT_BITS(ieee::from_i32(INT_MAX), k2p31);                // 2^31 - 1 rounds up to 2^31
  EXPECT_BITS(ieee::from_i32(INT_MIN), k2p31 | 0x80000000u);  // exact
  EXPECT_BITS(ieee::from_i32(2147483520), 0x4effffffu);       // 2^31 - 128: exact
  EXPECT_BITS(ieee::from_i32(2147483583), 0x4effffffu);       // below the midpoint 2^31 - 64
  EXPECT_BITS(ieee::from_i32(2147483584), k2p31);             // the midpoint: tie to even (2^31)
}

TEST_F(IeeeUnit, FloatToIntSaturates) {
  EXPECT_INT(ieee::to_i32_rne(B(2.5f)), 2);
  EXPECT_INT(ieee::to_i32_rne(B(3.5f)), 4);
  EXPECT_INT(ieee::to_i32_rne(B(-2.5f)), -2);
  EXPECT_INT(ieee::to_i32_rne(B(-2.5001f)), -3);
  EXPECT_INT(ieee::to_i32_rz(B(-2.7f)), -2);
  EXPECT_INT(ieee::to_i32_rz(B(0.999f)), 0);
  EXPECT_INT(ieee::to_i32_floor(B(-2.5f)), -3);
  EXPECT_INT(ieee::to_i32_floor(B(-0.5f)), -1);
  EXPECT_INT(ieee::to_i32_floor(kNegZero), 0);
  EXPECT_INT(ieee::to_i32_floor(B(-1e-45f)), -1);             // negative subnormal floors to -1
  EXPECT_INT(ieee::to_i32_rz(0x4effffffu), 2147483520);       // largest float below 2^31
  EXPECT_INT(ieee::to_i32_rz(k2p31 | 0x80000000u), INT_MIN);  // -2^31 is exact
  // Out of range and NaN: saturate, NaN -> 0 (CUDA's cvt; x86 would give INT_MIN for all).
  EXPECT_INT(ieee::to_i32_rne(k2p31), INT_MAX);
  EXPECT_INT(ieee::to_i32_rz(kInf), INT_MAX);
  EXPECT_INT(ieee::to_i32_floor(kNegInf), INT_MIN);
  EXPECT_INT(ieee::to_i32_rne(0xcf000001u), INT_MIN);         // -2^31 - 256
  EXPECT_INT(ieee::to_i32_rne(kNaN), 0);
  EXPECT_INT(ieee::to_i32_floor(kNegNaNPayload), 0);
}

TEST_F(IeeeUnit, RoundToIntegral) {
  EXPECT_BITS(ieee::floor(B(-0.5f)), B(-1.0f));
  EXPECT_BITS(ieee::ceil(B(-0.5f)), kNegZero);               // a zero result keeps the sign
  EXPECT_BITS(ieee::trunc(B(-0.7f)), kNegZero);
  EXPECT_BITS(ieee::rint(B(0.5f)), 0u);                      // ties to even
  EXPECT_BITS(ieee::rint(B(-0.5f)), kNegZero);
  EXPECT_BITS(ieee::rint(B(1.5f)), B(2.0f));
  EXPECT_BITS(ieee::rint(B(2.5f)), B(2.0f));
  EXPECT_BITS(ieee::rint(B(0.50000006f)), kOne);              // just above the tie
  EXPECT_BITS(ieee::rint(B(8388607.5f)), B(8388608.0f));      // largest tie: 2^23 - 0.5 -> 2^23
  EXPECT_BITS(ieee::floor(B(8388607.5f)), B(8388607.0f));
  EXPECT_BITS(ieee::floor(kMinSub), 0u);
  EXPECT_BITS(ieee::floor(kMinSub | 0x80000000u), B(-1.0f));
  EXPECT_BITS(ieee::ceil(kMinSub), kOne);
  EXPECT_BITS(ieee::floor(kNegZero), kNegZero);
  EXPECT_BITS(ieee::ceil(kNegInf), kNegInf);
  EXPECT_BITS(ieee::trunc(kMax), kMax);
  EXPECT_BITS(ieee::rint(kSNaN), kNaN);
}

TEST_F(IeeeUnit, Comparisons) {
  EXPECT_INT(ieee::eq(0u, kNegZero), true);                  // -0 == +0
  EXPECT_INT(ieee::lt(kNegZero, 0u), false);
  EXPECT_INT(ieee::le(kNegZero, 0u), true);
  EXPECT_INT(ieee::eq(kNaN, kNaN), false);                   // NaN is unordered
  EXPECT_INT(ieee::ne(kNaN, kNaN), true);
  EXPECT_INT(ieee::lt(kNaN, kOne), false);
  EXPECT_INT(ieee::le(kOne, kNegNaNPayload), false);
  EXPECT_INT(ieee::gt(kOne, kNaN), false);
  EXPECT_INT(ieee::lt(kNegInf, kMax | 0x80000000u), true);
  EXPECT_INT(ieee::lt(B(-1.0f), kMinSub | 0x80000000u), true);
  EXPECT_INT(ieee::lt(kMinSub | 0x80000000u, kMinSub), true);
  EXPECT_INT(ieee::ge(kInf, kInf), true);
}

TEST_F(IeeeUnit, MinMax) {
  EXPECT_BITS(ieee::min(0u, kNegZero), kNegZero);            // -0 < +0, either order
  EXPECT_BITS(ieee::min(kNegZero, 0u), kNegZero);
  EXPECT_BITS(ieee::max(kNegZero, 0u), 0u);
  EXPECT_BITS(ieee::max(0u, kNegZero), 0u);
  EXPECT_BITS(ieee::max(kNegZero, kNegZero), kNegZero);
  EXPECT_BITS(ieee::min(kNaN, kOne), kNaN);                  // NaN propagates
  EXPECT_BITS(ieee::max(kOne, kSNaN), kNaN);
  EXPECT_BITS(ieee::min(kNegInf, B(3.0f)), kNegInf);
  EXPECT_BITS(ieee::max(kMinSub, 0u), kMinSub);
  EXPECT_BITS(ieee::max(B(-2.0f), B(-3.0f)), B(-2.0f));
}

TEST_F(IeeeUnit, SameValueIgnoresNaNBitsButNotZeroSigns) {
  EXPECT_INT(ieee::same_value(0x7fc00000u, 0xffc00000u), true);   // x86's NaN
  EXPECT_INT(ieee::same_value(0x7fc00000u, 0x7fffffffu), true);   // CUDA's NaN
  EXPECT_INT(ieee::same_value(0u, kNegZero), false);
  EXPECT_INT(ieee::same_value(kInf, kNaN), false);
}

// "No float operation anywhere inside the oracle": ieee.cpp and ieee.hpp must not
// name a floating-point type, call a floating-point builtin, or include a
// floating-point header (comments excluded).
TEST_F(IeeeUnit, OracleSourceUsesNoFloatingPoint) {
  const std::set<std::string> forbidden = {"float", "double", "_Float16", "_Float32", "_Float64", "_Float128",
                                           "cmath", "math", "cfenv", "fenv", "__builtin_fma", "__builtin_fmaf",
                                           "__builtin_sqrt", "__builtin_sqrtf"};
  for (const char* file : {"/src/lockstep/num/ieee.cpp", "/src/lockstep/num/ieee.hpp"}) {
    std::ifstream in(std::string(LOCKSTEP_SOURCE_DIR) + file);
    ASSERT_TRUE(in.good()) << file;
    std::string line, found;
    int identifiers = 0;
    while (std::getline(in, line)) {
      line = line.substr(0, line.find("//"));  // drop // comments
      for (std::size_t i = 0; i < line.size();) {  // split into identifiers
        if (std::isalpha(static_cast<unsigned char>(line[i])) == 0 && line[i] != '_') {
          ++i;
          continue;
        }
        std::size_t j = i;
        while (j < line.size() && (std::isalnum(static_cast<unsigned char>(line[j])) != 0 || line[j] == '_')) ++j;
        const std::string word = line.substr(i, j - i);
        ++identifiers;
        if (forbidden.count(word) != 0 && found.empty()) found = word + " in: " + line;
        i = j;
      }
    }
    std::printf("[ieee] %s: %d identifiers scanned\n", file, identifiers);
    ++g_checked;
    EXPECT_GT(identifiers, 100) << file;  // the scan really read the file
    EXPECT_TRUE(found.empty()) << file << " uses " << found;
  }
}

}  // namespace
