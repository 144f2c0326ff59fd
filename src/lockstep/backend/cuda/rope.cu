// RoPE on [B, T, H, Dh]: one thread per (token row, head, pair j), the
// rotation of ops::Rope::rotate with the cos/sin table computed on the host by
// the spec itself (ops::Rope::table<float>, uploaded once per configuration).
#include <cstddef>

#include "lockstep/backend/cuda/canonical_warp.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/pointwise_launch.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"

namespace lockstep::cuda::launch {
namespace {

__global__ void rope_kernel(std::size_t rows, std::size_t seq, std::size_t heads, std::size_t head_dim,
                            bool interleaved, const float* tab, const float* x, float* y, bool inverse) {
  const std::size_t half = head_dim / 2;
  const std::size_t total = rows * heads * half;
  const float* cos_tab = tab;
  const float* sin_tab = tab + seq * half;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t j = i % half;
    const std::size_t vec = i / half;  // (row, head)
    const std::size_t t = (vec / heads) % seq;
    const std::size_t base = vec * head_dim;
    const std::size_t ia = base + (interleaved ? 2 * j : j);
    const std::size_t ib = base + (interleaved ? 2 * j + 1 : j + half);
    const float c = cos_tab[t * half + j];
    const float s0 = sin_tab[t * half + j];
    const float s = inverse ? -s0 : s0;
    const float a = x[ia], b = x[ib];
    y[ia] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    y[ib] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  }
}

}  // namespace

void rope(std::size_t batch, std::size_t seq, std::size_t heads, std::size_t head_dim, bool interleaved,
          const float* tab, const float* x, float* y, bool inverse) {
  const std::size_t total = batch * seq * heads * (head_dim / 2);
  if (total == 0) return;
  trace::launched(inverse ? "rope (inverse)" : "rope (forward)");
  rope_kernel<<<detail::blocks_for(total, 256, 132 * 64), 256>>>(batch * seq, seq, heads, head_dim, interleaved,
                                                                 tab, x, y, inverse);
  check_launch("rope");
}

}  // namespace lockstep::cuda::launch
