// The optimizer step on the device (optim_launch.hpp): the launchers. The
// kernels are in optim_kernels.cuh, shared with the gates' mutants
// (optim_mutant.cu); their reductions are canonical_warp.cuh's warp forms of
// num/reduce.hpp (the CPU's chunked lane tree, lane for lane), and every other
// expression is the optimizer op's (ops/optim.hpp: the gradient scale, the
// sum-of-squares step, the norm, the step loss, the clip and the decision to
// update, the element update itself).
#include "lockstep/backend/cuda/optim_launch.hpp"

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/optim_kernels.cuh"
#include "lockstep/backend/cuda/trace_launch.hpp"

namespace lockstep::cuda::launch {

namespace ok = optim_kernels;

void scale_all(const TensorSlot* table, std::size_t count, std::size_t max_n, float s) {
  if (count == 0 || max_n == 0) return;
  trace::launched("scale_all");
  ok::scale_all_kernel<<<ok::per_tensor_grid(count, max_n), 256>>>(table, s);
  check_launch("scale_all");
}

void grad_norms(const TensorSlot* table, std::size_t count, std::size_t total_chunks, float* partials, float* norms) {
  if (count == 0) return;
  trace::launched("grad_norms (chunks)");
  ok::sumsq_chunks_kernel<<<static_cast<unsigned>((total_chunks + 7) / 8), 256>>>(table, count, total_chunks,
                                                                                  partials);
  check_launch("grad_norms chunks");
  trace::launched("grad_norms (partials)");
  ok::sum_partials_kernel<<<static_cast<unsigned>((count + 7) / 8), 256>>>(table, count, partials, norms);
  check_launch("grad_norms partials");
}

void step_control(const float* norms, std::size_t count, const float* losses, std::size_t accum, float max_norm,
                  float* control) {
  if (const int mut = ok::optim_mut(mutant()); mut == ok::kClipWithoutEpsilon) [[unlikely]]
    return ok::step_control_mutant(mut, norms, count, losses, accum, max_norm, control);
  trace::launched("step_control");
  ok::step_control_kernel<ok::kOptimClean><<<1, 32>>>(norms, count, losses, accum, max_norm, control);
  check_launch("step_control");
}

void adamw_all(const TensorSlot* table, std::size_t count, std::size_t max_n, const float* control,
               const ops::AdamWScalars& s) {
  if (count == 0 || max_n == 0) return;
  if (const int mut = ok::optim_mut(mutant()); mut == ok::kDecayEveryTensor || mut == ok::kClipScalesUp) [[unlikely]]
    return ok::adamw_all_mutant(mut, table, count, max_n, control, s);
  trace::launched("adamw_all");
  ok::adamw_all_kernel<ok::kOptimClean><<<ok::per_tensor_grid(count, max_n), 256>>>(table, control, s);
  check_launch("adamw_all");
}

}  // namespace lockstep::cuda::launch
