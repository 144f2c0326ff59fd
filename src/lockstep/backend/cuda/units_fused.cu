// The fused units paths' own kernels (units_fused_launch.hpp): the unit
// epilogue on a column range of a wider product, and the MLP chain's
// epilogue + bias + GELU + per-row quantization in one pass. Every value is the
// expression of the unfused kernel it replaces (quant.cu's unit_epilogue and
// row_codes, pointwise.cu's gelu_fwd), with the same _rn intrinsics, so no
// contraction can creep in; tests/cuda/units_fused_cuda_test.cpp compares them
// with the unfused kernels and with the CPU bit for bit.
#include <cstdint>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/backend/cuda/units_fused_launch.hpp"
#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"

namespace lockstep::cuda::launch {
namespace {

namespace red = num::reduce;
int g_mutant = 0;  // set_units_fused_mutant

__device__ __forceinline__ float max2(float a, float b) { return a > b ? a : b; }  // ops::max2
__device__ __forceinline__ float min2(float a, float b) { return a < b ? a : b; }  // ops::min2

__global__ void __launch_bounds__(256) epilogue_cols_kernel(const std::int32_t* __restrict__ acc, std::size_t ld,
                                                            const float* __restrict__ sa,
                                                            const float* __restrict__ sb,
                                                            const float* __restrict__ bias, std::size_t I,
                                                            std::size_t J, float* __restrict__ out, int mut) {
  const std::size_t n = I * J;
  for (std::size_t t = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t i = t / J, j = t - i * J;
    float v = __fmul_rn(__fmul_rn(__int2float_rn(acc[i * ld + j]), sa[i]), sb[j]);
    if (bias != nullptr && !(mut == 2 && j + 1 == J)) v = __fadd_rn(v, bias[j]);
    out[t] = v;
  }
}

__global__ void __launch_bounds__(256) mlp_gelu_rows_kernel(const std::int32_t* __restrict__ acc,
                                                            const float* __restrict__ sa,
                                                            const float* __restrict__ sb,
                                                            const float* __restrict__ b1, std::size_t N,
                                                            std::size_t F, GeluConstants k, float floor_x,
                                                            float* __restrict__ fc, float* __restrict__ ts,
                                                            float* __restrict__ act, std::int8_t* __restrict__ codes,
                                                            float* __restrict__ step, int mut) {
  const std::size_t n = static_cast<std::size_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  const unsigned lane = threadIdx.x & 31;
  if (n >= N) return;
  const std::int32_t* ar = acc + n * F;
  float* fr = fc + n * F;
  float* tr = ts + n * F;
  float* yr = act + n * F;
  const float s_n = sa[n];
  // max |act| under reduce::max's rules, written as quant.cu's row_codes
  // writes it (the largest order key, NaN apart). Not shared with it: row_codes
  // is a gated kernel whose code generation stays as it is.
  std::int32_t key = red::detail::order_key(__int_as_float(static_cast<int>(0xFF800000u)));  // -inf
  std::uint32_t mag = 0;
  for (std::size_t j = lane; j < F; j += 32) {
    const float v = __fadd_rn(__fmul_rn(__fmul_rn(__int2float_rn(ar[j]), s_n), sb[j]), b1[j]);
    fr[j] = v;
    const float x2 = __fmul_rn(v, v);
    const float x3 = __fmul_rn(x2, v);
    const float t = num::tanh(__fmul_rn(k.k0, num::fma_rn(k.kc, x3, v)));
    tr[j] = t;
    const float h = __fmul_rn(0.5f, v);
    const float y = mut == 1 ? __fmaf_rn(h, t, h) : __fmul_rn(h, __fadd_rn(1.0f, t));
    yr[j] = y;
    const float a = fabsf(y);
    const std::int32_t kv = red::detail::order_key(a);
    key = kv > key ? kv : key;
    const std::uint32_t mv = num::bits_of(a) & 0x7FFFFFFFu;
    mag = mv > mag ? mv : mag;
  }
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) {
    const std::int32_t ko = __shfl_xor_sync(0xFFFFFFFFu, key, off);
    const std::uint32_t mo = __shfl_xor_sync(0xFFFFFFFFu, mag, off);
    key = ko > key ? ko : key;
    mag = mo > mag ? mo : mag;
  }
  const float mx = mag > 0x7F800000u ? num::float_of(red::kCanonicalNaN) : red::detail::from_order_key(key);
  const float m = max2(mx, floor_x);
  const float inv = __fdiv_rn(127.0f, m);
  std::int8_t* cr = codes + n * F;
  for (std::size_t j = lane; j < F; j += 32)  // this lane's own act values, written above
    cr[j] = static_cast<std::int8_t>(min2(max2(floorf(__fadd_rn(__fmul_rn(yr[j], inv), 0.5f)), -127.0f), 127.0f));
  if (lane == 0) step[n] = __fdiv_rn(m, 127.0f);
}

}  // namespace

void set_units_fused_mutant(int m) { g_mutant = m; }
int units_fused_mutant() { return g_mutant; }

void unit_epilogue_cols(const std::int32_t* acc, std::size_t ld, const float* sa, const float* sb, const float* bias,
                        std::size_t I, std::size_t J, float* out) {
  const std::size_t n = I * J;
  if (n == 0) return;
  const std::size_t blocks = (n + 255) / 256;
  trace::launched(bias != nullptr ? "unit_epilogue_cols (bias)" : "unit_epilogue_cols");
  epilogue_cols_kernel<<<static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8), 256>>>(acc, ld, sa, sb, bias,
                                                                                              I, J, out, g_mutant);
  check_launch("unit_epilogue_cols");
}

void mlp_gelu_rows(const std::int32_t* acc, const float* sa, const float* sb, const float* b1, std::size_t N,
                   std::size_t F, GeluConstants k, float floor_x, float* fc, float* ts, float* act,
                   std::int8_t* codes, float* step) {
  if (N == 0) return;
  trace::launched("mlp_gelu_rows (epilogue, bias, GELU, row codes)");
  mlp_gelu_rows_kernel<<<static_cast<unsigned>((N + 7) / 8), 256>>>(acc, sa, sb, b1, N, F, k, floor_x, fc, ts, act,
                                                                    codes, step, g_mutant);
  check_launch("mlp_gelu_rows");
}

}  // namespace lockstep::cuda::launch
