// The engine's glue on the device: the loss sum and fills.
#include "lockstep/backend/cuda/core_launch.hpp"

#include <cstring>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/num/reduce.hpp"

namespace lockstep::cuda::launch {
namespace {

// One thread: the loss vector is batch·seq long (tens of thousands at most);
// the header's own code gives the CPU's bits by construction.
__global__ void canonical_sum_kernel(const float* x, std::size_t n, float* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *out = num::reduce::sum(x, n);
}

}  // namespace

void canonical_sum(const float* x, std::size_t n, float* out) {
  canonical_sum_kernel<<<1, 1>>>(x, n, out);
  check_launch("canonical_sum");
}

void fill(float* x, std::size_t n, float value) {
  std::uint32_t w;
  std::memcpy(&w, &value, 4);
  fill_words(x, w, n);
}

}  // namespace lockstep::cuda::launch
