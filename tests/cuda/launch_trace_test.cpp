// Every kernel path a training run launches was gated at start-up (issue 10,
// item 3): one GPT-2 124M training step (B 16, T 1024, the benchmark's shape)
// and one with two accumulated micro-batches (B 4: other product shapes, the
// 1/accum scale) through the step pipeline (train::run_step over the model's
// own stages), with the live audits on as in a
// default run; the launch trace (backend/cuda/trace.hpp) lists the kernel paths
// launched, and each must be in the set that passing start-up gate cases
// launched. A failure names the ungated paths.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "lockstep/backend/cuda/probe.hpp"
#include "lockstep/backend/cuda/trace.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/train/optim.hpp"
#include "lockstep/train/step.hpp"

#include "../common/tokens.hpp"

using namespace lockstep;
namespace tr = lockstep::cuda::trace;

using test::tokens;

namespace {

// One training step on the model's own stages (the device's: one wait at its end).
ops::StepDecision train_one_step(model::Model& m, const std::vector<std::int32_t>& inputs,
                                 const std::vector<std::int32_t>& targets, std::int64_t batch, std::int64_t seq,
                                 std::int64_t accum, float max_norm, const ops::AdamWScalars& s) {
  return train::run_step(*m.step_stages(), {inputs, targets, batch, seq, accum}, max_norm, s, {}, 0);
}

}  // namespace

TEST(LaunchTrace, AGpt2StepLaunchesOnlyGatedKernels) {
  std::string why;
  if (!cuda::available(&why)) GTEST_SKIP() << why;
  const model::ModelConfig cfg = model::preset("gpt2-124m");
  auto gpu = model::make_model(cfg, "cuda", "stop");  // the start-up gates run here, once
  const auto gated = tr::process_log().gated();
  ASSERT_FALSE(gated.empty()) << "the start-up gates recorded no kernel path";
  tr::process_log().reset_launches();
  gpu->init(1);
  const train::AdamWConfig adamw;
  struct Shape {
    std::int64_t batch, seq, accum;
  };
  std::int64_t t = 0;
  for (const Shape s : {Shape{16, 1024, 1}, Shape{4, 1024, 2}}) {
    const auto n = static_cast<std::size_t>(s.batch * s.seq * s.accum);
    const auto in = tokens(n, cfg.vocab_size, 1 + 2 * t), tg = tokens(n, cfg.vocab_size, 2 + 2 * t);
    ++t;
    const auto r = train_one_step(*gpu, in, tg, s.batch, s.seq, s.accum, 1.0f, train::adamw_scalars(adamw, 6e-4f, t));
    std::printf("step %lld (B %lld, T %lld, accum %lld): loss %.6f, norm %.6f\n", static_cast<long long>(t),
                static_cast<long long>(s.batch), static_cast<long long>(s.seq), static_cast<long long>(s.accum),
                static_cast<double>(r.loss), static_cast<double>(r.norm));
  }
  std::printf("%s\n", gpu->report().c_str());
  const auto launches = tr::process_log().launches();
  std::printf("kernel paths launched by the steps (%zu), with launch counts; gated at start-up: %zu paths\n",
              launches.size(), gated.size());
  for (const auto& [name, count] : launches)
    std::printf("  %s %-72s %ld\n", gated.count(name) ? "gated  " : "UNGATED", name.c_str(), count);
  EXPECT_FALSE(launches.empty());
  const std::vector<std::string> ungated = tr::process_log().ungated();
  std::string list;
  for (const std::string& name : ungated) list += "\n  " + name;
  EXPECT_TRUE(ungated.empty()) << ungated.size() << " kernel path(s) launched by a GPT-2 124M step were not gated "
                               << "at start-up:" << list;
  // The optimizer's kernels and the engine's glue are among those launched (and gated).
  for (const char* name : {"scale_all", "grad_norms (chunks)", "grad_norms (partials)", "step_control", "adamw_all",
                           "canonical_mean", "fill_words"}) {
    EXPECT_EQ(launches.count(name), 1u) << name << " was not launched by the steps";
    EXPECT_EQ(gated.count(name), 1u) << name << " was not gated";
  }
}
