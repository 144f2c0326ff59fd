// Element-wise kernels of the pointwise family: GELU, SwiGLU, ReLU²·up, the
// residual add and add_into. Each element is the CPU kernel's expression
// (backend/cpu/ops.cpp) with the same primitives: products and sums are the
// _rn intrinsics (no contraction can occur whatever the flags), fma exactly
// where the CPU has fma_rn, tanh/sigmoid from num/elementary.hpp.
#include <cstddef>

#include "lockstep/backend/cuda/canonical_warp.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/pdl_device.cuh"
#include "lockstep/backend/cuda/pdl_launch.cuh"
#include "lockstep/backend/cuda/pointwise_launch.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"

namespace lockstep::cuda::launch {
namespace {

constexpr unsigned kThreads = 256;

#define LOCKSTEP_GRID_STRIDE(i, n)                                                                  \
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)

// ops::max2(a, b) = a > b ? a : b.
__device__ __forceinline__ float max2(float a, float b) { return a > b ? a : b; }

// ops::Gelu::inner: x2 = x·x; x3 = x2·x; u = k0 · fma(kc, x3, x).
__device__ __forceinline__ float gelu_inner(float x, float& x2, const GeluConstants& k) {
  x2 = __fmul_rn(x, x);
  const float x3 = __fmul_rn(x2, x);
  return __fmul_rn(k.k0, num::fma_rn(k.kc, x3, x));
}

__global__ void gelu_fwd_kernel(std::size_t n, GeluConstants k, const float* x, float* y, float* ts) {
  LOCKSTEP_GRID_STRIDE(i, n) {
    const float xi = x[i];
    float x2;
    const float t = num::tanh(gelu_inner(xi, x2, k));
    ts[i] = t;
    y[i] = __fmul_rn(__fmul_rn(0.5f, xi), __fadd_rn(1.0f, t));
  }
}

__global__ void gelu_bwd_kernel(std::size_t n, GeluConstants k, const float* x, const float* ts, const float* dy,
                                float* dx) {
  LOCKSTEP_GRID_STRIDE(i, n) {
    const float xi = x[i];
    float x2;
    const float u = gelu_inner(xi, x2, k);
    const float t = ts != nullptr ? ts[i] : num::tanh(u);
    const float sech2 = num::fma_rn(-t, t, 1.0f);
    const float du = __fmul_rn(k.k0, num::fma_rn(k.k3, x2, 1.0f));
    const float dydx = num::fma_rn(__fmul_rn(__fmul_rn(0.5f, xi), sech2), du, __fmul_rn(0.5f, __fadd_rn(1.0f, t)));
    dx[i] = __fmul_rn(dy[i], dydx);
  }
}

__global__ void swiglu_fwd_kernel(std::size_t n, const float* gate, const float* up, float* y, float* sg) {
  LOCKSTEP_GRID_STRIDE(i, n) {
    const float g = gate[i];
    const float s = num::sigmoid(g);
    sg[i] = s;
    y[i] = __fmul_rn(__fmul_rn(g, s), up[i]);
  }
}

__global__ void swiglu_bwd_kernel(std::size_t n, const float* gate, const float* up, const float* sg,
                                  const float* dy, float* dgate, float* dup) {
  LOCKSTEP_GRID_STRIDE(i, n) {
    const float xg = gate[i];
    const float s = sg != nullptr ? sg[i] : num::sigmoid(xg);
    const float dsilu = __fmul_rn(s, num::fma_rn(xg, __fsub_rn(1.0f, s), 1.0f));
    const float d = dy[i];
    const float u = up[i];
    dgate[i] = __fmul_rn(__fmul_rn(d, u), dsilu);
    dup[i] = __fmul_rn(d, __fmul_rn(xg, s));
  }
}

__global__ void relu2mul_fwd_kernel(std::size_t n, const float* gate, const float* up, float* y) {
  pdl::pdl_trigger();  // PDL (pdl_device.cuh): the next kernel may launch now;
  pdl::pdl_wait();     // every read and write after the wait
  LOCKSTEP_GRID_STRIDE(i, n) {
    const float r = max2(gate[i], 0.0f);
    y[i] = __fmul_rn(__fmul_rn(r, r), up[i]);
  }
}

__global__ void relu2mul_bwd_kernel(std::size_t n, const float* gate, const float* up, const float* dy,
                                    float* dgate, float* dup) {
  LOCKSTEP_GRID_STRIDE(i, n) {
    const float r = max2(gate[i], 0.0f);
    const float d = dy[i];
    const float u = up[i];
    dgate[i] = __fmul_rn(__fmul_rn(d, u), __fmul_rn(2.0f, r));
    dup[i] = __fmul_rn(d, __fmul_rn(r, r));
  }
}

template <bool FlushNegativeZero>
__global__ void residual_fwd_kernel(std::size_t n, const float* a, const float* b, float* y) {
  pdl::pdl_trigger();  // PDL (pdl_device.cuh): the next kernel may launch now;
  pdl::pdl_wait();     // every read and write after the wait
  LOCKSTEP_GRID_STRIDE(i, n) {
    float s = __fadd_rn(a[i], b[i]);
    if constexpr (FlushNegativeZero) s = s == 0.0f ? 0.0f : s;  // the mutant: -0 becomes +0
    y[i] = s;
  }
}

__global__ void add_into_kernel(std::size_t n, float* acc, const float* x) {
  LOCKSTEP_GRID_STRIDE(i, n) acc[i] = __fadd_rn(acc[i], x[i]);
}

unsigned grid(std::size_t n) { return detail::blocks_for(n, kThreads, 132 * 64); }

}  // namespace

