// cuda::OpKernels: the engine's glue (staging, fills, the mean loss). The op
// methods live with their kernel families (ops_*.cpp).
#include "lockstep/backend/cuda/ops.hpp"

#include <cstring>
#include <functional>
#include <stdexcept>

#include "lockstep/backend/cuda/core_launch.hpp"

namespace lockstep::cuda {

const OpKernels::Index* OpKernels::stage_indices(const Index* host, std::size_t n, int slot) {
  if (slot < 0 || slot > 1) throw std::invalid_argument("stage_indices: slot must be 0 or 1");
  const Index* base = slot == 0 ? staged_inputs_ : staged_targets_;
  // std::less gives a total order on pointers into different arrays too.
  if (staged_n_ > 0 && !std::less<const Index*>{}(host, base) && !std::less<const Index*>{}(base + staged_n_, host) &&
      static_cast<std::size_t>(host - base) + n <= staged_n_)
    return staged_step_.data() + (slot == 0 ? 0 : staged_n_) + (host - base);
  staged_[slot].upload(host, n);
  return staged_[slot].data();
}

void OpKernels::stage_step(const Index* inputs, const Index* targets, std::size_t n) {
  // The bounce buffer may be rewritten only when its last copy is done: every
  // step ends with a wait for the device (its read-back), so it is. (A step
  // that threw before its end may leave that copy in flight; it then carries
  // a discarded batch, and this step's copy lands after it in stream order.)
  pinned_.resize(2 * n);
  std::memcpy(pinned_.data(), inputs, n * sizeof(Index));
  std::memcpy(pinned_.data() + n, targets, n * sizeof(Index));
  staged_step_.resize(2 * n);
  copy_to_device_async(staged_step_.data(), pinned_.data(), 2 * n * sizeof(Index));
  staged_inputs_ = inputs;
  staged_targets_ = targets;
  staged_n_ = n;
}

float OpKernels::loss_mean(const float* x, std::size_t n, std::size_t n_valid) {
  float* out = defer_loss_to;
  if (out == nullptr) {
    scratch_.resize(1);
    out = scratch_.data();
  }
  // The divisor converted on the host, as the engine's host path does.
  launch::canonical_mean(x, n, n_valid == 0 ? 0.0f : static_cast<float>(n_valid), out);
  if (defer_loss_to != nullptr) return 0.0f;
  float s = 0.0f;
  copy_to_host(&s, out, 1);
  return s;
}

void OpKernels::fill(float* x, std::size_t n, float value) { launch::fill(x, n, value); }

void OpKernels::copy_to_host(float* host, const float* device, std::size_t n) {
  cuda::copy_to_host(host, device, n * sizeof(float));
}

}  // namespace lockstep::cuda
