// The checks have teeth (test (c) of the oracle issue):
//   - the CPU comparison harness, run on a deliberately wrong oracle (ties away
//     from zero, flushed subnormals, a lost sticky bit), reports disagreements,
//     through exactly the code path of test_ieee_cpu;
//   - plausible wrong mirrors of canonical expressions (an fma done in double,
//     sums rounded once) are rejected on a measured fraction of inputs.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "ieee_test_util.hpp"
#include "lockstep/num/ieee.hpp"
#include "lockstep/num/ieee_check.hpp"

namespace ieee = lockstep::num::ieee;
namespace check = lockstep::num::ieee::check;
using lockstep_ieee_test::kScale;
using lockstep_ieee_test::test_seed;

namespace {

constexpr std::uint64_t kMutantCases = 200'000 / kScale;
constexpr std::uint64_t kMirrorCases = 200'000 / kScale;

TEST(IeeeTeeth, EveryMutantIsCaughtByTheCpuHarness) {
  for (const auto& [flaw, op] : check::mutant_cases()) {
    const check::CheckStats s = check::check_op(op, check::Reference::cpu, kMutantCases, test_seed(), flaw);
    std::printf("[ieee] caught %.3g%% of inputs: %s\n",
                100.0 * static_cast<double>(s.mismatches) / static_cast<double>(s.cases), check::summary(s).c_str());
    EXPECT_GT(s.mismatches, 0u) << "mutant " << ieee::flaw_name(flaw) << " of " << check::op_name(op)
                                << " passed the harness";
  }
}

// The MPFR comparison has teeth too (a wrapper that, say, compared the oracle with
// itself would agree everywhere): one op per planted bug.
TEST(IeeeTeeth, MutantsAreCaughtByTheMpfrHarness) {
  if (!check::mpfr_available()) GTEST_SKIP() << "built without MPFR";
  const std::pair<ieee::Flaw, check::Op> cases[] = {
      {ieee::Flaw::ties_away, check::Op::add},
      {ieee::Flaw::flush_subnormals, check::Op::mul},
      {ieee::Flaw::no_sticky, check::Op::fma},
      {ieee::Flaw::no_sticky, check::Op::sqrt},
  };
  for (const auto& [flaw, op] : cases) {
    const check::CheckStats s = check::check_op(op, check::Reference::mpfr, kMutantCases, test_seed(), flaw);
    std::printf("[ieee] %s\n", check::summary(s).c_str());
    EXPECT_GT(s.mismatches, 0u) << "mutant " << ieee::flaw_name(flaw) << " of " << check::op_name(op);
  }
}

// The other side of mutant_cases(): where a flaw is NOT a bug the mutant must agree
// everywhere. A square root of a binary32 value is never an exact midpoint, so
// rounding ties away is harmless there (division, which one might expect to be
// tie-free too, does tie below the normal range: 2^-126 / 2^24 = 2^-150, halfway
// between 0 and 2^-149 -- this test found that); a square root is never
// subnormal, nor is a converted int32.
TEST(IeeeTeeth, MutantsAreHarmlessWhereTheirFlawCannotOccur) {
  const std::pair<ieee::Flaw, check::Op> harmless[] = {
      {ieee::Flaw::ties_away, check::Op::sqrt},
      {ieee::Flaw::flush_subnormals, check::Op::sqrt},
      {ieee::Flaw::flush_subnormals, check::Op::from_i32},
  };
  for (const auto& [flaw, op] : harmless) {
    const check::CheckStats s = check::check_op(op, check::Reference::cpu, kMutantCases, test_seed(), flaw);
    std::printf("[ieee] %s\n", check::summary(s).c_str());
    EXPECT_EQ(s.mismatches, 0u) << s.first_mismatch;
  }
}

TEST(IeeeTeeth, WrongMirrorsAreRejected) {
  for (check::Mirror m : check::all_mirrors()) {
    const auto regimes = check::mirror_regimes(m);
    std::uint64_t cases = 0, rejected = 0;
    for (std::size_t r = 0; r < regimes.size(); ++r) {
      const check::MirrorStats s = check::check_mirror(m, r, kMirrorCases, test_seed());
      cases += s.cases;
      rejected += s.rejected;
      std::printf("[ieee] mirror %-26s regime %-9s: %llu cases, rejected %llu (%.4g%%)%s%s\n", check::mirror_name(m),
                  s.regime.c_str(), static_cast<unsigned long long>(s.cases),
                  static_cast<unsigned long long>(s.rejected), 100.0 * s.fraction(),
                  s.example.empty() ? "" : "; e.g. ", s.example.c_str());
      EXPECT_EQ(s.cases, kMirrorCases);
      if (s.must_reject) {
        EXPECT_GT(s.rejected, 0u) << check::mirror_name(m) << " [" << s.regime << "]";
      }
    }
    std::printf("[ieee] mirror %-26s all regimes: rejected %.4g%%\n", check::mirror_name(m),
                100.0 * static_cast<double>(rejected) / static_cast<double>(cases));
    EXPECT_GT(rejected, 0u) << check::mirror_name(m);
  }
}

}  // namespace
