// The stages of one training step, as a model's storage runs them.
//
// train::run_step (train/step.hpp) is the one piece of code that sequences a
// step for every device:
//
//   stage_batch → micro_batch(0..accum−1) → [gradient reduction] →
//   [weight-hash guard] → update (scale 1/accum, norms, clip, decision, AdamW)
//   → finish (the decision, read once)
//
// The bracketed stages are the pipeline's hooks, not the model's: the identity
// and a no-op for one process; the replicas plug their exact all-reduce and
// their hash guard in there, acting on the tables gradients() and weights()
// return (where the tensors live: host or device memory).
//
// A device model implements these stages on its own storage without making
// the host wait until finish(); the trainer's host stages (train/step.hpp)
// implement them for a model whose parameters live on the host. Either way
// the expressions are the optimizer op's (ops/optim.hpp), so the bits are the
// same on every device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lockstep/ops/optim.hpp"

namespace lockstep::model {

// One tensor of a table: its name and its elements where they live.
struct TensorView {
  const std::string* name = nullptr;
  float* data = nullptr;
  std::size_t n = 0;
};
// The trainable tensors' gradients or weights, in parameter order.
struct TensorTable {
  bool on_device = false;  // data points into device memory
  std::vector<TensorView> tensors;
};

class StepStages {
 public:
  virtual ~StepStages() = default;

  // The step's batch: `accum` micro-batches of [batch, seq] tokens, micro-batch
  // after micro-batch (inputs and targets hold accum·batch·seq tokens each;
  // they stay unchanged until finish()). Throws std::invalid_argument on bad
  // sizes, and the op specs' errors on bad token ids, before anything runs.
  virtual void stage_batch(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                           std::int64_t batch, std::int64_t seq, std::int64_t accum, int threads) = 0;
  // Forward and backward of micro-batch `a` (0-based): the gradient is added
  // (accumulate) or written; the mean loss is kept for the step. One process
  // runs a = 0..accum−1 with accumulate = a > 0; a replica runs its own
  // micro-batches apart (accumulate false) and the reduction adds them all in
  // micro-batch order (dist/, docs/DISTRIBUTED.md).
  virtual void micro_batch(std::int64_t a, bool accumulate) = 0;
  // The kept mean loss of micro-batch `a`, and setting it (a replica learns the
  // losses of the micro-batches other replicas computed from the reduction).
  virtual float micro_batch_loss(std::int64_t a) = 0;
  virtual void set_micro_batch_loss(std::int64_t a, float loss) = 0;
  // The accumulated gradients and the weights of the trainable tensors.
  virtual TensorTable gradients() = 0;
  virtual TensorTable weights() = 0;
  // Steps 1–7 of ops/optim.hpp over the trainable tensors: grads scaled by
  // 1/accum, the global norm, the decision (loss and norm finite), the clip
  // to max_norm (> 0) and AdamW with `s`. Nothing changes when the decision
  // is not to update.
  virtual void update(float max_norm, const ops::AdamWScalars& s) = 0;
  // The step's loss, norm, clip and decision (a device model's one wait).
  virtual ops::StepDecision finish() = 0;
  // After a refused step whose loss is finite: throws std::runtime_error
  // naming the first non-finite gradient (train::clip_grad_norm's message).
  [[noreturn]] virtual void refuse_non_finite_gradient(float norm) = 0;

  // The AdamW moments (one vector per parameter, empty for a frozen one).
  virtual void set_moments(const std::vector<std::vector<float>>& m, const std::vector<std::vector<float>>& v) = 0;
  virtual void get_moments(std::vector<std::vector<float>>& m, std::vector<std::vector<float>>& v) const = 0;
};

}  // namespace lockstep::model
