// Training with --attention units (ops/unit_attention.hpp; docs/UNITS.md) end
// to end: golden weight hashes of the micro runs (unit_attention_runs.hpp)
// pinned to NUMERIC_SPEC_VERSION, the same on a second thread count, and the
// mode kept by a resume (train config "attention"). The CUDA model's run ends
// on the same hashes (tests/cuda/unit_attention_cuda_test.cpp, label gpu).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/num/hash.hpp"
#include "lockstep/train/config.hpp"
#include "lockstep/version.hpp"

#include "unit_attention_runs.hpp"

using namespace lockstep;
using namespace lockstep::test::unit_attention;

namespace {

class UnitAttentionGoldenRun : public ::testing::TestWithParam<AttnMode> {};

TEST_P(UnitAttentionGoldenRun, WeightsHashIsPinnedAndThreadIndependent) {
  ASSERT_EQ(NUMERIC_SPEC_VERSION, 1) << "the numeric contract changed: re-pin these hashes with the new version";
  const AttnMode& m = GetParam();
  const std::string two = num::hash_hex(run_hash(m, 2, "cpu"));
  const std::string one = num::hash_hex(run_hash(m, 1, "cpu"));
  std::printf("%s, 24 steps: weights %s, 1 thread %s (pinned %s)\n", label(m).c_str(), two.c_str(), one.c_str(),
              m.hash);
  EXPECT_EQ(two, m.hash);
  EXPECT_EQ(one, two) << "another thread count";
}

INSTANTIATE_TEST_SUITE_P(Micro, UnitAttentionGoldenRun, ::testing::ValuesIn(pinned_modes()),
                         [](const auto& param_info) { return test_name(param_info.param); });

TEST(UnitAttentionTrainConfig, TheModeIsValidatedAndKeptInTheRunsConfig) {
  train::TrainConfig c;
  c.attention = "int4";
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c.attention = "units";
  const train::TrainConfig r = train::TrainConfig::from_json(c.to_json(), "test");
  EXPECT_EQ(r.attention, "units");
  // A run from before the mode (no "attention" field) is a float-attention run.
  auto j = nlohmann::json::parse(train::TrainConfig{}.to_json());
  j.erase("attention");
  EXPECT_EQ(train::TrainConfig::from_json(j.dump(), "test").attention, "float");
}

}  // namespace
