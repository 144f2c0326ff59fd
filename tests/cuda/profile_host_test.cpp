// The step profile's summaries and formats (backend/cuda/profile.hpp) on the
// host: no GPU needed, runs in the CPU suite of a CUDA build. What the GPU
// test (profile_test.cpp) and train_bench --profile rely on: a scope's op is
// its label's first two words, launches outside any op are the step's glue,
// named gaps stand for themselves, the summaries keep every millisecond, and
// the JSON holds the per-step figures.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "lockstep/backend/cuda/profile.hpp"

namespace pf = lockstep::cuda::profile;

namespace {

pf::Result sample() {
  pf::Result r;
  r.rows = {{"linear fwd 16x8x4", "gemm A", 6, 12.0},  {"linear bwd 16x8x4", "gemm A", 4, 10.0},
            {"linear fwd 16x8x32", "gemm B", 2, 8.0},  {"", "(host: between steps)", 2, 4.0},
            {"", "adamw_all", 2, 2.0},                 {"cross_entropy fwd", "ce_fwd", 2, 1.0},
            {"", "(before the first launch)", 1, 0.5}, {"", "step_control", 2, 0.5}};
  r.device_ms = 38.0;
  r.host_ms = 40.0;
  r.intervals = 21;
  return r;
}

}  // namespace

TEST(StepProfile, OpLabelsNameTheOpTheDirectionAndTheProductsShape) {
  EXPECT_EQ(pf::op_label("linear", "fwd", 16384, 768, 3072), "linear fwd 16384x768x3072");
  EXPECT_EQ(pf::op_label("attention", "bwd"), "attention bwd");
}

TEST(StepProfile, TheOpSummaryJoinsShapesAndKeepsGlueAndGapsApart) {
  const auto ops = pf::by_op(sample());
  ASSERT_EQ(ops.size(), 6u);
  EXPECT_EQ(ops[0].scope, "linear fwd");  // 12 + 8 ms: both shapes
  EXPECT_DOUBLE_EQ(ops[0].ms, 20.0);
  EXPECT_EQ(ops[0].calls, 8);
  EXPECT_EQ(ops[1].scope, "linear bwd");
  EXPECT_EQ(ops[2].scope, "(host: between steps)");
  EXPECT_EQ(ops[3].scope, "(step glue: optimizer, loss, copies)");  // adamw_all + step_control
  EXPECT_DOUBLE_EQ(ops[3].ms, 2.5);
  EXPECT_EQ(ops[3].calls, 4);
  double sum = 0;
  for (const auto& o : ops) sum += o.ms;
  EXPECT_DOUBLE_EQ(sum, 38.0);
}

TEST(StepProfile, TheScopeSummaryKeepsShapesApartAndLeavesTheGlueOut) {
  const auto sc = pf::by_scope(sample());
  ASSERT_EQ(sc.size(), 4u);
  EXPECT_EQ(sc[0].scope, "linear fwd 16x8x4");
  EXPECT_EQ(sc[1].scope, "linear bwd 16x8x4");
  EXPECT_EQ(sc[2].scope, "linear fwd 16x8x32");
  EXPECT_EQ(sc[3].scope, "cross_entropy fwd");
}

TEST(StepProfile, AProductsWorkIsReadFromItsShape) {
  EXPECT_DOUBLE_EQ(pf::scope_flops("linear fwd 16384x768x50304"), 2.0 * 16384 * 768 * 50304);
  EXPECT_DOUBLE_EQ(pf::scope_flops("int8_linear bwd 16x8x4"), 4.0 * 16 * 8 * 4);
  EXPECT_DOUBLE_EQ(pf::scope_flops("cross_entropy fwd"), 0.0);
  EXPECT_DOUBLE_EQ(pf::scope_flops("linear fwd 16x8"), 0.0);
  EXPECT_DOUBLE_EQ(pf::scope_flops("linear fwd 16x8x4x2"), 0.0);
  // In the table: linear fwd 16x8x4 is 3 calls/step of 1024 flops in 6 ms/step.
  EXPECT_NE(pf::table(sample(), 2, 0.0).find("linear fwd 16x8x4"), std::string::npos);
}

TEST(StepProfile, TheKernelSummaryJoinsScopes) {
  const auto k = pf::by_kernel(sample());
  ASSERT_EQ(k.size(), 7u);
  EXPECT_EQ(k[0].kernel, "gemm A");
  EXPECT_DOUBLE_EQ(k[0].ms, 22.0);
  EXPECT_EQ(k[0].calls, 10);
  EXPECT_EQ(k[1].kernel, "gemm B");
}

TEST(StepProfile, TheTableGivesPerStepFiguresAndTheComparison) {
  const std::string t = pf::table(sample(), 2, 20.0, 3);
  // Sum 38 ms over 2 steps = 19 ms/step against 20 unprofiled: -5.0%.
  EXPECT_NE(t.find("sum of intervals 19.00 ms/step"), std::string::npos) << t;
  EXPECT_NE(t.find("vs unprofiled 20.00 ms/step (-5.0%)"), std::string::npos) << t;
  // "linear fwd": 10 ms/step of 19 = 52.6%, 4 calls per step.
  EXPECT_NE(t.find("linear fwd"), std::string::npos);
  EXPECT_NE(t.find("      4.0     10.000   52.6%"), std::string::npos) << t;
  // Only the top 3 rows of the detail, the rest summed in one line (38 - 30 = 8 ms: 4 ms/step).
  EXPECT_NE(t.find("(5 more rows)"), std::string::npos) << t;
  EXPECT_NE(pf::table(sample(), 1, 0.0).find("(no unprofiled time to compare)"), std::string::npos);
}

TEST(StepProfile, TheJsonHoldsEveryRowPerStep) {
  const auto j = nlohmann::json::parse(pf::to_json(sample(), 2, 20.0, R"("config":"x","batch":16)"));
  EXPECT_EQ(j.at("config"), "x");
  EXPECT_EQ(j.at("batch"), 16);
  EXPECT_EQ(j.at("steps"), 2);
  EXPECT_DOUBLE_EQ(j.at("sum_ms_per_step").get<double>(), 19.0);
  EXPECT_DOUBLE_EQ(j.at("device_span_ms_per_step").get<double>(), 19.0);
  EXPECT_DOUBLE_EQ(j.at("unprofiled_ms_per_step").get<double>(), 20.0);
  ASSERT_EQ(j.at("rows").size(), 8u);
  EXPECT_EQ(j.at("rows")[0].at("scope"), "linear fwd 16x8x4");
  EXPECT_DOUBLE_EQ(j.at("rows")[0].at("ms_per_step").get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(j.at("rows")[0].at("calls_per_step").get<double>(), 3.0);
  EXPECT_EQ(j.at("by_op").size(), 6u);
  EXPECT_EQ(j.at("by_kernel").size(), 7u);
  EXPECT_EQ(j.at("by_scope").size(), 4u);
  // linear fwd 16x8x4: 6 calls of 2·16·8·4 = 1024 flops in 12 ms.
  EXPECT_EQ(j.at("by_scope")[0].at("scope"), "linear fwd 16x8x4");
  EXPECT_DOUBLE_EQ(j.at("by_scope")[0].at("tera_per_s").get<double>(), 6 * 1024 / 12e-3 / 1e12);
  EXPECT_FALSE(j.at("rows")[0].contains("tera_per_s"));
}
