// Teeth of the accuracy measurement (test (2) of the elementary-functions
// issue): deliberately wrong implementations — a dropped range-reduction term,
// a perturbed polynomial coefficient, a naive formula, a wrong threshold, a
// float-only reduction — must be rejected by the same sampled measurement that
// the real functions pass (their max ulp error exceeds the function's bound).
#include <gtest/gtest.h>

#include <cstdio>

#include "lockstep/num/elementary_ref.hpp"
#include "test_util.hpp"

namespace le = lockstep::num::elem;
using lockstep_elem_test::kTeethCases;
using lockstep_elem_test::test_seed;

namespace {

TEST(ElementaryTeeth, EveryWrongImplementationIsRejected) {
  int caught = 0;
  for (const le::Mutant& mu : le::mutants()) {
    const le::FnSpec& s = le::spec(mu.fn);
    const le::Sample smp = le::sample_inputs(mu.fn, kTeethCases, test_seed() + 3);
    const le::Measure m = le::measure(mu.impl, mu.fn, smp);
    std::printf("[elementary] mutant %-45s %llu cases, max %.4g ulp (bound %.2f) at x=%s -> %s\n", mu.name,
                static_cast<unsigned long long>(m.cases), m.max_ulp, s.bound, le::hexf(m.argmax_x).c_str(),
                m.max_ulp > s.bound ? "rejected" : "NOT REJECTED");
    EXPECT_GT(m.max_ulp, s.bound) << mu.name;
    if (m.max_ulp > s.bound) ++caught;
  }
  std::printf("[elementary] %d of %zu wrong implementations rejected\n", caught, le::mutants().size());
  EXPECT_GE(le::mutants().size(), 8u);
}

// The same measurement passes lockstep's own implementations on that sample
// (so the rejections above are about the mutants, not the harness).
TEST(ElementaryTeeth, RealImplementationsPassTheSameSample) {
  for (const le::Mutant& mu : le::mutants()) {
    const le::FnSpec& s = le::spec(mu.fn);
    const le::Sample smp = le::sample_inputs(mu.fn, kTeethCases, test_seed() + 3);
    const le::Measure m = le::measure(le::lockstep_impl(mu.fn), mu.fn, smp);
    EXPECT_LE(m.max_ulp, s.bound) << s.name;
  }
}

}  // namespace
