// The step pipeline (train/step.hpp): one sequence of stages for every device.
// Over the host stages it must be the optimizer op's specification
// (ops::reference_step) after the model's micro-batches, bit for bit; its hooks
// (the replicas' gradient reduction and weight guard) run between the
// micro-batches and the update, on the accumulated gradients and the weights
// before they change; a refused step changes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/model/config.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/ops/optim.hpp"
#include "lockstep/train/checkpoint.hpp"
#include "lockstep/train/optim.hpp"
#include "lockstep/train/step.hpp"

namespace {

using namespace lockstep;

std::vector<std::int32_t> tokens(std::size_t n, std::int64_t vocab, std::uint64_t stream) {
  std::vector<std::int32_t> t(n);
  for (std::size_t i = 0; i < n; ++i)
    t[i] = static_cast<std::int32_t>(num::rng::bits32(3, stream, i) % static_cast<std::uint32_t>(vocab));
  return t;
}

struct Trial {
  model::ModelConfig cfg = model::preset("gpt2-micro");
  std::unique_ptr<model::Model> m = model::make_cpu_model(cfg);
  train::OptimizerState opt;
  static constexpr std::int64_t B = 2, T = 16, A = 2;
  std::vector<std::int32_t> in = tokens(B * T * A, cfg.vocab_size, 1), tg = tokens(B * T * A, cfg.vocab_size, 2);
  Trial() {
    m->init(7);
    opt.init(*m);
  }
  train::StepBatch batch() const { return {in, tg, B, T, A}; }
};

std::vector<std::vector<float>> values(const model::Model& m) {
  std::vector<std::vector<float>> v;
  for (const auto& p : m.params()) v.push_back(p.value);
  return v;
}

bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

// The specification: the micro-batches by forward_backward, then
// ops::reference_step over the trainable tensors (what the host stages and the
// device stages both compute). `between` runs where the pipeline's hooks do.
ops::StepDecision reference(Trial& s, float max_norm, const ops::AdamWScalars& sc,
                            const std::function<void(model::Model&)>& between = {}) {
  const auto micro = static_cast<std::size_t>(Trial::B * Trial::T);
  std::vector<float> losses;
  for (std::int64_t a = 0; a < Trial::A; ++a)
    losses.push_back(s.m->forward_backward(std::span(s.in).subspan(a * micro, micro),
                                           std::span(s.tg).subspan(a * micro, micro), Trial::B, Trial::T, a > 0, 1));
  if (between) between(*s.m);
  std::vector<ops::OptimTensor> table;
  auto& ps = s.m->params();
  for (std::size_t i = 0; i < ps.size(); ++i)
    if (ps[i].trainable)
      table.push_back({ps[i].value.data(), ps[i].grad.data(), s.opt.m[i].data(), s.opt.v[i].data(),
                       ps[i].value.size(), ps[i].decay});
  return ops::reference_step(table, losses.data(), losses.size(), ops::accum_grad_scale(Trial::A), max_norm, sc);
}

TEST(StepPipeline, TheHostStagesAreTheOptimizerOpsSpecification) {
  const auto sc = train::adamw_scalars({}, 1e-3f, 1);
  for (float max_norm : {0.0f, 1e-3f, 1e3f}) {  // off, clipping, not clipping
    Trial a, b;
    train::HostStepStages host(*a.m, a.opt);
    const auto got = train::run_step(host, a.batch(), max_norm, sc, {}, 2);
    const auto want = reference(b, max_norm, sc);
    EXPECT_TRUE(got.update);
    EXPECT_EQ(got.loss, want.loss);
    EXPECT_EQ(got.norm, want.norm);
    EXPECT_EQ(got.clip, want.clip) << max_norm;
    EXPECT_TRUE(same_bits(values(*a.m), values(*b.m))) << "max_norm " << max_norm;
    EXPECT_TRUE(same_bits(a.opt.m, b.opt.m));
    EXPECT_TRUE(same_bits(a.opt.v, b.opt.v));
  }
}

TEST(StepPipeline, HooksSeeTheAccumulatedGradientsAndTheWeightsBeforeTheUpdate) {
  const auto sc = train::adamw_scalars({}, 1e-3f, 1);
  Trial a, b;
  std::vector<std::string> order;
  std::vector<std::vector<float>> guarded;
  train::StepHooks hooks;
  // A stand-in reduction: what two identical replicas' exact sum would give.
  hooks.reduce_gradients = [&](model::TensorTable& g, std::span<float>) {
    order.push_back("reduce");
    EXPECT_FALSE(g.on_device);
    for (auto& t : g.tensors)
      for (std::size_t i = 0; i < t.n; ++i) t.data[i] = t.data[i] + t.data[i];
  };
  hooks.guard_weights = [&](const model::TensorTable& w, model::StepStages&) {
    order.push_back("guard");
    for (const auto& t : w.tensors) guarded.emplace_back(t.data, t.data + t.n);
    return false;
  };
  const auto before = values(*a.m);
  train::HostStepStages host(*a.m, a.opt);
  train::run_step(host, a.batch(), 1.0f, sc, hooks, 1);
  reference(b, 1.0f, sc, [](model::Model& m) {
    for (auto& p : m.params())
      if (p.trainable)
        for (float& g : p.grad) g = g + g;
  });
  EXPECT_EQ(order, (std::vector<std::string>{"reduce", "guard"}));
  EXPECT_TRUE(same_bits(guarded, before));  // every parameter of gpt2-micro is trainable
  EXPECT_TRUE(same_bits(values(*a.m), values(*b.m)));
}

TEST(StepPipeline, ARefusedStepChangesNothing) {
  const auto sc = train::adamw_scalars({}, 1e-3f, 1);
  {  // a non-finite gradient after the reduction: refused naming the tensor
    Trial s;
    const auto before = values(*s.m);
    const auto m0 = s.opt.m;
    train::StepHooks hooks;
    hooks.reduce_gradients = [](model::TensorTable& g, std::span<float>) { g.tensors[3].data[5] = std::numeric_limits<float>::infinity(); };
    train::HostStepStages host(*s.m, s.opt);
    std::string msg;
    try {
      train::run_step(host, s.batch(), 1.0f, sc, hooks, 1);
    } catch (const std::runtime_error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("non-finite gradient (inf) in '" + s.m->params()[3].name + "'"), std::string::npos) << msg;
    EXPECT_TRUE(same_bits(values(*s.m), before));
    EXPECT_TRUE(same_bits(s.opt.m, m0));
  }
  {  // a non-finite loss: handed back for the trainer to refuse, nothing updated
    Trial s;
    s.m->params()[0].value[0] = std::numeric_limits<float>::quiet_NaN();  // wte row 0
    s.in[0] = 0;
    const auto before = values(*s.m);
    train::HostStepStages host(*s.m, s.opt);
    const auto d = train::run_step(host, s.batch(), 1.0f, sc, {}, 1);
    EXPECT_FALSE(d.update);
    EXPECT_TRUE(std::isnan(d.loss));
    EXPECT_TRUE(same_bits(values(*s.m), before));
  }
}

TEST(StepPipeline, BadBatchesAreRefusedBeforeAnythingRuns) {
  Trial s;
  train::HostStepStages host(*s.m, s.opt);
  const auto sc = train::adamw_scalars({}, 1e-3f, 1);
  auto short_batch = s.batch();
  short_batch.inputs = short_batch.inputs.subspan(1);
  EXPECT_THROW(train::run_step(host, short_batch, 1.0f, sc, {}, 1), std::invalid_argument);
  auto no_accum = s.batch();
  no_accum.accum = 0;
  EXPECT_THROW(train::run_step(host, no_accum, 1.0f, sc, {}, 1), std::invalid_argument);
}

}  // namespace
