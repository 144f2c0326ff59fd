// The oracle against MPFR (test (b) of the oracle issue): binary32 emulated by
// a library nobody here wrote (precision 24, binary32 exponent range,
// mpfr_subnormalize, round to nearest), >= 10^6 inputs per op, 0 disagreements.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "ieee_test_util.hpp"
#include "lockstep/num/ieee_check.hpp"

namespace check = lockstep::num::ieee::check;
using lockstep_ieee_test::kCasesPerOp;
using lockstep_ieee_test::test_seed;

namespace {

// Every op MPFR can judge (all but min/max). Listed without asking has_reference so
// the list does not shrink to nothing when MPFR is missing: those tests then SKIP.
std::vector<check::Op> mpfr_ops() {
  std::vector<check::Op> ops;
  for (check::Op op : check::all_ops())
    if (op != check::Op::min && op != check::Op::max) ops.push_back(op);
  return ops;
}

class IeeeMpfrOp : public ::testing::TestWithParam<check::Op> {};

TEST_P(IeeeMpfrOp, AgreesWithMpfrOnEveryInput) {
  if (!check::mpfr_available()) GTEST_SKIP() << "built without MPFR";
  const check::Op op = GetParam();
  ASSERT_TRUE(check::has_reference(op, check::Reference::mpfr));
  const check::CheckStats s = check::check_op(op, check::Reference::mpfr, kCasesPerOp, test_seed());
  std::printf("[ieee] %s\n", check::summary(s).c_str());
  EXPECT_EQ(s.cases, kCasesPerOp);
  EXPECT_EQ(s.mismatches, 0u) << s.first_mismatch;
}

std::string op_test_name(const ::testing::TestParamInfo<check::Op>& info) {
  std::string name = check::op_name(info.param);
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Ops, IeeeMpfrOp, ::testing::ValuesIn(mpfr_ops()), op_test_name);

}  // namespace
