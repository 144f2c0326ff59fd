// The model's fused units paths (model/units_fusion.hpp, ops/units_fused.hpp)
// against the unfused ones on the same CPU kernel set: the loss and every
// gradient bit for bit, with the fusions on (the default of --linear units:
// and they really run) and off (ops::set_units_fusion(false): and then none
// runs), on 1 and 3 threads, for GPT-2 (the MLP chain) and LLaMA (q/k/v and
// gate/up over one quantization of their input, forward and backward), each
// with the float STE and with the unit backward. The fused path against the
// op specs: units_model_test.cpp; the golden hashes: test_units_golden.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/model/config.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/ops/units_fused.hpp"
#include "model_test_util.hpp"

namespace m = lockstep::model;
namespace mt = lockstep::model::testing;
namespace ops = lockstep::ops;
using lockstep::num::bits_of;

namespace {

struct SplitSmallWork : ::testing::Environment {
  void SetUp() override { lockstep::cpu::set_min_parallel_work(256); }
};
const auto* const kSplit = ::testing::AddGlobalTestEnvironment(new SplitSmallWork);

struct Pass {
  float loss;
  std::vector<std::vector<float>> grads;
  unsigned long long fused_calls;
};
Pass run(const m::ModelConfig& cfg, const std::vector<m::Param>& values, const mt::Batch& b, int threads,
         bool fused) {
  ops::set_units_fusion(fused);
  auto model = m::make_cpu_model(cfg);
  for (std::size_t i = 0; i < values.size(); ++i) model->params()[i].value = values[i].value;
  const auto before = ops::units_fused_calls().load();
  Pass p;
  p.loss = model->forward_backward(b.ids, b.targets, 2, 13, false, threads);
  p.fused_calls = ops::units_fused_calls().load() - before;
  for (const auto& q : model->params()) p.grads.push_back(q.grad);
  ops::set_units_fusion(true);
  return p;
}

}  // namespace

TEST(UnitsFusionModel, TheFusedPathIsTakenAndHasTheUnfusedBits) {
  for (const char* preset : {"gpt2-micro", "llama-micro"})
    for (bool unit_backward : {false, true}) {
      m::ModelConfig cfg = m::preset(preset);
      cfg.linear = m::LinearMode::Units;
      cfg.unit_backward = unit_backward;
      auto base = m::make_cpu_model(cfg);
      base->init(5);
      const std::vector<m::Param> values = base->params();
      const auto b = mt::random_batch(2, 13, cfg.vocab_size, 17, true);
      for (int threads : {1, 3}) {
        const Pass fused = run(cfg, values, b, threads, true);
        const Pass plain = run(cfg, values, b, threads, false);
        std::size_t cells = 0, differ = 0;
        for (std::size_t i = 0; i < plain.grads.size(); ++i) {
          const std::size_t d = mt::differing_bits(fused.grads[i], plain.grads[i]);
          cells += plain.grads[i].size();
          differ += d;
          if (d) ADD_FAILURE() << preset << ": " << d << " cells of d" << values[i].name << " differ";
        }
        std::printf("%s%s, threads %d: %llu fused calls; loss %.9g fused, %.9g unfused; %zu of %zu gradient cells "
                    "differ\n",
                    preset, unit_backward ? " unit-backward" : "", threads, fused.fused_calls,
                    static_cast<double>(fused.loss), static_cast<double>(plain.loss), differ, cells);
        EXPECT_GT(fused.fused_calls, 0u) << preset << ": the fused path did not run";
        EXPECT_EQ(plain.fused_calls, 0u) << preset << ": a fused call ran with the fusions off";
        EXPECT_EQ(bits_of(fused.loss), bits_of(plain.loss)) << preset;
        EXPECT_EQ(differ, 0u);
      }
    }
}

// The float mode never runs a fused units call.
TEST(UnitsFusionModel, TheFloatModeRunsNoFusedCall) {
  const m::ModelConfig cfg = m::preset("llama-micro");
  auto base = m::make_cpu_model(cfg);
  base->init(5);
  const auto b = mt::random_batch(2, 13, cfg.vocab_size, 17, true);
  EXPECT_EQ(run(cfg, base->params(), b, 2, true).fused_calls, 0u);
}
