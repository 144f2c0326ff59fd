// The launch trace's bookkeeping (backend/cuda/trace.hpp) on the host: no GPU
// needed, runs in the CPU suite of a CUDA build. What the GPU test
// (launch_trace_test.cpp) relies on: a gate case's kernels count as gated only
// when the case passes, launches outside a case are counted per name, and
// ungated() names exactly the launched paths no passing case ran.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/backend/cuda/trace.hpp"

namespace tr = lockstep::cuda::trace;

TEST(LaunchTrace, APassingCasesKernelsAreGatedAFailingCasesAreNot) {
  tr::LaunchLog log;
  log.begin_case();
  log.launched("adamw_all");
  log.launched("step_control");
  log.end_case(true);
  log.begin_case();
  log.launched("scale_all");
  log.end_case(false);
  EXPECT_EQ(log.gated(), (std::set<std::string, std::less<>>{"adamw_all", "step_control"}));
  EXPECT_TRUE(log.launches().empty()) << "launches inside a case are not the run's";
}

TEST(LaunchTrace, LaunchesOutsideCasesAreCountedAndTheUngatedNamed) {
  tr::LaunchLog log;
  log.begin_case();
  log.launched("gemm tile 7 [A k-major 16B, B k-major 16B]");
  log.end_case(true);
  for (int i = 0; i < 3; ++i) log.launched("gemm tile 7 [A k-major 16B, B k-major 16B]");
  log.launched("gemm tile 6 [A i-major 16B, B j-major 16B]");
  log.launched("adamw_all");
  const auto launches = log.launches();
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(launches.at("gemm tile 7 [A k-major 16B, B k-major 16B]"), 3);
  EXPECT_EQ(log.ungated(), (std::vector<std::string>{"adamw_all", "gemm tile 6 [A i-major 16B, B j-major 16B]"}));
  log.reset_launches();
  EXPECT_TRUE(log.launches().empty());
  EXPECT_TRUE(log.ungated().empty());
  log.reset_gated();
  log.launched("gemm tile 7 [A k-major 16B, B k-major 16B]");
  EXPECT_EQ(log.ungated(), std::vector<std::string>{"gemm tile 7 [A k-major 16B, B k-major 16B]"});
}

TEST(LaunchTrace, ACaseThatThrowsGatesNothing) {
  const auto before = tr::process_log().gated();
  try {
    tr::GateCase c;
    tr::launched("a kernel of a case that throws");
    throw std::runtime_error("the case failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(tr::process_log().gated(), before);
  {
    tr::GateCase c;
    tr::launched("a kernel of a passing case");
    c.end(true);
  }
  EXPECT_EQ(tr::process_log().gated().count("a kernel of a passing case"), 1u);
  EXPECT_EQ(tr::process_log().launches().count("a kernel of a passing case"), 0u);
}

TEST(LaunchTrace, ComposedNamesAreInternedOnce) {
  const char* a = tr::compose("gemm tile ", "6", " [A ", "i", "-major]");
  const char* b = tr::compose("gemm tile 6 [A i", "-major]");
  EXPECT_STREQ(a, "gemm tile 6 [A i-major]");
  EXPECT_EQ(a, b) << "the same name must be the same pointer (launchers keep it in a static)";
  EXPECT_NE(a, tr::compose("gemm tile 6 [A k-major]"));
}