void gelu_fwd(std::size_t n, GeluConstants k, const float* x, float* y, float* ts) {
  if (n == 0) return;
  trace::launched("gelu_fwd");
  gelu_fwd_kernel<<<grid(n), kThreads>>>(n, k, x, y, ts);
  check_launch("gelu_fwd");
}

void gelu_bwd(std::size_t n, GeluConstants k, const float* x, const float* ts, const float* dy, float* dx) {
  if (n == 0) return;
  trace::launched(ts != nullptr ? "gelu_bwd (tanh kept)" : "gelu_bwd (tanh recomputed)");
  gelu_bwd_kernel<<<grid(n), kThreads>>>(n, k, x, ts, dy, dx);
  check_launch("gelu_bwd");
}

void swiglu_fwd(std::size_t n, const float* gate, const float* up, float* y, float* sg) {
  if (n == 0) return;
  trace::launched("swiglu_fwd");
  swiglu_fwd_kernel<<<grid(n), kThreads>>>(n, gate, up, y, sg);
  check_launch("swiglu_fwd");
}

void swiglu_bwd(std::size_t n, const float* gate, const float* up, const float* sg, const float* dy, float* dgate,
                float* dup) {
  if (n == 0) return;
  trace::launched(sg != nullptr ? "swiglu_bwd (sigmoid kept)" : "swiglu_bwd (sigmoid recomputed)");
  swiglu_bwd_kernel<<<grid(n), kThreads>>>(n, gate, up, sg, dy, dgate, dup);
  check_launch("swiglu_bwd");
}

void relu2mul_fwd(std::size_t n, const float* gate, const float* up, float* y) {
  if (n == 0) return;
  trace::launched("relu2mul_fwd");
  cuda::detail::launch_decode(relu2mul_fwd_kernel, dim3(grid(n)), dim3(kThreads), 0, n, gate, up,
                              y);  // PDL unless LOCKSTEP_DECODE_PDL=0
  check_launch("relu2mul_fwd");
}

void relu2mul_bwd(std::size_t n, const float* gate, const float* up, const float* dy, float* dgate, float* dup) {
  if (n == 0) return;
  trace::launched("relu2mul_bwd");
  relu2mul_bwd_kernel<<<grid(n), kThreads>>>(n, gate, up, dy, dgate, dup);
  check_launch("relu2mul_bwd");
}

void residual_fwd(std::size_t n, const float* a, const float* b, float* y) {
  if (n == 0) return;
  const bool mutated = mutant() == Mutant::residual_flush_negative_zero;
  trace::launched(mutated ? "residual_fwd (mutant)" : "residual_fwd");
  cuda::detail::launch_decode(mutated ? residual_fwd_kernel<true> : residual_fwd_kernel<false>, dim3(grid(n)),
                              dim3(kThreads), 0, n, a, b, y);  // PDL unless LOCKSTEP_DECODE_PDL=0
  check_launch("residual_fwd");
}

void add_into(std::size_t n, float* acc, const float* x) {
  if (n == 0) return;
  trace::launched("add_into");
  add_into_kernel<<<grid(n), kThreads>>>(n, acc, x);
  check_launch("add_into");
}

}  // namespace lockstep::cuda::launch
