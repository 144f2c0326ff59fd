// Every op of the registry: its backward against central finite differences
// in double (fresh random inputs and cotangents each run), its float code
// against its double code, and its algebraic identities.
// Reproduce a run with LOCKSTEP_SEED=<the printed seed>.
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lockstep/ad/registry.hpp"
#include "lockstep/ad/rng.hpp"

namespace {

using namespace lockstep;

#if defined(__SANITIZE_ADDRESS__)
constexpr double kTrials = 1;  // ASan is ~10x slower: one fresh draw per case
#else
constexpr double kTrials = 3;  // three fresh draws per declared case
#endif

std::uint64_t run_seed() {
  static const std::uint64_t seed = [] {
    const std::uint64_t s = ad::seed_from_env();
    std::printf("ops gradcheck seed %llu (reproduce with LOCKSTEP_SEED=%llu)\n",
                static_cast<unsigned long long>(s), static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

std::vector<std::string> op_names() {
  std::vector<std::string> v;
  for (const auto& e : ad::op_registry()) v.emplace_back(e.name);
  return v;
}

class OpChecks : public ::testing::TestWithParam<std::string> {};

TEST_P(OpChecks, GradientFloatAndAlgebra) {
  const ad::OpEntry* e = ad::find_op(GetParam());
  ASSERT_NE(e, nullptr);
  ad::RunOptions o;
  o.seed = run_seed();
  o.effort = kTrials;
  const auto rows = e->run(o);
  std::size_t vjp_rows = 0;
  for (const ad::CheckResult& r : rows) {
    std::printf("%-14s %-58s cases %6llu  max abs %9.3g  max rel %9.3g  tol %-9.3g%s  %s\n",
                r.op.c_str(), r.check.c_str(), static_cast<unsigned long long>(r.cases),
                r.max_abs, r.max_rel, r.exact ? 0.0 : r.tol,
                r.exact ? (r.bitwise ? " (bits)" : " (exact)") : "",
                r.pass ? "PASS" : "FAIL");
    EXPECT_TRUE(r.pass) << r.op << " / " << r.check << ": " << r.note << " (seed " << o.seed
                        << ")";
    if (r.check.rfind("vjp", 0) == 0) {
      ++vjp_rows;
      EXPECT_GT(r.cases, 0u) << r.check;
    }
  }
  EXPECT_GT(vjp_rows, 0u) << "no gradient was checked for " << e->name;
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpChecks, ::testing::ValuesIn(op_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
