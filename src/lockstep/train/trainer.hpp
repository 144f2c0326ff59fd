// The training step and the validation pass over a Model (model/model.hpp).
//
// One optimizer step s (0-based; the update count t = s + 1):
//   lr     = learning_rate(adamw, schedule, s)                      (optim.hpp)
//   windows = sample_batch(train, batch_seed(seed), s, batch·accum, seq)   (shards.hpp)
//   for a in 0..accum-1:  loss_a = forward_backward(windows[a·batch .. (a+1)·batch), accumulate = a > 0)
//   loss   = (loss_0 + ... + loss_{accum-1}) / accum                 (float, in order)
//   grads  = grads · (1/accum) when accum > 1 (the sum of micro-batch means becomes their mean;
//            exact for a power-of-two accum)
//   norm   = clip_grad_norm(trainable params, grad_clip)             (refuses NaN/Inf gradients)
//   AdamW update with adamw_scalars(lr, t)                           (optim.hpp)
// run by the step pipeline (step.hpp) on the model's own stages (a device
// model) or the host stages: the same sequence, the same bits.
// The windows of step s are a pure function of (seed, s) and split into
// micro-batches after being drawn, so resuming at step s needs nothing but s,
// and changing --accum keeps the data of every step.
//
// Validation: the shard read in order, window w = tokens [w·seq, w·seq + seq]
// (sequential_batch), every target scored once; periodic passes score the
// first eval_tokens/seq windows (the same ones every time, so passes compare).
//   loss (nats/token) = Σ loss(batch)·batch·seq / Σ batch·seq   (double)
//   bits per byte     = Σ nats / (ln 2 · Σ bytes of the target tokens)
// A token's bytes are its decoded bytes; <|endoftext|> counts 0 bytes (a
// conservative choice: predicting it costs bits and earns no bytes).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "lockstep/data/shards.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/train/checkpoint.hpp"
#include "lockstep/train/config.hpp"
#include "lockstep/train/step.hpp"

namespace lockstep::train {

// The Philox seed batches are drawn with: derived from the run seed so that
// batch sampling and parameter initialization (Philox keyed by the seed
// itself) never share a stream. XXH3-64 of "lockstep.batches" seeded with seed.
std::uint64_t batch_seed(std::uint64_t seed);

// nats / (ln 2 · bytes).
double bits_per_byte(double total_nats, std::uint64_t bytes);

struct StepResult {
  std::int64_t step = 0;  // updates applied after this one (1-based)
  float loss = 0;         // mean training cross-entropy of the step, nats/token
  float lr = 0;
  float grad_norm = 0;    // before clipping
  std::uint64_t tokens = 0;  // tokens of this step (batch·accum·seq)
};

struct EvalResult {
  std::int64_t step = 0;
  double loss = 0;  // nats/token
  double bpb = 0;   // bits per byte
  std::uint64_t tokens = 0, bytes = 0;
};

class Trainer {
 public:
  // token_bytes[id]: the byte length of token id (0 for special tokens); its
  // size must cover the model's vocabulary. `val` may be absent (no evaluation).
  Trainer(const TrainConfig& cfg, std::unique_ptr<model::Model> model, data::Shard train,
          std::optional<data::Shard> val, std::vector<std::uint32_t> token_bytes);

  void init_fresh();                      // model.init(seed), zero moments, step 0
  void restore(OptimizerState opt);       // the model's weights are already loaded
  StepResult step();                      // one optimizer step
  // The step pipeline's hooks (step.hpp): a replica's reduction and guard
  // (dist/, wired by the CLI); none for one process.
  void set_step_hooks(StepHooks hooks) { hooks_ = std::move(hooks); }
  // The trainable weights where they live (the step stages' table).
  model::TensorTable weights_table();
  EvalResult evaluate(std::int64_t max_tokens);  // max_tokens <= 0: the whole validation shard
  std::int64_t val_windows() const;       // windows of a whole validation pass

  std::int64_t current_step() const { return opt_.step; }
  const TrainConfig& config() const { return cfg_; }
  model::Model& model() { return *model_; }
  const model::Model& model() const { return *model_; }
  // The optimizer state (moments read back from a model that owns its optimizer).
  const OptimizerState& optimizer() const;
  int threads() const { return threads_; }

 private:
  TrainConfig cfg_;
  std::unique_ptr<model::Model> model_;
  data::Shard train_;
  std::optional<data::Shard> val_;
  std::vector<std::uint32_t> token_bytes_;
  mutable OptimizerState opt_;  // moments stale while a model with its own step stages trains
  AdamWConfig adamw_;
  ScheduleConfig sched_;
  std::uint64_t data_seed_;
  int threads_;
  StepHooks hooks_;
};

}  // namespace lockstep::train
