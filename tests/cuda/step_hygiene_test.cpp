// Issue 12 (b): no host wait and no device allocation inside a training step,
// for the int8 units paths too (cuda_model_test.cpp proves it for the float
// path of each family): after two warm-up steps, every step of the step
// pipeline waits for the device once (its end) and calls cudaMalloc never.
// The units keep their own scratch (codes, steps, the int32 products), which
// must be sized once and reused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/train/optim.hpp"
#include "lockstep/train/step.hpp"

#include "../common/tokens.hpp"

using namespace lockstep;

namespace {

struct Mode {
  const char* name;
  bool unit_backward, units_head;
};

}  // namespace

TEST(StepHygiene, AUnitsStepWaitsOnceAndAllocatesNothing) {
  for (const Mode mode : {Mode{"units fwd", false, false}, Mode{"units + unit bwd", true, false},
                          Mode{"units + unit bwd + units head", true, true}}) {
    model::ModelConfig cfg = model::preset("gpt2-micro");
    cfg.linear = model::LinearMode::Units;
    cfg.unit_backward = mode.unit_backward;
    cfg.units_head = mode.units_head;
    auto gpu = model::make_cuda_model(cfg, "off");
    gpu->init(5);
    ASSERT_NE(gpu->step_stages(), nullptr);
    const std::int64_t B = 2, T = 32, A = 2;
    const auto in = test::tokens(B * T * A, cfg.vocab_size, 31), tg = test::tokens(B * T * A, cfg.vocab_size, 32);
    const train::AdamWConfig adamw;
    const train::StepBatch batch{in, tg, B, T, A};
    auto step = [&](std::int64_t t) {
      return train::run_step(*gpu->step_stages(), batch, 1.0f, train::adamw_scalars(adamw, 1e-3f, t), {}, 0);
    };
    step(1);
    step(2);
    const std::size_t allocs = cuda::allocation_count();
    for (std::int64_t t = 3; t <= 5; ++t) {
      const std::size_t waits = cuda::host_waits();
      const auto r = step(t);
      EXPECT_EQ(cuda::host_waits() - waits, 1u) << mode.name << ", step " << t;
      EXPECT_TRUE(std::isfinite(r.loss)) << mode.name;
    }
    std::printf("%s: %zu cudaMalloc calls in steps 3-5 (%zu before); %zu bytes held\n", mode.name,
                cuda::allocation_count() - allocs, allocs, cuda::bytes_in_use());
    EXPECT_EQ(cuda::allocation_count(), allocs) << mode.name;
  }
}
