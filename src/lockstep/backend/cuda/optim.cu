// The optimizer step on the device (optim_launch.hpp). The reductions are
// canonical_warp.cuh's warp forms of num/reduce.hpp (the CPU's chunked lane
// tree, lane for lane); every other expression is the optimizer op's
// (ops/optim.hpp: the gradient scale, the sum-of-squares step, the norm, the
// step loss, the clip and the decision to update, the element update itself).
#include "lockstep/backend/cuda/optim_launch.hpp"

#include <algorithm>
#include <stdexcept>

#include "lockstep/backend/cuda/canonical_warp.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/ops/optim.hpp"

namespace lockstep::cuda::launch {
namespace {

namespace rd = num::reduce;

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
  const float p = detail::warp_chunk(base, len, [x](float acc, std::size_t i) { return ops::sumsq_step(acc, x[i]); });
  if ((threadIdx.x & 31u) == 0) partials[g] = p;
}

// One warp per tensor: its chunk partials summed (sum_like's upper levels).
__global__ void sum_partials_kernel(const TensorSlot* table, std::size_t count, const float* partials, float* norms) {
  const std::size_t w = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32;
  if (w >= count) return;
  const TensorSlot t = table[w];
  const float* p = partials + t.first_chunk;
  const float s = detail::warp_sum_like(chunks_of(t.n), [p](float acc, std::size_t i) { return __fadd_rn(acc, p[i]); });
  if ((threadIdx.x & 31u) == 0) norms[w] = s;
}

__global__ void step_control_kernel(const float* norms, std::size_t count, const float* losses, std::size_t accum,
                                    float max_norm, float* control) {
  const float total = detail::warp_sum_like(count, [norms](float acc, std::size_t i) { return __fadd_rn(acc, norms[i]); });
  if (threadIdx.x != 0) return;
  const float loss = ops::step_loss(losses, accum);
  const float norm = ops::norm_of_total(total);
  const float clip = ops::clip_scale(max_norm, norm);
  control[kLoss] = loss;
  control[kNorm] = norm;
  control[kClip] = clip;
  control[kUpdate] = ops::step_updates(loss, norm) ? 1.0f : 0.0f;
}

__global__ void adamw_all_kernel(const TensorSlot* table, const float* control, ops::AdamWScalars s) {
  if (control[kUpdate] == 0.0f) return;
  const float clip = control[kClip];
  const TensorSlot t = table[blockIdx.y];
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < t.n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    ops::update_element(t.value[i], t.grad[i], t.m[i], t.v[i], clip, s, t.decay != 0);
}

dim3 per_tensor_grid(std::size_t count, std::size_t max_n) {
  if (count > 65535) throw std::invalid_argument("optimizer: more than 65535 parameter tensors");
  return dim3(detail::blocks_for(max_n, 256, 2048), static_cast<unsigned>(count));
}

}  // namespace

void scale_all(const TensorSlot* table, std::size_t count, std::size_t max_n, float s) {
  if (count == 0 || max_n == 0) return;
  scale_all_kernel<<<per_tensor_grid(count, max_n), 256>>>(table, s);
  check_launch("scale_all");
}

void grad_norms(const TensorSlot* table, std::size_t count, std::size_t total_chunks, float* partials, float* norms) {
  if (count == 0) return;
  sumsq_chunks_kernel<<<static_cast<unsigned>((total_chunks + 7) / 8), 256>>>(table, count, total_chunks, partials);
  check_launch("grad_norms chunks");
  sum_partials_kernel<<<static_cast<unsigned>((count + 7) / 8), 256>>>(table, count, partials, norms);
  check_launch("grad_norms partials");
}

void step_control(const float* norms, std::size_t count, const float* losses, std::size_t accum, float max_norm,
                  float* control) {
  step_control_kernel<<<1, 32>>>(norms, count, losses, accum, max_norm, control);
  check_launch("step_control");
}

void adamw_all(const TensorSlot* table, std::size_t count, std::size_t max_n, const float* control,
               const ops::AdamWScalars& s) {
  if (count == 0 || max_n == 0) return;
  adamw_all_kernel<<<per_tensor_grid(count, max_n), 256>>>(table, control, s);
  check_launch("adamw_all");
}

}  // namespace lockstep::cuda::launch
