// ternary_expand_launch.hpp's kernels: element-wise, one grid-stride loop each,
// the expressions of ternary_code.cuh (quant.cu's ternary_codes writes the same
// ones). Written with the LS_* hooks so the host fiber emulator
// (tests/cuda/cuda_host_emu.hpp, tests/cuda/ternary_expand_emu_test.cpp) runs
// them against the CPU's quantizer and codes kernels bit for bit.
#include <cstddef>
#include <cstdint>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/ternary_code.cuh"
#include "lockstep/backend/cuda/ternary_expand_launch.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"

#ifndef LS_SMEM
#define LS_SMEM(name) extern __shared__ __align__(16) float name[]
#define LS_LAUNCH(kernel, grid, block, smem, ...) kernel<<<grid, block, smem>>>(__VA_ARGS__)
#define LS_SET_SMEM(kernel, bytes) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)
#endif

namespace lockstep::cuda::launch {

#if defined(LS_HOST_EMULATOR)
// The emulator test's planted bugs (read only under LS_HOST_EMULATOR):
// 1 the TERNARY2 field of element i + 1 read for element i; 2 the scale
// dropped from the expanded Ŵ; 3 the re-quantized code rounded down (+ 1/2 dropped).
inline int g_ternary_expand_plant = 0;
#endif

namespace {

constexpr unsigned kThreads = 256;

struct RequantizeArgs {
  const float* w;
  std::size_t n;
  const float* params;
  float* dequant;
};

__global__ void __launch_bounds__(kThreads) ternary_requantize_kernel(const RequantizeArgs a) {
  const float m = a.params[0], inv = a.params[1];
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float q = cuda::detail::ternary_code(a.w[i], inv);
#if defined(LS_HOST_EMULATOR)
    if (g_ternary_expand_plant == 3) q = fminf(fmaxf(floorf(__fmul_rn(a.w[i], inv)), -1.0f), 1.0f);
#endif
    a.dequant[i] = __fmul_rn(q, m);
  }
}

struct ExpandArgs {
  const std::uint8_t* bytes;
  std::size_t n;
  float scale;
  bool times_scale;
  float* out;
  float* scale_out;
};

__global__ void __launch_bounds__(kThreads) ternary2_expand_kernel(const ExpandArgs a) {
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (first == 0 && a.scale_out != nullptr) *a.scale_out = a.scale;
  for (std::size_t i = first; i < a.n; i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::size_t at = i;
#if defined(LS_HOST_EMULATOR)
    if (g_ternary_expand_plant == 1 && i + 1 < a.n) at = i + 1;
#endif
    const float q = cuda::detail::ternary2_code(a.bytes, at);
    bool times = a.times_scale;
#if defined(LS_HOST_EMULATOR)
    if (g_ternary_expand_plant == 2) times = false;
#endif
    a.out[i] = times ? __fmul_rn(q, a.scale) : q;
  }
}

unsigned grid_for(std::size_t n) {
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 4 ? blocks : 65535 * 4);
}

}  // namespace

void ternary_requantize(const float* w, std::size_t n, const float* params, float* dequant) {
  if (n == 0) return;
  trace::launched("ternary_requantize (the backward's Ŵ)");
  LS_LAUNCH(ternary_requantize_kernel, dim3(grid_for(n)), dim3(kThreads), 0, RequantizeArgs{w, n, params, dequant});
  check_launch("ternary_requantize");
}

void ternary2_expand(const std::uint8_t* bytes, std::size_t n, float scale, bool times_scale, float* out,
                     float* scale_out) {
  if (n == 0) return;  // BitLinear::validate refuses empty shapes
  trace::launched(times_scale ? "ternary2_expand (code · scale)" : "ternary2_expand (codes)");
  LS_LAUNCH(ternary2_expand_kernel, dim3(grid_for(n)), dim3(kThreads), 0,
            ExpandArgs{bytes, n, scale, times_scale, out, scale_out});
  check_launch("ternary2_expand");
}

}  // namespace lockstep::cuda::launch
