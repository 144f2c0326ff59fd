// Launchers of the optimizer kernels (optim.cu): the optimizer op's step
// (ops/optim.hpp: grads scaled, global norm, clip, AdamW), on the device, with
// its expressions. Every launcher covers all parameter tensors at
// once (one launch each, not one per tensor) and none makes the host wait:
// the step's decisions (the clip scale, whether to update at all) are read by
// the kernels from a small control block on the device.
#pragma once

#include <cstddef>

#include "lockstep/num/fp.hpp"  // LOCKSTEP_HD
#include "lockstep/ops/optim.hpp"  // the expressions (AdamWScalars, the step's functions)

namespace lockstep::cuda::launch {

// One trainable parameter tensor as the optimizer kernels see it (a table of
// these lives on the device).
struct TensorSlot {
  float* value;
  float* grad;
  float* m;
  float* v;
  std::size_t n;
  std::size_t first_chunk;  // index of its first 4096-chunk among all tensors' chunks
  int decay;                // AdamW weight decay applies
};
// Chunks of a tensor in the norm's first level (a tensor of <= 4096 elements, even 0, is one chunk).
LOCKSTEP_HD inline std::size_t chunks_of(std::size_t n) { return n <= 4096 ? 1 : (n + 4095) / 4096; }

// Control block written by step_control, read by adamw_all (floats).
enum Control : int { kLoss = 0, kNorm = 1, kClip = 2, kUpdate = 3, kControlSize = 4 };

// grad[i] = grad[i] * s for every tensor (the trainer's 1/accum).
void scale_all(const TensorSlot* table, std::size_t count, std::size_t max_n, float s);
// norms[t] = num::reduce::sumsq(grad of tensor t) for every tensor: the chunk
// partials (one warp per 4096-chunk, into `partials`, total_chunks floats),
// then each tensor's partials summed by the same recursion (one warp per tensor).
void grad_norms(const TensorSlot* table, std::size_t count, std::size_t total_chunks, float* partials, float* norms);
// The step's decisions, one warp, the host loop's expressions:
//   loss = (+0 + losses[0] + ... + losses[accum-1]) [/ accum when accum > 1]  (accum 0: no loss, taken as 0)
//   norm = sqrt(num::reduce::sum(norms, count)),
//   clip = max_norm > 0 ? max_norm / (norm + 1e-6) : 1,
//   update = loss and norm both finite.
void step_control(const float* norms, std::size_t count, const float* losses, std::size_t accum, float max_norm,
                  float* control);
// When control[kUpdate] is set: ops::update_element for every element of every
// tensor (g' = clip < 1 ? g * clip : g, written back as clip_grad_norm scales
// in place, then ops::adamw_element(p, g', m, v, s, decay)). Otherwise
// nothing is written.
void adamw_all(const TensorSlot* table, std::size_t count, std::size_t max_n, const float* control,
               const ops::AdamWScalars& s);

}  // namespace lockstep::cuda::launch
