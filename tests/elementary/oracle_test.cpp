// Bit-determinism (test (2), last item, of the elementary-functions issue): the
// functions are templates over an arithmetic policy, so the same expression can
// be evaluated with every rounded primitive computed by the integer IEEE oracle
// (num/ieee.hpp) instead of the hardware. Identical bits on every sampled input
// show that each function is a fixed sequence of IEEE primitives — what any
// other IEEE device (a GPU under the contract's flags) computes too.
// Teeth: the comparison notices a wrong oracle (ties away, flush-to-zero, lost
// sticky bit) and an fma that is not fused.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "lockstep/num/elementary.hpp"
#include "lockstep/num/elementary_ref.hpp"
#include "test_util.hpp"

namespace ln = lockstep::num;
namespace le = lockstep::num::elem;
namespace ieee = lockstep::num::ieee;
using lockstep_elem_test::kOracleCases;
using lockstep_elem_test::test_seed;

namespace {

std::string fn_name(const ::testing::TestParamInfo<le::FnSpec>& info) { return info.param.name; }

class ElementaryOracle : public ::testing::TestWithParam<le::FnSpec> {};

TEST_P(ElementaryOracle, HardwareAndOracleComputeTheSameBits) {
  const le::FnSpec s = GetParam();
  const le::Sample smp = le::sample_inputs(s.fn, kOracleCases, test_seed());
  const le::BitCheck c = le::compare_with_oracle(s.fn, smp);
  std::printf("[elementary] %-7s hardware vs num::ieee oracle: %llu cases, %llu differ\n", s.name,
              static_cast<unsigned long long>(c.cases), static_cast<unsigned long long>(c.differing));
  EXPECT_EQ(c.cases, kOracleCases);
  EXPECT_EQ(c.differing, 0u) << "first at x=" << le::hexf(c.first_x) << " y=" << le::hexf(c.first_y)
                             << ": hardware " << le::hexf(c.first_hw) << ", oracle " << le::hexf(c.first_oracle);
}

INSTANTIATE_TEST_SUITE_P(All, ElementaryOracle, ::testing::ValuesIn(le::all_fns().begin(), le::all_fns().end()),
                         fn_name);

// Each flawed oracle changes the bits of some function on the samples (random
// ones, and the tie-prone few-bit inputs that make a ties-away flaw visible).
TEST(ElementaryOracleTeeth, FlawedOracleIsNoticed) {
  const std::uint64_t seed = test_seed() + 1;
  for (ieee::Flaw flaw : {ieee::Flaw::ties_away, ieee::Flaw::flush_subnormals, ieee::Flaw::no_sticky}) {
    std::uint64_t cases = 0, differing = 0;
    std::printf("[elementary] oracle mutant %-16s differing per function (random + few-bit inputs):",
                ieee::flaw_name(flaw));
    for (const le::FnSpec& s : le::all_fns()) {
      const le::BitCheck a = le::compare_with_oracle(s.fn, le::sample_inputs(s.fn, kOracleCases / 4, seed), flaw);
      const le::BitCheck b = le::compare_with_oracle(s.fn, le::tie_prone_inputs(s.fn), flaw);
      cases += a.cases + b.cases;
      differing += a.differing + b.differing;
      std::printf(" %s %llu+%llu", s.name, static_cast<unsigned long long>(a.differing),
                  static_cast<unsigned long long>(b.differing));
    }
    std::printf("; total %llu cases, %llu differ\n", static_cast<unsigned long long>(cases),
                static_cast<unsigned long long>(differing));
    EXPECT_GT(differing, 0u) << ieee::flaw_name(flaw);
  }
}

// An "fma" computed as a rounded product then a rounded sum (a device without
// a fused multiply-add, or a compiler that splits one) is noticed too.
struct UnfusedArith : ln::HwArith {
  static float fma(float a, float b, float c) { return a * b + c; }  // two roundings (-ffp-contract=off)
};

TEST(ElementaryOracleTeeth, UnfusedFmaIsNoticed) {
  std::uint64_t cases = 0, differing = 0;
  for (const le::FnSpec& s : le::all_fns()) {
    if (s.fn == le::Fn::rsqrt) continue;  // uses no fma
    const le::Sample smp = le::sample_inputs(s.fn, kOracleCases / 4, test_seed() + 2);
    std::uint64_t d = 0;
    for (std::size_t i = 0; i < smp.x.size(); ++i) {
      const float x = smp.x[i], y = smp.y[i];
      float u = 0.0f;
      switch (s.fn) {
        case le::Fn::exp: u = ln::exp<UnfusedArith>(x); break;
        case le::Fn::exp2: u = ln::exp2<UnfusedArith>(x); break;
        case le::Fn::expm1: u = ln::expm1<UnfusedArith>(x); break;
        case le::Fn::log: u = ln::log<UnfusedArith>(x); break;
        case le::Fn::log2: u = ln::log2<UnfusedArith>(x); break;
        case le::Fn::log1p: u = ln::log1p<UnfusedArith>(x); break;
        case le::Fn::tanh: u = ln::tanh<UnfusedArith>(x); break;
        case le::Fn::sigmoid: u = ln::sigmoid<UnfusedArith>(x); break;
        case le::Fn::sin: u = ln::sin<UnfusedArith>(x); break;
        case le::Fn::cos: u = ln::cos<UnfusedArith>(x); break;
        case le::Fn::rsqrt: u = ln::rsqrt<UnfusedArith>(x); break;
        case le::Fn::pow: u = ln::pow<UnfusedArith>(x, y); break;
      }
      if (!le::same_result(u, le::eval(s.fn, x, y))) ++d;
    }
    std::printf("[elementary] unfused fma, %-7s: %zu cases, %llu differ\n", s.name, smp.x.size(),
                static_cast<unsigned long long>(d));
    EXPECT_GT(d, 0u) << s.name;
    cases += smp.x.size();
    differing += d;
  }
  std::printf("[elementary] unfused fma: %llu cases, %llu differ\n", static_cast<unsigned long long>(cases),
              static_cast<unsigned long long>(differing));
}

}  // namespace
