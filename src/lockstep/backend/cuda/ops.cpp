// cuda::OpKernels: the engine's glue (staging, fills, the loss sum). The op
// methods live with their kernel families (ops_*.cpp).
#include "lockstep/backend/cuda/ops.hpp"

#include <stdexcept>

#include "lockstep/backend/cuda/core_launch.hpp"

namespace lockstep::cuda {

const OpKernels::Index* OpKernels::stage_indices(const Index* host, std::size_t n, int slot) {
  if (slot < 0 || slot > 1) throw std::invalid_argument("stage_indices: slot must be 0 or 1");
  staged_[slot].upload(host, n);
  return staged_[slot].data();
}

float OpKernels::loss_sum(const float* x, std::size_t n) {
  scratch_.resize(1);
  launch::canonical_sum(x, n, scratch_.data());
  float s = 0.0f;
  copy_to_host(&s, scratch_.data(), 1);
  return s;
}

void OpKernels::fill(float* x, std::size_t n, float value) { launch::fill(x, n, value); }

void OpKernels::copy_to_host(float* host, const float* device, std::size_t n) {
  cuda::copy_to_host(host, device, n * sizeof(float));
}

}  // namespace lockstep::cuda
