// ReLU²·up and the FFN sub-norm with its activation codes, in one launch
// (act_norm_launch.hpp states the contract): the BitNet FFN's
// h = ReLU²(gate)·up, then RMSNorm of h and the int8 codes of that for the
// down projection. A decode pass launched these as relu2mul_fwd (pointwise.cu)
// and rmsnorm_quantize_i8 (norm.cu); here a CTA a row computes each element of
// h as relu2mul_fwd does (r = max2(gate, 0), h = (r·r)·up: two __fmul_rn)
// while it stages the row — h also written out, for whoever reads it — and
// then runs rmsnorm_quantize_i8's own steps on the staged row
// (row_cta.cuh: norm_quantize_staged, the very function norm.cu's kernel
// calls). The same float ops on the same values in the same order: the bits
// of the two launches. CPU reference: ops::ReluSqMul::forward, then the CPU's
// RMSNorm and ops::quantize_rows (tests/cuda/act_norm_emu_test.cpp runs this
// kernel on the host fiber emulator against them).
//
// Written with the LS_* hooks (all shared memory in one dynamic buffer) so
// that the emulator (tests/cuda/cuda_host_emu.hpp) runs it.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "lockstep/backend/cuda/act_norm_launch.hpp"
#include "lockstep/backend/cuda/batched_copy.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/ls_hooks.cuh"
#include "lockstep/backend/cuda/pdl_device.cuh"
#if !defined(LS_HOST_EMULATOR)
#include "lockstep/backend/cuda/pdl_launch.cuh"  // LS_LAUNCH_PDL
#endif
#include "lockstep/backend/cuda/row_cta.cuh"
#include "lockstep/backend/cuda/trace_launch.hpp"

