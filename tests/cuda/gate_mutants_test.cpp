// The gates have teeth: with each known kernel bug of mutant.hpp switched on,
// running every gate (gate::all_cases(), clean and dirty-buffer passes) must
// reject at least one case; with Mutant::none every case passes. A mutant
// whose kernel family has no gate cases yet (its kernels are written
// elsewhere) is skipped, not failed.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/probe.hpp"

namespace {

namespace lc = lockstep::cuda;
using lc::Mutant;

const std::vector<Mutant>& all_mutants() {
  static const std::vector<Mutant> m = {
      Mutant::gemm_assign_not_accumulate, Mutant::gemm_no_bounds_guard,       Mutant::gemm_skip_last_column,
      Mutant::gemm_missing_barrier,       Mutant::attention_drop_scale,       Mutant::residual_flush_negative_zero,
      Mutant::layernorm_fused_mul_add,
  };
  return m;
}

// Which family's gates would run the mutated kernel.
std::vector<lc::gate::Case> family_cases(Mutant m) {
  switch (m) {
    case Mutant::gemm_assign_not_accumulate:
    case Mutant::gemm_no_bounds_guard:
    case Mutant::gemm_skip_last_column:
    case Mutant::gemm_missing_barrier: return lc::gate::linear_cases();
    case Mutant::attention_drop_scale: return lc::gate::attention_cases();
    case Mutant::residual_flush_negative_zero:
    case Mutant::layernorm_fused_mul_add: return lc::gate::pointwise_cases();
    case Mutant::none: return lc::gate::all_cases();
  }
  return {};
}

// Sets a mutant for one scope; back to none on the way out (also on failure).
struct ScopedMutant {
  explicit ScopedMutant(Mutant m) { lc::set_mutant(m); }
  ~ScopedMutant() { lc::set_mutant(Mutant::none); }
};

// Every enumerator appears exactly once above (a new one must be added here:
// the switch in family_cases has no default, so -Wswitch names it).
TEST(CudaGateMutants, ListCoversTheEnum) {
  EXPECT_EQ(all_mutants().size(), static_cast<std::size_t>(Mutant::layernorm_fused_mul_add));
}

TEST(CudaGateMutants, CleanKernelsPassEveryGate) {
  std::string why;
  if (!lc::available(&why)) GTEST_SKIP() << why;
  ScopedMutant none(Mutant::none);
  const auto cases = lc::gate::all_cases();
  const auto outcomes = lc::gate::run_gates(cases, {});
  for (const auto& o : outcomes)
    EXPECT_EQ(o.difference, "") << o.kernel << " on " << o.shape << (o.poisoned ? " (dirty pass)" : "");
  std::printf("Mutant::none: %zu gate cases x 2 passes, all pass\n", cases.size());
}

class CudaGateMutant : public ::testing::TestWithParam<Mutant> {};

TEST_P(CudaGateMutant, IsRejectedByAGate) {
  std::string why;
  if (!lc::available(&why)) GTEST_SKIP() << why;
  const Mutant m = GetParam();
  if (family_cases(m).empty())
    GTEST_SKIP() << lc::mutant_name(m) << ": its kernel family has no gate cases in this build yet";
  const auto cases = lc::gate::all_cases();
  std::vector<lc::gate::Outcome> outcomes;
  {
    ScopedMutant on(m);
    outcomes = lc::gate::run_gates(cases, {});
  }
  std::size_t rejected = 0;
  const lc::gate::Outcome* first = nullptr;
  for (const auto& o : outcomes)
    if (!o.difference.empty()) {
      ++rejected;
      if (first == nullptr) first = &o;
    }
  ASSERT_NE(first, nullptr) << "mutant '" << lc::mutant_name(m) << "' passed every gate (" << outcomes.size()
                            << " outcomes): the gates have no teeth for it";
  std::printf("mutant '%s': rejected by %zu of %zu gate outcomes; first: %s on %s%s: %s\n",
              std::string(lc::mutant_name(m)).c_str(), rejected, outcomes.size(), first->kernel.c_str(),
              first->shape.c_str(), first->poisoned ? " (dirty pass)" : "", first->difference.c_str());
  // The mutant is off again: the device is still healthy and the gates pass.
  lc::gate::Options clean_only;
  clean_only.dirty_pass = false;
  const auto after = lc::gate::run_gates(cases, clean_only);
  for (const auto& o : after) EXPECT_EQ(o.difference, "") << "after the mutant: " << o.kernel << " on " << o.shape;
}

INSTANTIATE_TEST_SUITE_P(AllMutants, CudaGateMutant, ::testing::ValuesIn(all_mutants()),
                         [](const ::testing::TestParamInfo<Mutant>& p) {
                           switch (p.param) {
                             case Mutant::none: return std::string("none");
                             case Mutant::gemm_assign_not_accumulate: return std::string("gemm_assign_not_accumulate");
                             case Mutant::gemm_no_bounds_guard: return std::string("gemm_no_bounds_guard");
                             case Mutant::gemm_skip_last_column: return std::string("gemm_skip_last_column");
                             case Mutant::gemm_missing_barrier: return std::string("gemm_missing_barrier");
                             case Mutant::attention_drop_scale: return std::string("attention_drop_scale");
                             case Mutant::residual_flush_negative_zero:
                               return std::string("residual_flush_negative_zero");
                             case Mutant::layernorm_fused_mul_add: return std::string("layernorm_fused_mul_add");
                           }
                           return std::string("unknown");
                         });

}  // namespace
