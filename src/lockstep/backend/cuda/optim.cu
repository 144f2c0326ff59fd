// The optimizer step on the device (optim_launch.hpp). The chunk partials are
// the header's own chunk function (num/reduce.hpp), one thread per chunk; the
// partials are then summed by the header's single-row sum on one thread,
// which is the canonical recursion over chunk partials (see sum_like and
// sum_of: both levels cut into 4096-chunks and fold them with the same tree).
#include "lockstep/backend/cuda/optim_launch.hpp"

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/train/optim.hpp"

namespace lockstep::cuda::launch {
namespace {

namespace rd = num::reduce;

__global__ void scale_kernel(float* x, std::size_t n, float s) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = __fmul_rn(x[i], s);
}

__global__ void sumsq_chunks_kernel(const float* x, std::size_t n, float* partials) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t chunks = (n + rd::kChunk - 1) / rd::kChunk;
  if (k >= chunks) return;
  const float* base = x + k * rd::kChunk;
  partials[k] = rd::detail::chunk(rd::detail::chunk_len(n, k),
                                  [base](float acc, std::size_t i) { return num::fma_rn(base[i], base[i], acc); });
}

__global__ void sum_partials_kernel(const float* partials, std::size_t m, float* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *out = rd::sum(partials, m);
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, std::size_t n, float clip,
                             train::AdamWScalars s, bool decay) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float gi = clip < 1.0f ? __fmul_rn(g[i], clip) : g[i];
    train::adamw_element(p[i], gi, m[i], v[i], s, decay);
  }
}

unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

}  // namespace

void scale(float* x, std::size_t n, float s) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n), 256>>>(x, n, s);
  check_launch("scale");
}

void sumsq(const float* x, std::size_t n, float* partials, float* out) {
  // n <= 4096 is one chunk: the sum of its single partial is the partial
  // itself (+0 + p = p for p >= +0), NaN canonicalized, as sumsq does.
  const std::size_t chunks = n == 0 ? 1 : (n + rd::kChunk - 1) / rd::kChunk;
  sumsq_chunks_kernel<<<static_cast<unsigned>((chunks + 127) / 128), 128>>>(x, n, partials);
  check_launch("sumsq chunks");
  sum_partials_kernel<<<1, 1>>>(partials, chunks, out);
  check_launch("sumsq partials");
}

void adamw(float* p, const float* g, float* m, float* v, std::size_t n, float clip, const train::AdamWScalars& s,
           bool decay) {
  if (n == 0) return;
  adamw_kernel<<<blocks_for(n), 256>>>(p, g, m, v, n, clip, s, decay);
  check_launch("adamw");
}

}  // namespace lockstep::cuda::launch
