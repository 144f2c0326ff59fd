#include "lockstep/train/step.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "lockstep/train/optim.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::train {

ops::StepDecision run_step(model::StepStages& stages, const StepBatch& b, float max_norm,
                           const ops::AdamWScalars& scalars, const StepHooks& hooks, int threads) {
  if (b.accum < 1) throw std::invalid_argument(fmt::format("step: accum must be >= 1, got {}", b.accum));
  // A guard that repaired the weights asks for the step again; a second repair
  // in one step means the replicas cannot agree: the guard throws then.
  for (int attempt = 0;; ++attempt) {
    stages.stage_batch(b.inputs, b.targets, b.batch, b.seq, b.accum, threads);
    if (hooks.computes_micro_batch) {
      for (std::int64_t a = 0; a < b.accum; ++a) {
        if (!hooks.computes_micro_batch(a)) continue;
        stages.micro_batch(a, false);
        if (hooks.keep_micro_batch) hooks.keep_micro_batch(a, stages.micro_batch_loss(a), stages.gradients());
      }
    } else {
      for (std::int64_t a = 0; a < b.accum; ++a) stages.micro_batch(a, a > 0);
    }
    if (hooks.reduce_gradients) {
      std::vector<float> losses(static_cast<std::size_t>(b.accum), 0.0f);
      if (!hooks.computes_micro_batch)
        for (std::int64_t a = 0; a < b.accum; ++a) losses[static_cast<std::size_t>(a)] = stages.micro_batch_loss(a);
      model::TensorTable g = stages.gradients();
      hooks.reduce_gradients(g, losses);
      for (std::int64_t a = 0; a < b.accum; ++a) stages.set_micro_batch_loss(a, losses[static_cast<std::size_t>(a)]);
    }
    if (hooks.guard_weights && hooks.guard_weights(stages.weights(), stages)) {
      if (attempt > 0) throw std::runtime_error("step: the weights were repaired twice in one step");
      continue;
    }
    break;
  }
  stages.update(max_norm, scalars);
  const ops::StepDecision d = stages.finish();
  if (hooks.after_update) hooks.after_update(stages.weights());
  if (!d.update && std::isfinite(d.loss)) stages.refuse_non_finite_gradient(d.norm);
  return d;
}

void HostStepStages::stage_batch(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                                 std::int64_t batch, std::int64_t seq, std::int64_t accum, int threads) {
  const auto micro = static_cast<std::size_t>(batch * seq);
  model::check_batch(inputs.subspan(0, std::min(inputs.size(), micro)),
                     targets.subspan(0, std::min(targets.size(), micro)), batch, seq);
  if (inputs.size() != micro * static_cast<std::size_t>(accum) || targets.size() != inputs.size())
    throw std::invalid_argument(fmt::format("step: inputs ({}) and targets ({}) must hold accum*batch*seq = {} tokens",
                                            inputs.size(), targets.size(), micro * static_cast<std::size_t>(accum)));
  inputs_ = inputs;
  targets_ = targets;
  batch_ = batch;
  seq_ = seq;
  accum_ = accum;
  threads_ = threads;
  losses_.assign(static_cast<std::size_t>(accum), 0.0f);
  decision_ = {};
}

void HostStepStages::micro_batch(std::int64_t a, bool accumulate) {
  const auto micro = static_cast<std::size_t>(batch_ * seq_);
  const auto off = static_cast<std::size_t>(a) * micro;
  losses_[static_cast<std::size_t>(a)] = model_.forward_backward(inputs_.subspan(off, micro),
                                                                 targets_.subspan(off, micro), batch_, seq_, accumulate,
                                                                 threads_);
}

namespace {
model::TensorTable host_table(std::vector<model::Param>& ps, bool grads) {
  model::TensorTable t;
  for (model::Param& p : ps)
    if (p.trainable) t.tensors.push_back({&p.name, grads ? p.grad.data() : p.value.data(), p.value.size()});
  return t;
}
}  // namespace

model::TensorTable HostStepStages::gradients() { return host_table(model_.params(), true); }
model::TensorTable HostStepStages::weights() { return host_table(model_.params(), false); }

// ops/optim.hpp's steps 1–7 with the host loop's threads. A non-finite loss
// touches nothing (not even the 1/accum scale); a non-finite norm is found
// before any gradient is clipped or any weight moves.
void HostStepStages::update(float max_norm, const ops::AdamWScalars& s) {
  decision_ = {};
  decision_.loss = ops::step_loss(losses_.data(), losses_.size());
  decision_.norm = std::nanf("");
  if (!std::isfinite(decision_.loss)) return;
  auto& ps = model_.params();
  std::vector<ParamSlot> slots;
  slots.reserve(ps.size());
  for (std::size_t i = 0; i < ps.size(); ++i) {
    model::Param& p = ps[i];
    if (!p.trainable) continue;
    slots.push_back({p.name, p.value, p.grad, opt_.m[i], opt_.v[i], p.decay});
  }
  const float grad_scale = ops::accum_grad_scale(static_cast<std::size_t>(accum_));
  if (grad_scale != 1.0f)
    for (ParamSlot& sl : slots)
      util::parallel_for(sl.grad.size(), threads_, std::size_t{1} << 14, [&](std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) sl.grad[i] = ops::scale_grad(sl.grad[i], grad_scale);
      });
  decision_.norm = global_grad_norm(slots, threads_);
  decision_.update = ops::step_updates(decision_.loss, decision_.norm);
  if (!decision_.update) return;
  decision_.clip = clip_by_norm(slots, max_norm, decision_.norm, threads_);
  adamw_step(slots, s, threads_);
}

void HostStepStages::refuse_non_finite_gradient(float norm) {
  for (const model::Param& p : std::as_const(model_).params())
    if (p.trainable)
      for (float g : p.grad)
        if (!std::isfinite(g))
          throw std::runtime_error(fmt::format("non-finite gradient ({}) in '{}': the step is refused", g, p.name));
  throw std::runtime_error(fmt::format("gradient norm overflowed to {}: the step is refused", norm));
}

void HostStepStages::set_moments(const std::vector<std::vector<float>>& m, const std::vector<std::vector<float>>& v) {
  opt_.m = m;
  opt_.v = v;
}
void HostStepStages::get_moments(std::vector<std::vector<float>>& m, std::vector<std::vector<float>>& v) const {
  m = opt_.m;
  v = opt_.v;
}

}  // namespace lockstep::train
