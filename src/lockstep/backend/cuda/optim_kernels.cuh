// The optimizer kernels (launchers: optim.cu). step_control and adamw_all,
// which the gates' mutants plant bugs in (mutant.hpp), are templates over the
// bug, Mut: optim.cu launches the clean kernels (Mut = kOptimClean, whose code
// is exactly the one written before the mutants existed: every mutant branch
// is an `if constexpr`), optim_mutant.cu the mutants, in its own translation
// unit so that it cannot change the clean kernels (optim.cu's PTX is the one
// it had with the kernels in it: scripts/ptx_same.sh).
#pragma once

#include <cstddef>
#include <stdexcept>

#include "lockstep/backend/cuda/canonical_warp.cuh"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/optim_launch.hpp"
#include "lockstep/ops/optim.hpp"

namespace lockstep::cuda::launch::optim_kernels {

// optim_mutant.cu: the launches with the bug `mut` (not kOptimClean) planted.
void step_control_mutant(int mut, const float* norms, std::size_t count, const float* losses, std::size_t accum,
                         float max_norm, float* control);
void adamw_all_mutant(int mut, const TensorSlot* table, std::size_t count, std::size_t max_n, const float* control,
                      const ops::AdamWScalars& s);

// The kernels have internal linkage (each including file has its own), as
// they had in optim.cu.
namespace {

// The optimizer mutants as the kernels name them.
enum OptimMut : int {
  kOptimClean = 0,
  kDecayEveryTensor,   // AdamW decays every tensor (norms and biases too): the decay flag ignored
  kClipWithoutEpsilon, // clip = max_norm / norm, without the + 1e-6
  kClipScalesUp,       // the clip applied whenever it is not 1 (small gradients scaled up)
};
inline int optim_mut(Mutant m) {
  switch (m) {
    case Mutant::adamw_decay_every_tensor: return kDecayEveryTensor;
    case Mutant::clip_without_epsilon: return kClipWithoutEpsilon;
    case Mutant::clip_scales_up: return kClipScalesUp;
    default: return kOptimClean;
  }
}

inline dim3 per_tensor_grid(std::size_t count, std::size_t max_n) {
  if (count > 65535) throw std::invalid_argument("optimizer: more than 65535 parameter tensors");
  return dim3(cuda::detail::blocks_for(max_n, 256, 2048), static_cast<unsigned>(count));
}

namespace rd = num::reduce;
using cuda::detail::warp_chunk;
using cuda::detail::warp_sum_like;

// blockIdx.y: the tensor; x: a grid-stride loop over its elements.
__global__ void scale_all_kernel(const TensorSlot* table, float s) {
  const TensorSlot t = table[blockIdx.y];
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < t.n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    t.grad[i] = ops::scale_grad(t.grad[i], s);
}

// One warp per chunk of all tensors' chunks; the tensor found by bisection.
__global__ void sumsq_chunks_kernel(const TensorSlot* table, std::size_t count, std::size_t total_chunks,
                                    float* partials) {
  const std::size_t g = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32;
  if (g >= total_chunks) return;  // whole warps leave together (blockDim is a multiple of 32)
  std::size_t lo = 0, hi = count;  // the last tensor with first_chunk <= g
  while (hi - lo > 1) {
    const std::size_t mid = (lo + hi) / 2;
    if (table[mid].first_chunk <= g) lo = mid;
    else hi = mid;
  }
  const TensorSlot t = table[lo];
  const std::size_t base = (g - t.first_chunk) * rd::kChunk;  // <= t.n (an empty tensor is one empty chunk)
  const std::size_t len = t.n - base < rd::kChunk ? t.n - base : rd::kChunk;
  const float* x = t.grad;
  const float p = warp_chunk(base, len, [x](float acc, std::size_t i) { return ops::sumsq_step(acc, x[i]); });
  if ((threadIdx.x & 31u) == 0) partials[g] = p;
}

// One warp per tensor: its chunk partials summed (sum_like's upper levels).
__global__ void sum_partials_kernel(const TensorSlot* table, std::size_t count, const float* partials, float* norms) {
  const std::size_t w = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32;
  if (w >= count) return;
  const TensorSlot t = table[w];
  const float* p = partials + t.first_chunk;
  const float s = warp_sum_like(chunks_of(t.n), [p](float acc, std::size_t i) { return __fadd_rn(acc, p[i]); });
  if ((threadIdx.x & 31u) == 0) norms[w] = s;
}

// The step's decisions (one warp) and the update, over the bug Mut.
template <int Mut>
__global__ void step_control_kernel(const float* norms, std::size_t count, const float* losses, std::size_t accum,
                                    float max_norm, float* control) {
  const float total = warp_sum_like(count, [norms](float acc, std::size_t i) { return __fadd_rn(acc, norms[i]); });
  if (threadIdx.x != 0) return;
  const float loss = ops::step_loss(losses, accum);
  const float norm = ops::norm_of_total(total);
  float clip;
  if constexpr (Mut == kClipWithoutEpsilon)
    clip = max_norm > 0.0f ? __fdiv_rn(max_norm, norm) : 1.0f;
  else
    clip = ops::clip_scale(max_norm, norm);
  control[kLoss] = loss;
  control[kNorm] = norm;
  control[kClip] = clip;
  control[kUpdate] = ops::step_updates(loss, norm) ? 1.0f : 0.0f;
}

template <int Mut>
__global__ void adamw_all_kernel(const TensorSlot* table, const float* control, ops::AdamWScalars s) {
  if (control[kUpdate] == 0.0f) return;
  const float clip = control[kClip];
  const TensorSlot t = table[blockIdx.y];
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < t.n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if constexpr (Mut == kOptimClean) {
      ops::update_element(t.value[i], t.grad[i], t.m[i], t.v[i], clip, s, t.decay != 0);
    } else {
      float g = t.grad[i];
      if (Mut == kClipScalesUp ? clip != 1.0f : clip < 1.0f) t.grad[i] = g = ops::clip_grad(g, clip);
      ops::adamw_element(t.value[i], g, t.m[i], t.v[i], s, Mut == kDecayEveryTensor || t.decay != 0);
    }
  }
}

}  // namespace
}  // namespace lockstep::cuda::launch::optim_kernels
