// The optimizer step as an op: its specification, written once, below the
// backends. The trainer's host loop (train/optim.cpp, trainer.cpp), the device
// kernels (backend/cuda/optim.cu) and the device's start-up gates
// (backend/cuda/gate_train.cpp, which compare the kernels with reference_step
// bit for bit) all call these functions; none of them writes the expressions
// again. Header-only and nvcc-safe (it stands on num/ only).
//
// One step over a table of trainable tensors (value, grad, m, v, decay), the
// micro-batch losses l_0..l_{A-1}, the gradient scale, max_norm and the AdamW
// scalars, in this order:
//   1. grad ← grad·grad_scale when grad_scale ≠ 1     scale_grad (grad_scale = accum_grad_scale(A))
//   2. s_t = num::reduce::sumsq(grad_t) per tensor     tensor_sumsq
//   3. norm = sqrt(num::reduce::sum(s_0, ..., s_last)) norm_of_total
//   4. loss = (+0 + l_0 + ... + l_{A-1}) [/ A if A > 1] step_loss (A = 0: +0)
//   5. update = loss and norm both finite              step_updates
//   6. clip = max_norm > 0 ? max_norm / (norm + 1e-6) : 1   clip_scale
//   7. only when update, per element: g ← g·clip if clip < 1 (written back),
//      then adamw_element(p, g, m, v, scalars, decay)
// Nothing is written in 7 when update is false (the step is refused; the
// gradients may keep the scale of 1).
#pragma once

#include <cstddef>
#include <vector>

#include "lockstep/num/elementary.hpp"  // HwArith
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"
#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace lockstep::ops {

// The correctly rounded operations of the step: num::HwArith, spelled on the
// device as the intrinsics the kernels always had (add.rn, mul.rn, div.rn,
// sqrt.rn), on the host as the operators (-ffp-contract=off: one rounding each).
using Fp = num::HwArith;
LOCKSTEP_HD inline bool is_finite(float a) {
#if defined(__CUDA_ARCH__)
  return isfinite(a);
#else
  return std::isfinite(a);
#endif
}

// The per-step scalars of the update (computed once on the host by
// train::adamw_scalars, identical everywhere).
struct AdamWScalars {
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float step_size;     // lr / (1 − beta1^t)
  float inv_sqrt_bc2;  // 1 / sqrt(1 − beta2^t)
  float eps;
  float decay;         // 1 − lr·weight_decay (for parameters with decay)
};

// The canonical per-element AdamW update:
//   m ← fma(β1, m, (1−β1)·g)
//   v ← fma(β2, v, (1−β2)·(g·g))
//   p ← p·decay                          (decoupled weight decay, if `decay`)
//   p ← fma(−step, m / fma(√v, 1/√bc2, ε), p)
LOCKSTEP_HD inline void adamw_element(float& p, float g, float& m, float& v, const AdamWScalars& s, bool decay) {
  m = num::fma_rn(s.beta1, m, s.one_minus_beta1 * g);
  v = num::fma_rn(s.beta2, v, s.one_minus_beta2 * (g * g));
  float q = decay ? p * s.decay : p;
  const float denom = num::fma_rn(sqrtf(v), s.inv_sqrt_bc2, s.eps);
  p = num::fma_rn(-s.step_size, m / denom, q);
}

// Step 1: the gradient scale of `accum` accumulated micro-batches (their mean).
LOCKSTEP_HD inline float accum_grad_scale(std::size_t accum) {
  return accum > 1 ? 1.0f / static_cast<float>(accum) : 1.0f;
}
LOCKSTEP_HD inline float scale_grad(float g, float grad_scale) { return Fp::mul(g, grad_scale); }

// Step 2: one tensor's sum of squares (the device computes the same lane
// tree with a warp per 4096-chunk: backend/cuda/canonical_warp.cuh).
LOCKSTEP_HD inline float tensor_sumsq(const float* grad, std::size_t n) { return num::reduce::sumsq(grad, n); }
// One element folded into a lane of that sum (num::reduce::sumsq's step).
LOCKSTEP_HD inline float sumsq_step(float acc, float g) { return num::fma_rn(g, g, acc); }

