// AdamW with decoupled weight decay, the learning-rate schedule (linear warmup,
// then cosine decay) and global L2 gradient clipping, as canonical float
// expressions: the step's expressions (the element update, the sums of
// squares and the norm, the clip scale, the decision to update) are the
// optimizer op's, ops/optim.hpp, which the CUDA kernels call too; every
// per-step scalar is computed once on the host by a fixed sequence of IEEE
// operations.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lockstep/ops/optim.hpp"

namespace lockstep::train {

struct AdamWConfig {
  double lr = 3e-4;           // peak learning rate
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // decoupled (applied to parameters marked `decay`)
  void validate() const;      // throws std::invalid_argument naming the field
};

struct ScheduleConfig {
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;
  double min_lr_ratio = 0.1;  // final lr = min_lr_ratio * peak
  void validate() const;
};

// Learning rate at 0-based `step`: peak·(step+1)/warmup during warmup, then
// min + (peak − min)·½(1 + cos(π·progress)), progress = (step − warmup)/(total − warmup)
// clamped to [0, 1]. Float arithmetic with lockstep's deterministic cos.
float learning_rate(const AdamWConfig& opt, const ScheduleConfig& s, std::int64_t step);

// The per-step scalars of the update and the per-element AdamW update are the
// optimizer op's (ops/optim.hpp), shared with the device kernels.
using AdamWScalars = ops::AdamWScalars;
using ops::adamw_element;
// t: 1-based update count; lr: this step's learning rate.
AdamWScalars adamw_scalars(const AdamWConfig& opt, float lr, std::int64_t t);

// One parameter tensor as the optimizer sees it.
struct ParamSlot {
  std::string name;
  std::span<float> value, grad, m, v;
  bool decay = true;  // weight decay applies (matrices yes; norms, biases no)
};

// Global L2 norm of all gradients: per tensor the canonical sum of squares,
// then the canonical sum of those partials in slot order, then sqrt.
float global_grad_norm(const std::vector<ParamSlot>& slots, int threads);

// Scales every gradient by max_norm / (norm + 1e-6) when that is < 1 (as
// PyTorch's clip_grad_norm_). Returns the norm before clipping. Throws
// std::runtime_error naming the first tensor holding a NaN/Inf gradient.
float clip_grad_norm(std::vector<ParamSlot>& slots, float max_norm, int threads);
// The clip alone, for a norm already known to be finite: scales every gradient
// by ops::clip_scale(max_norm, norm) when that is < 1; returns the scale.
float clip_by_norm(std::vector<ParamSlot>& slots, float max_norm, float norm, int threads);

// Applies one AdamW update to every slot (rows across threads; the bits do not
// depend on `threads`).
void adamw_step(std::vector<ParamSlot>& slots, const AdamWScalars& s, int threads);

}  // namespace lockstep::train
