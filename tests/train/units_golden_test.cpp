// Training through the int8 units (--linear units, --unit-backward,
// --units-head; docs/UNITS.md), end to end: golden weight hashes of short
// micro runs pinned to NUMERIC_SPEC_VERSION (the same run as golden_test.cpp's
// float ones, with the units mode), the same hash on a second run and on
// another thread count, and a resume that would change the mode is refused,
// naming both. The CUDA model's units run ends on the same hashes
// (tests/cuda/units_cuda_test.cpp, label gpu).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "lockstep/num/hash.hpp"
#include "lockstep/train/run.hpp"
#include "lockstep/version.hpp"

#include "units_runs.hpp"

namespace fs = std::filesystem;
using namespace lockstep;
using namespace lockstep::test::units;

namespace {

class UnitsGoldenRun : public ::testing::TestWithParam<Mode> {};

TEST_P(UnitsGoldenRun, WeightsHashIsPinnedRepeatableAndThreadIndependent) {
  ASSERT_EQ(NUMERIC_SPEC_VERSION, 1) << "the numeric contract changed: re-pin these hashes with the new version";
  const Mode& m = GetParam();
  const std::string first = num::hash_hex(run_hash(m, 2, "cpu"));
  const std::string again = num::hash_hex(run_hash(m, 2, "cpu"));
  const std::string one_thread = num::hash_hex(run_hash(m, 1, "cpu"));
  std::printf("%s, 24 steps: weights %s, again %s, 1 thread %s (pinned %s)\n", label(m).c_str(), first.c_str(),
              again.c_str(), one_thread.c_str(), m.hash);
  EXPECT_EQ(first, m.hash);
  EXPECT_EQ(again, first) << "a second run of the same config";
  EXPECT_EQ(one_thread, first) << "another thread count";
}

INSTANTIATE_TEST_SUITE_P(Micro, UnitsGoldenRun, ::testing::ValuesIn(pinned_modes()),
                         [](const auto& param_info) { return test_name(param_info.param); });

// A units run resumed with another linear mode is refused, naming the flag, the
// given value and the checkpoint's; resumed as it was, it continues.
TEST(UnitsResume, AnotherLinearModeIsRefusedNamingBoth) {
  const fs::path base = fresh_dir("resume");
  const Mode m{"gpt2-micro", true, false, ""};
  train::TrainConfig c = config(m, base);
  c.steps = 3;
  c.warmup = 1;
  train::RunOptions ro;
  std::FILE* sink = std::fopen("/dev/null", "w");
  ro.out = sink;
  train::run_training(c, ro);
  auto refusal = [&](train::TrainConfig cli, const std::set<std::string>& given) -> std::string {
    train::RunOptions r;
    r.out = sink;
    r.resume = c.out;
    r.given = given;
    try {
      train::run_training(cli, r);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  train::TrainConfig as_float = c;
  as_float.linear = "float";
  as_float.unit_backward = false;
  const std::string a = refusal(as_float, {"linear"});
  EXPECT_NE(a.find("--linear \"float\" differs from the checkpoint's run (\"units\")"), std::string::npos) << a;
  train::TrainConfig no_unit_bwd = c;
  no_unit_bwd.unit_backward = false;
  const std::string b = refusal(no_unit_bwd, {"unit-backward"});
  EXPECT_NE(b.find("--unit-backward false differs from the checkpoint's run (true)"), std::string::npos) << b;
  train::TrainConfig more = c;
  more.steps = 5;
  EXPECT_EQ(refusal(more, {"steps"}), "(accepted)");
  std::fclose(sink);
  fs::remove_all(base);
}

}  // namespace
