// Sampled accuracy against MPFR (test (2) of the elementary-functions issue):
// >= 10^5 inputs per function — random bit patterns over the whole domain plus
// the dense regimes of elementary_ref.cpp (near 0, thresholds, range-reduction
// boundaries, large sin/cos arguments, subnormal inputs and outputs) — and the
// maximum ulp error must not exceed the function's documented bound. Without
// MPFR the reference is glibc's double libm (its own error is ~2^-29 ulp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "lockstep/num/elementary_ref.hpp"
#include "test_util.hpp"

namespace le = lockstep::num::elem;
using lockstep_elem_test::kAccuracyCases;
using lockstep_elem_test::test_seed;

namespace {

std::string fn_name(const ::testing::TestParamInfo<le::FnSpec>& info) { return info.param.name; }

class ElementaryAccuracy : public ::testing::TestWithParam<le::FnSpec> {};

TEST_P(ElementaryAccuracy, MaxUlpWithinDocumentedBound) {
  const le::FnSpec s = GetParam();
  const le::Sample smp = le::sample_inputs(s.fn, kAccuracyCases, test_seed());
  const le::Measure m = le::measure(le::lockstep_impl(s.fn), s.fn, smp);
  std::printf("[elementary] %-7s vs %s: %llu cases, max %.6f ulp (bound %.2f) at x=%s%s%s, got %a exact %a; "
              "%llu not correctly rounded\n",
              s.name, le::best_ref_name().c_str(), static_cast<unsigned long long>(m.cases), m.max_ulp, s.bound,
              le::hexf(m.argmax_x).c_str(), s.arity == 2 ? " y=" : "", s.arity == 2 ? le::hexf(m.argmax_y).c_str() : "",
              static_cast<double>(m.argmax_got), m.argmax_exact, static_cast<unsigned long long>(m.not_correctly_rounded));
  EXPECT_EQ(m.cases, kAccuracyCases);
  EXPECT_LE(m.max_ulp, s.bound);

  // Per regime (each got its share of the cases): where the error lives.
  for (std::size_t r = 0; r < smp.regime_names.size(); ++r) {
    le::Sample sub;
    for (std::size_t i = 0; i < smp.x.size(); ++i) {
      if (smp.regime_of[i] != r) continue;
      sub.x.push_back(smp.x[i]);
      sub.y.push_back(smp.y[i]);
    }
    const le::Measure mr = le::measure(le::lockstep_impl(s.fn), s.fn, sub);
    std::printf("[elementary]     %-44s %6llu cases, max %.6f ulp\n", smp.regime_names[r].c_str(),
                static_cast<unsigned long long>(mr.cases), mr.max_ulp);
    EXPECT_GE(mr.cases, kAccuracyCases / smp.regime_names.size());
  }
}

INSTANTIATE_TEST_SUITE_P(All, ElementaryAccuracy, ::testing::ValuesIn(le::all_fns().begin(), le::all_fns().end()),
                         fn_name);

// The two references agree: MPFR's correctly rounded result equals the double
// libm value rounded to float wherever that double is not within 2^-20 ulp of a
// midpoint. (A check on the references themselves, and on mpfr_get_flt's
// handling of subnormal results.)
TEST_P(ElementaryAccuracy, ReferencesAgree) {
  if (!le::mpfr_available()) GTEST_SKIP() << "MPFR not built";
  const le::FnSpec s = GetParam();
  const le::Sample smp = le::sample_inputs(s.fn, kAccuracyCases / 10, test_seed() + 7);
  std::size_t disagree = 0, compared = 0;
  double max_diff = 0.0;
  for (std::size_t i = 0; i < smp.x.size(); ++i) {
    const le::Exact a = le::libm_ref(s.fn, smp.x[i], smp.y[i]);
    const le::Exact b = le::mpfr_ref(s.fn, smp.x[i], smp.y[i]);
    if (std::isfinite(b.value) && std::isfinite(a.value))
      max_diff = std::max(max_diff, std::fabs(a.value - b.value) / le::ulp_of(b.value));
    if (le::near_midpoint(a.value)) continue;
    ++compared;
    if (!le::same_result(a.rounded, b.rounded)) {
      if (disagree == 0)
        ADD_FAILURE() << s.name << " x=" << le::hexf(smp.x[i]) << " libm " << a.value << " mpfr " << b.value;
      ++disagree;
    }
  }
  std::printf("[elementary] %-7s libm vs MPFR: %zu compared, %zu disagree, max |libm - mpfr| = %.3g float ulp\n",
              s.name, compared, disagree, max_diff);
  EXPECT_EQ(disagree, 0u);
  EXPECT_LT(max_diff, 1e-6);  // glibc's double error is ~2^-29 float ulp
}

}  // namespace