namespace lockstep::cuda::launch {
namespace {

namespace rc = cuda::detail::row_cta;

struct ActNormArgs {
  std::size_t D;
  float eps;
  const float* gate;
  const float* up;
  float* h;
  const float* w;
  float* y;
  float* rstd;
  float floor_x;
  std::int8_t* codes;
  float* step;
  bool gate_unclamped;  // the planted bug
};

// relu2mul_fwd's element (pointwise.cu): r = max2(gate, 0), (r·r)·up.
__device__ __forceinline__ float relu2mul(float g, float u, bool unclamped) {
  const float r = unclamped ? g : rc::max2(g, 0.0f);
  return __fmul_rn(__fmul_rn(r, r), u);
}

// The shared floats: the staged row (D rounded up to 4), then partial
// (kWarps·4), s_rs (padded to 4), s_key and s_mag (kWarps each).
std::size_t smem_floats(std::size_t D) { return (D + 3) / 4 * 4 + rc::kWarps * 4 + 4 + 2 * rc::kWarps; }

template <bool Vec>
__global__ void __launch_bounds__(rc::kThreads) relu2mul_rmsnorm_quantize_kernel(const ActNormArgs a) {
  pdl::pdl_trigger();                              // PDL (pdl_device.cuh): the next kernel may launch now;
  pdl::pdl_prefetch_l2(a.w, a.D * sizeof(float));  // the norm weights (read-only) towards the L2;
  pdl::pdl_wait();                                 // gate, up and every write after the wait
  LS_SMEM(smem);
  const std::size_t D = a.D, row = blockIdx.x;
  float4* row_smem = reinterpret_cast<float4*>(smem);
  float* partial = smem + (D + 3) / 4 * 4;
  float* s_rs = partial + rc::kWarps * 4;
  auto* s_key = reinterpret_cast<std::int32_t*>(s_rs + 4);
  auto* s_mag = reinterpret_cast<std::uint32_t*>(s_key + rc::kWarps);
  const unsigned tid = threadIdx.x;
  const bool unclamped = a.gate_unclamped;
  // Stage h (= relu2mul_fwd's output) into shared memory and write it out: each
  // thread its elements i ≡ tid mod kThreads, as stage_row places them.
  if constexpr (Vec) {
    const float4* g4 = reinterpret_cast<const float4*>(a.gate + row * D);
    const float4* u4 = reinterpret_cast<const float4*>(a.up + row * D);
    float4* h4 = reinterpret_cast<float4*>(a.h + row * D);
    cuda::detail::batched_copy<4, float4>(
        D / 4, tid, rc::kThreads,
        [g4, u4, unclamped](std::size_t v) {
          const float4 g = g4[v], u = u4[v];
          return make_float4(relu2mul(g.x, u.x, unclamped), relu2mul(g.y, u.y, unclamped),
                             relu2mul(g.z, u.z, unclamped), relu2mul(g.w, u.w, unclamped));
        },
        [row_smem, h4](std::size_t v, float4 b) {
          row_smem[v] = b;
          h4[v] = b;
        });
  } else {
    const float* g = a.gate + row * D;
    const float* u = a.up + row * D;
    float* hr = a.h + row * D;
    float* xs = smem;
    cuda::detail::batched_copy<8, float>(
        D, tid, rc::kThreads, [g, u, unclamped](std::size_t j) { return relu2mul(g[j], u[j], unclamped); },
        [xs, hr](std::size_t j, float b) {
          xs[j] = b;
          hr[j] = b;
        });
  }
  __syncthreads();
  // rmsnorm_quantize_i8 of the staged h (norm.cu's kernel after its staging).
  rc::norm_quantize_staged<Vec, false>(row_smem, D, a.eps, a.w, a.y + row * D, a.rstd + row, a.floor_x,
                                       a.codes + row * D, a.step + row, partial, s_rs, s_key, s_mag);
}

}  // namespace

bool act_norm_fused(std::size_t rows, std::size_t dim) {
  return rows > 0 && rows <= rc::kFewRows && dim > 0 && dim <= rc::kMaxDim;
}

void relu2mul_rmsnorm_quantize_i8(std::size_t rows, std::size_t dim, float eps, const float* gate, const float* up,
                                  float* h, const float* w, float* y, float* rstd, float floor_x, std::int8_t* codes,
                                  float* step, const ActNormOptions& options) {
  if (!act_norm_fused(rows, dim))
    throw std::invalid_argument("relu2mul_rmsnorm_quantize_i8: " + std::to_string(rows) + " rows of " +
                                std::to_string(dim) + ": outside the fused kernel's 1-32 rows of at most 8192");
  const auto aligned = [](const void* p, std::uintptr_t n) { return reinterpret_cast<std::uintptr_t>(p) % n == 0; };
  const bool vec = dim % 4 == 0 && aligned(gate, 16) && aligned(up, 16) && aligned(h, 16) && aligned(w, 16) &&
                   aligned(y, 16) && aligned(codes, 4);
  const ActNormArgs a{dim, eps, gate, up, h, w, y, rstd, floor_x, codes, step, options.gate_unclamped};
  const int bytes = static_cast<int>(smem_floats(dim) * sizeof(float));
  trace::launched(options.gate_unclamped ? "relu2mul_rmsnorm_quantize_i8 (a CTA a row, mutant)"
                  : vec                  ? "relu2mul_rmsnorm_quantize_i8 (a CTA a row, 16-byte)"
                                         : "relu2mul_rmsnorm_quantize_i8 (a CTA a row)");
  if (vec)
    LS_LAUNCH_PDL(relu2mul_rmsnorm_quantize_kernel<true>, dim3(static_cast<unsigned>(rows)), dim3(rc::kThreads),
                  bytes, a);
  else
    LS_LAUNCH_PDL(relu2mul_rmsnorm_quantize_kernel<false>, dim3(static_cast<unsigned>(rows)), dim3(rc::kThreads),
                  bytes, a);
  check_launch("relu2mul_rmsnorm_quantize_i8");
}

}  // namespace lockstep::cuda::launch
