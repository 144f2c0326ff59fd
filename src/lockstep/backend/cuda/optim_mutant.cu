// The gates' mutants of the optimizer kernels (optim_kernels.cuh): the same
// kernel templates instantiated with a bug, in their own translation unit so
// that they compile beside the clean kernels and cannot change them. Launched
// only while an optimizer mutant is active (tests).
#include <stdexcept>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/optim_kernels.cuh"
#include "lockstep/backend/cuda/trace_launch.hpp"

namespace lockstep::cuda::launch::optim_kernels {

void step_control_mutant(int mut, const float* norms, std::size_t count, const float* losses, std::size_t accum,
                         float max_norm, float* control) {
  if (mut != kClipWithoutEpsilon) throw std::invalid_argument("step_control_mutant: not a step_control mutant");
  trace::launched("step_control (mutant)");
  step_control_kernel<kClipWithoutEpsilon><<<1, 32>>>(norms, count, losses, accum, max_norm, control);
  check_launch("step_control (mutant)");
}

void adamw_all_mutant(int mut, const TensorSlot* table, std::size_t count, std::size_t max_n, const float* control,
                      const ops::AdamWScalars& s) {
  if (count == 0 || max_n == 0) return;
  const dim3 grid = per_tensor_grid(count, max_n);
  trace::launched("adamw_all (mutant)");
  if (mut == kDecayEveryTensor) adamw_all_kernel<kDecayEveryTensor><<<grid, 256>>>(table, control, s);
  else if (mut == kClipScalesUp) adamw_all_kernel<kClipScalesUp><<<grid, 256>>>(table, control, s);
  else throw std::invalid_argument("adamw_all_mutant: not an adamw_all mutant");
  check_launch("adamw_all (mutant)");
}

}  // namespace lockstep::cuda::launch::optim_kernels
