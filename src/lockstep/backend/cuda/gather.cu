// gather_launch.hpp: one block row per segment, threads over its elements.
#include "lockstep/backend/cuda/gather_launch.hpp"

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"

namespace lockstep::cuda::launch {
namespace {

__global__ void gather_kernel(GatherList list, float* dst) {
  const GatherSegment s = list.seg[blockIdx.y];
  const std::size_t n = s.rows * s.row_elems;
  for (std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t r = t / s.row_elems, e = t % s.row_elems;
    dst[s.dst_offset + t] = s.src[r * s.row_stride + e * s.elem_stride];
  }
}

}  // namespace

void gather(const GatherList& list, float* dst) {
  if (list.n <= 0) return;
  trace::launched("audit gather");
  gather_kernel<<<dim3(32, static_cast<unsigned>(list.n)), 256>>>(list, dst);
  check_launch("audit gather");
}

}  // namespace lockstep::cuda::launch