// Step 3: the global L2 norm from the canonical sum of the per-tensor sums.
LOCKSTEP_HD inline float norm_of_total(float total) { return Fp::sqrt(total); }
inline float global_norm(const float* per_tensor_sumsq, std::size_t count) {
  return norm_of_total(num::reduce::sum(per_tensor_sumsq, count));
}

// Step 4: the step's loss from its micro-batch means, in order.
LOCKSTEP_HD inline float step_loss(const float* losses, std::size_t accum) {
  float loss = 0.0f;
  for (std::size_t a = 0; a < accum; ++a) loss = Fp::add(loss, losses[a]);
  if (accum > 1) loss = Fp::div(loss, static_cast<float>(accum));
  return loss;
}

// Step 5: a step updates only when its loss and its norm are finite.
LOCKSTEP_HD inline bool step_updates(float loss, float norm) {
  return is_finite(loss) && is_finite(norm);
}

// Step 6: the clip scale as PyTorch's clip_grad_norm_ (max_norm ≤ 0: off),
// and whether it changes the gradients (only a scale below 1 does).
LOCKSTEP_HD inline float clip_scale(float max_norm, float norm) {
  return max_norm > 0.0f ? Fp::div(max_norm, Fp::add(norm, 1e-6f)) : 1.0f;
}
LOCKSTEP_HD inline bool clips(float clip) { return clip < 1.0f; }
LOCKSTEP_HD inline float clip_grad(float g, float clip) { return Fp::mul(g, clip); }

// Step 7 on one element: the clip applied in place, then AdamW. (The test is
// clips(clip) written out: through the bool function nvcc lays the kernel's
// unswitched loop out in another block order, and adamw_all's PTX is kept as
// it was; the instructions are the same either way.)
LOCKSTEP_HD inline void update_element(float& p, float& grad, float& m, float& v, float clip,
                                       const AdamWScalars& s, bool decay) {
  float g = grad;
  if (clip < 1.0f) grad = g = clip_grad(g, clip);
  adamw_element(p, g, m, v, s, decay);
}

// --- The whole step on the host: the specification the gates compare with ---

// One trainable tensor as the step sees it.
struct OptimTensor {
  float* value;
  float* grad;
  float* m;
  float* v;
  std::size_t n;
  bool decay;
};

// What the step decided (the device's control block holds the same four).
struct StepDecision {
  float loss = 0.0f, norm = 0.0f, clip = 1.0f;
  bool update = false;
};

// Steps 1-7 over `tensors` in table order, single-threaded; per_tensor_sumsq
// (optional) receives step 2's sums.
inline StepDecision reference_step(const std::vector<OptimTensor>& tensors, const float* losses, std::size_t accum,
                                   float grad_scale, float max_norm, const AdamWScalars& s,
                                   std::vector<float>* per_tensor_sumsq = nullptr) {
  if (grad_scale != 1.0f)
    for (const OptimTensor& t : tensors)
      for (std::size_t i = 0; i < t.n; ++i) t.grad[i] = scale_grad(t.grad[i], grad_scale);
  std::vector<float> sums(tensors.size());
  for (std::size_t k = 0; k < tensors.size(); ++k) sums[k] = tensor_sumsq(tensors[k].grad, tensors[k].n);
  StepDecision d;
  d.norm = global_norm(sums.data(), sums.size());
  d.loss = step_loss(losses, accum);
  d.update = step_updates(d.loss, d.norm);
  d.clip = clip_scale(max_norm, d.norm);
  if (d.update)
    for (const OptimTensor& t : tensors)
      for (std::size_t i = 0; i < t.n; ++i) update_element(t.value[i], t.grad[i], t.m[i], t.v[i], d.clip, s, t.decay);
  if (per_tensor_sumsq != nullptr) *per_tensor_sumsq = std::move(sums);
  return d;
}

}  // namespace lockstep::ops
