// The LoRA branch's element-wise glue on the device (lora_launch.hpp). The
// CPU reference is ops/lora_glue.hpp (scale_add, scale, dropout), which the
// host kernel sets run in model/lora_branch.hpp; each kernel computes its
// cell's expression bit for bit (no contraction: __fmul_rn / __fadd_rn), and
// the dropout mask is num/rng.hpp's counter-based Philox4x32-10 (LOCKSTEP_HD:
// the host's integer math compiled for the device), so the keep mask is the
// CPU's. Gated at start-up against ops::lora_glue (gate_driver.cpp, op "lora").
#include <cstddef>
#include <cstdint>

#include "lockstep/backend/cuda/canonical_warp.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/lora_launch.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/rng.hpp"

namespace lockstep::cuda::launch {
namespace {

constexpr unsigned kThreads = 256;

#define LOCKSTEP_LORA_GRID_STRIDE(i, n)                                                             \
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)

template <bool Fused>
__global__ void scale_add_kernel(std::size_t n, float* y, const float* u, float s) {
  LOCKSTEP_LORA_GRID_STRIDE(i, n) {
    if constexpr (Fused)
      y[i] = num::fma_rn(u[i], s, y[i]);  // the mutant: one rounding where the spec has two
    else
      y[i] = __fadd_rn(y[i], __fmul_rn(u[i], s));
  }
}

__global__ void scale_kernel(std::size_t n, float* out, const float* in, float s) {
  LOCKSTEP_LORA_GRID_STRIDE(i, n) out[i] = __fmul_rn(in[i], s);
}

__global__ void dropout_kernel(std::size_t n, const float* in, float* out, std::uint64_t seed, std::uint64_t stream,
                               float p, float q) {
  LOCKSTEP_LORA_GRID_STRIDE(i, n) {
    const bool keep = num::rng::uniform(seed, stream, i) >= p;
    out[i] = keep ? __fmul_rn(in[i], q) : 0.0f;
  }
}

#undef LOCKSTEP_LORA_GRID_STRIDE

unsigned grid(std::size_t n) { return detail::blocks_for(n, kThreads, 132 * 64); }

}  // namespace

void lora_scale_add(std::size_t n, float* y, const float* u, float s) {
  if (n == 0) return;
  const bool mutated = mutant() == Mutant::lora_scale_add_fused;
  trace::launched(mutated ? "lora_scale_add (mutant)" : "lora_scale_add");
  if (mutated)
    scale_add_kernel<true><<<grid(n), kThreads>>>(n, y, u, s);
  else
    scale_add_kernel<false><<<grid(n), kThreads>>>(n, y, u, s);
  check_launch("lora_scale_add");
}

void lora_scale(std::size_t n, float* out, const float* in, float s) {
  if (n == 0) return;
  trace::launched("lora_scale");
  scale_kernel<<<grid(n), kThreads>>>(n, out, in, s);
  check_launch("lora_scale");
}

void lora_dropout(std::size_t n, const float* in, float* out, std::uint64_t seed, std::uint64_t stream, float p,
                  float q) {
  if (n == 0) return;
  trace::launched(in == out ? "lora_dropout (in place)" : "lora_dropout");
  dropout_kernel<<<grid(n), kThreads>>>(n, in, out, seed, stream, p, q);
  check_launch("lora_dropout");
}

}  // namespace lockstep::cuda::launch
