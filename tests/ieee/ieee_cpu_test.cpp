// The oracle against the CPU's own arithmetic (test (a) of the oracle issue):
// >= 10^6 inputs per operation, spread over the regimes of ieee_check.cpp, with
// zero disagreements; plus exhaustive slices where a whole range is cheap.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

#include "ieee_test_util.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/ieee.hpp"
#include "lockstep/num/ieee_check.hpp"

namespace ieee = lockstep::num::ieee;
namespace check = lockstep::num::ieee::check;
using lockstep::num::bits_of;
using lockstep::num::float_of;
using lockstep_ieee_test::kCasesPerOp;
using lockstep_ieee_test::kScale;
using lockstep_ieee_test::test_seed;

namespace {

TEST(IeeeCpu, FloatingPointEnvironmentIsTheContracts) {
  const std::string problem = check::cpu_environment_problem();
  std::printf("[ieee] cpu fp environment: %s\n", problem.empty() ? "round to nearest, no FTZ/DAZ" : problem.c_str());
  EXPECT_TRUE(problem.empty()) << problem;
}

class IeeeCpuOp : public ::testing::TestWithParam<check::Op> {};

TEST_P(IeeeCpuOp, AgreesWithTheCpuOnEveryInput) {
  const check::Op op = GetParam();
  const check::CheckStats s = check::check_op(op, check::Reference::cpu, kCasesPerOp, test_seed());
  std::printf("[ieee] %s\n", check::summary(s).c_str());
  EXPECT_EQ(s.cases, kCasesPerOp);
  EXPECT_EQ(s.mismatches, 0u) << s.first_mismatch;
  // Every regime was exercised with its share of the cases.
  for (const check::RegimeStats& g : s.regimes) EXPECT_GE(g.cases, kCasesPerOp / s.regimes.size()) << g.name;
}

std::string op_test_name(const ::testing::TestParamInfo<check::Op>& info) {
  std::string name = check::op_name(info.param);
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(AllOps, IeeeCpuOp, ::testing::ValuesIn(check::all_ops()), op_test_name);

// Every float in [1, 4): all 2^23 significands with both exponent parities, the
// two branches of the square root's exponent halving.
TEST(IeeeCpu, SqrtExhaustiveOnOneToFour) {
  std::uint64_t cases = 0, mismatches = 0;
  for (std::uint32_t x = 0x3f800000u; x < 0x40800000u; x += static_cast<std::uint32_t>(kScale)) {
    ++cases;
    if (!ieee::same_value(ieee::sqrt(x), bits_of(std::sqrt(float_of(x))))) ++mismatches;
  }
  std::printf("[ieee] sqrt exhaustive on [1,4) (stride %llu): %llu cases, %llu mismatches\n",
              static_cast<unsigned long long>(kScale), static_cast<unsigned long long>(cases), static_cast<unsigned long long>(mismatches));
  EXPECT_EQ(mismatches, 0u);
}

// Every int32 in +-[2^24 - 2^16, 2^26 + 2^16]: the first three binades where
// int -> float rounds, with every halfway case in them.
TEST(IeeeCpu, IntToFloatExhaustiveAroundTwoToTheTwentyFour) {
  std::uint64_t cases = 0, mismatches = 0;
  const std::int32_t lo = (1 << 24) - (1 << 16), hi = (1 << 26) + (1 << 16);
  for (std::int32_t v = lo; v <= hi; v += static_cast<std::int32_t>(kScale)) {
    for (const std::int32_t x : {v, -v}) {
      ++cases;
      if (ieee::from_i32(x) != bits_of(static_cast<float>(x))) ++mismatches;
    }
  }
  std::printf("[ieee] i32->f32 exhaustive on +-[2^24-2^16, 2^26+2^16] (stride %llu): %llu cases, %llu mismatches\n",
              static_cast<unsigned long long>(kScale), static_cast<unsigned long long>(cases), static_cast<unsigned long long>(mismatches));
  EXPECT_EQ(mismatches, 0u);
}

// rint/floor/ceil/trunc on every float with |x| in [0.5, 4) and in [2^22, 2^24):
// where |x| < 1 rounds to 0 or 1, and where the last fraction bits disappear.
TEST(IeeeCpu, RoundToIntegralExhaustiveSlices) {
  std::uint64_t cases = 0, mismatches = 0;
  const std::uint32_t ranges[][2] = {{0x3f000000u, 0x40800000u}, {0x4a800000u, 0x4b800000u}};
  for (const auto& r : ranges) {
    for (std::uint32_t m = r[0]; m < r[1]; m += static_cast<std::uint32_t>(kScale)) {
      for (const std::uint32_t x : {m, m | 0x80000000u}) {
        const float v = float_of(x);
        cases += 4;
        mismatches += ieee::rint(x) != bits_of(std::nearbyint(v));
        mismatches += ieee::floor(x) != bits_of(std::floor(v));
        mismatches += ieee::ceil(x) != bits_of(std::ceil(v));
        mismatches += ieee::trunc(x) != bits_of(std::trunc(v));
      }
    }
  }
  std::printf("[ieee] rint/floor/ceil/trunc exhaustive slices (stride %llu): %llu cases, %llu mismatches\n",
              static_cast<unsigned long long>(kScale), static_cast<unsigned long long>(cases), static_cast<unsigned long long>(mismatches));
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
