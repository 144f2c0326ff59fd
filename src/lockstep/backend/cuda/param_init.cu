// The parameters' initialization on the device (param_init_launch.hpp): one
// thread per Box–Muller pair, the host fill_normal's expression for both of
// its elements.
#include <cstddef>
#include <cstdint>

#include "lockstep/backend/cuda/canonical_warp.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/param_init_launch.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/rng.hpp"

namespace lockstep::cuda::launch {
namespace {

constexpr unsigned kThreads = 256;

__global__ void fill_normal_kernel(float* out, std::size_t n, std::uint64_t seed, std::uint64_t stream, float mean,
                                   float stddev) {
  const std::size_t pairs = (n + 1) / 2;
  for (std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const num::rng::Block blk = num::rng::block(seed, stream, p / 2);
    const std::uint32_t w = static_cast<std::uint32_t>(2 * (p % 2));
    const num::rng::NormalPair z = num::rng::normal_pair(blk.w[w], blk.w[w + 1]);
    out[2 * p] = num::fma_rn(stddev, z.even, mean);
    if (2 * p + 1 < n) out[2 * p + 1] = num::fma_rn(stddev, z.odd, mean);
  }
}

}  // namespace

void fill_normal(float* out, std::size_t n, std::uint64_t seed, std::uint64_t stream, float mean, float stddev) {
  if (n == 0) return;
  trace::launched("fill_normal");
  fill_normal_kernel<<<detail::blocks_for((n + 1) / 2, kThreads, 132 * 64), kThreads>>>(out, n, seed, stream, mean,
                                                                                        stddev);
  check_launch("fill_normal");
}

}  // namespace lockstep::cuda::launch
