// AdamW with decoupled weight decay, the learning-rate schedule (linear warmup,
// then cosine decay) and global L2 gradient clipping, as canonical float
// expressions: the per-element update is one LOCKSTEP_HD function that the CPU
// and CUDA backends both call, and every per-step scalar is computed once on
// the host by a fixed sequence of IEEE operations.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lockstep/num/fp.hpp"

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

// The per-step scalars of the update (host-computed, identical everywhere).
struct AdamWScalars {
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float step_size;     // lr / (1 − beta1^t)
  float inv_sqrt_bc2;  // 1 / sqrt(1 − beta2^t)
  float eps;
  float decay;         // 1 − lr·weight_decay (for parameters with decay)
};
// t: 1-based update count; lr: this step's learning rate.
AdamWScalars adamw_scalars(const AdamWConfig& opt, float lr, std::int64_t t);

// The canonical per-element AdamW update:
//   m ← fma(β1, m, (1−β1)·g)
//   v ← fma(β2, v, (1−β2)·(g·g))
//   p ← p·decay                          (decoupled weight decay, if `decay`)
//   p ← fma(−step, m / fma(√v, 1/√bc2, ε), p)
LOCKSTEP_HD inline void adamw_element(float& p, float g, float& m, float& v, const AdamWScalars& s,
                                      bool decay) {
  m = num::fma_rn(s.beta1, m, s.one_minus_beta1 * g);
  v = num::fma_rn(s.beta2, v, s.one_minus_beta2 * (g * g));
  float q = decay ? p * s.decay : p;
  const float denom = num::fma_rn(sqrtf(v), s.inv_sqrt_bc2, s.eps);
  p = num::fma_rn(-s.step_size, m / denom, q);
}

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

// Applies one AdamW update to every slot (rows across threads; the bits do not
// depend on `threads`).
void adamw_step(std::vector<ParamSlot>& slots, const AdamWScalars& s, int threads);

}  // namespace lockstep::train
