// The step pipeline: one piece of code runs a training step for every device.
//
//   1. stage the batch                       stages.stage_batch
//   2. forward + backward per micro-batch    stages.micro_batch(0..accum−1)
//   3. gradient reduction across replicas    hooks.reduce_gradients (identity here)
//   4. weight-hash guard                     hooks.guard_weights    (no-op here;
//                                            a repair runs 1–4 again)
//   5. scale 1/accum, norm, clip, AdamW      stages.update
//   6. the decision, read once               stages.finish
//
// The stages are the model's own (Model::step_stages(): a device model runs
// them on the device and waits for it once, in finish) or the host stages
// below (a model whose parameters live on the host). The replicas plug their
// exact all-reduce into 3 and their hash guard into 4, on the tables the
// stages give (host or device pointers); with no hooks, 3 and 4 cost nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "lockstep/model/model.hpp"
#include "lockstep/ops/optim.hpp"
#include "lockstep/train/checkpoint.hpp"

namespace lockstep::train {

struct StepHooks {
  // Replicas (dist/, docs/DISTRIBUTED.md): whether this process computes
  // micro-batch a (empty: every one, accumulated in order). When set, each
  // computed micro-batch's gradient is written, not added, and handed with its
  // loss to keep_micro_batch before the next one runs; the reduction then sums
  // all of them in micro-batch order, the expression one process computes.
  std::function<bool(std::int64_t a)> computes_micro_batch;
  std::function<void(std::int64_t a, float loss, const model::TensorTable& grads)> keep_micro_batch;
  // Sums the gradients across replicas into the table, in place (empty: one
  // process). `losses` holds every micro-batch's loss afterwards (a replica
  // fills in those other replicas computed); the update reads them.
  std::function<void(model::TensorTable& grads, std::span<float> losses)> reduce_gradients;
  // Compares the replicas' weights before they change (empty: no guard).
  // Returns true when it repaired them (weights and moments, through the
  // stages): the step's gradients came from the damaged weights, so the step
  // is computed again from its batch.
  std::function<bool(const model::TensorTable& weights, model::StepStages& stages)> guard_weights;
  // The weights after the update (empty: nothing), e.g. the hash the next
  // guard's self-check compares against.
  std::function<void(const model::TensorTable& weights)> after_update;
};

struct StepBatch {
  std::span<const std::int32_t> inputs, targets;  // accum·batch·seq tokens each
  std::int64_t batch = 0, seq = 0, accum = 1;
};

// Runs stages 1–6. Returns the decision; a refused step comes back with
// update false and a non-finite loss (the caller refuses it naming the loss),
// or throws std::runtime_error naming the first non-finite gradient when the
// loss was finite but the norm was not. Nothing is updated in either case.
ops::StepDecision run_step(model::StepStages& stages, const StepBatch& batch, float max_norm,
                           const ops::AdamWScalars& scalars, const StepHooks& hooks, int threads);

// The stages on the host, for a model whose parameters live there: the
// model's forward_backward per micro-batch, then the trainer's host loop
// (optim.hpp: the same expressions as ops/optim.hpp, spread over threads).
// The AdamW moments are `opt`'s.
class HostStepStages final : public model::StepStages {
 public:
  HostStepStages(model::Model& model, OptimizerState& opt) : model_(model), opt_(opt) {}

  void stage_batch(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t batch,
                   std::int64_t seq, std::int64_t accum, int threads) override;
  void micro_batch(std::int64_t a, bool accumulate) override;
  float micro_batch_loss(std::int64_t a) override { return losses_.at(static_cast<std::size_t>(a)); }
  void set_micro_batch_loss(std::int64_t a, float loss) override { losses_.at(static_cast<std::size_t>(a)) = loss; }
  model::TensorTable gradients() override;
  model::TensorTable weights() override;
  void update(float max_norm, const ops::AdamWScalars& s) override;
  ops::StepDecision finish() override { return decision_; }
  [[noreturn]] void refuse_non_finite_gradient(float norm) override;
  void set_moments(const std::vector<std::vector<float>>& m, const std::vector<std::vector<float>>& v) override;
  void get_moments(std::vector<std::vector<float>>& m, std::vector<std::vector<float>>& v) const override;

 private:
  model::Model& model_;
  OptimizerState& opt_;
  std::span<const std::int32_t> inputs_, targets_;
  std::int64_t batch_ = 0, seq_ = 0, accum_ = 1;
  int threads_ = 1;
  std::vector<float> losses_;
  ops::StepDecision decision_;
};

}  // namespace lockstep::train
