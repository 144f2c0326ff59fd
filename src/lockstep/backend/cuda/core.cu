// The engine's glue on the device: the mean loss and fills.
#include "lockstep/backend/cuda/core_launch.hpp"

#include <cstring>
#include <stdexcept>

#include "lockstep/backend/cuda/canonical_warp.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/reduce.hpp"

namespace lockstep::cuda::launch {
namespace {

// One warp (canonical_warp.cuh: the CPU's chunked lane tree, lane by lane):
// the loss vector is batch·seq long (tens of thousands at most).
__global__ void canonical_mean_kernel(const float* x, std::size_t n, float divisor, float* out) {
  const float sum = detail::warp_sum_like(n, [x](float acc, std::size_t i) { return __fadd_rn(acc, x[i]); });
  if (threadIdx.x == 0) *out = divisor == 0.0f ? 0.0f : (divisor == 1.0f ? sum : __fdiv_rn(sum, divisor));
}

}  // namespace

void canonical_mean(const float* x, std::size_t n, float divisor, float* out) {
  if (n > num::reduce::kChunk * num::reduce::kChunk)
    throw std::invalid_argument("canonical_mean: more than 4096² values");
  trace::launched("canonical_mean");
  canonical_mean_kernel<<<1, 32>>>(x, n, divisor, out);
  check_launch("canonical_mean");
}

void fill(float* x, std::size_t n, float value) {
  std::uint32_t w;
  std::memcpy(&w, &value, 4);
  fill_words(x, w, n);
}

}  // namespace lockstep::cuda::launch
