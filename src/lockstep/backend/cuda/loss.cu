// Cross-entropy over the vocabulary, forward and backward.
//
// Forward: a block of 8 warps per row. m = max(z) under the reductions' total
// order (order-free: any fold order is the CPU's); then the canonical sum of
// e_j = exp(z_j - m): warp w computes the partials of chunks w, w+8, ... (each
// chunk's lanes and tree exactly as num/reduce.hpp), the chunk partials meet in
// shared memory and warp 0 sums them by the same rule. lse = m + log(sum).
// Backward: element-wise, dz_j = (j == t ? p - 1 : p) · dloss with
// p = exp(z_j - lse); ignored rows (t < 0) get +0.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "lockstep/backend/cuda/canonical_warp.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/pointwise_launch.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"

namespace lockstep::cuda::launch {
namespace {

namespace rd = num::reduce;
constexpr unsigned kThreads = 256;
constexpr unsigned kWarps = kThreads / 32;
constexpr std::size_t kMaxChunks = rd::kChunk;  // vocab <= 4096² (one level of chunk partials)

__global__ void __launch_bounds__(kThreads) ce_fwd_kernel(std::size_t rows, std::size_t V, const float* logits,
                                                          const Index* targets, float* loss, float* lse) {
  extern __shared__ float partial[];  // one per chunk
  __shared__ std::int32_t warp_key[kWarps];
  __shared__ std::uint32_t warp_mag[kWarps];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x & 31u;
  const std::size_t m_chunks = V <= rd::kChunk ? 1 : (V + rd::kChunk - 1) / rd::kChunk;
  for (std::size_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* z = logits + row * V;
    detail::MaxFold mf;
    for (std::size_t j = threadIdx.x; j < V; j += kThreads) mf.add(z[j]);
    mf.warp_merge();
    if (lane == 0) {
      warp_key[warp] = mf.key;
      warp_mag[warp] = mf.mag;
    }
    __syncthreads();
    detail::MaxFold all;
    for (unsigned w = 0; w < kWarps; ++w) {
      detail::MaxFold o;
      o.key = warp_key[w];
      o.mag = warp_mag[w];
      all.merge(o);
    }
    const float m = all.value();
    for (std::size_t k = warp; k < m_chunks; k += kWarps) {
      const std::size_t base = k * rd::kChunk;
      const std::size_t len = V - base < rd::kChunk ? V - base : rd::kChunk;
      const float p = detail::warp_chunk(
          base, len, [z, m](float acc, std::size_t i) { return __fadd_rn(acc, num::exp(__fsub_rn(z[i], m))); });
      if (lane == 0) partial[k] = p;
    }
    __syncthreads();
    if (warp == 0) {
      float s;
      if (m_chunks == 1) {
        s = partial[0];
      } else {
        float acc = 0.0f;  // the chunk partials, summed as one chunk (m_chunks <= 4096)
        for (std::size_t k = lane; k < m_chunks; k += 32) acc = __fadd_rn(acc, partial[k]);
        s = detail::lane_tree(acc);
      }
      s = rd::canonical_nan(s);
      if (lane == 0) {
        const float l = __fadd_rn(m, num::log(s));
        lse[row] = l;
        const Index t = targets[row];
        float out = 0.0f;
        if (t >= 0)
          out = static_cast<std::size_t>(t) < V ? __fsub_rn(l, z[static_cast<std::size_t>(t)])
                                                : num::float_of(rd::kCanonicalNaN);
        loss[row] = out;
      }
    }
    __syncthreads();  // shared memory is reused by the next row
  }
}

// Blocks of 256 threads over (row, 1024-column segment); rows on the grid's y
// (strided past 65535).
constexpr unsigned kSeg = 4 * kThreads;

__global__ void ce_bwd_kernel(std::size_t rows, std::size_t V, const float* logits, const Index* targets,
                              const float* lse, const float* dloss, float* dlogits) {
  for (std::size_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const std::size_t j0 = static_cast<std::size_t>(blockIdx.x) * kSeg;
    const Index t = targets[row];
    const float* z = logits + row * V;
    float* dz = dlogits + row * V;
    if (t < 0) {
      for (std::size_t j = j0 + threadIdx.x; j < V && j < j0 + kSeg; j += kThreads) dz[j] = 0.0f;
      continue;
    }
    const std::size_t tt = static_cast<std::size_t>(t);
    const float l = lse[row], dl = dloss[row];
    for (std::size_t j = j0 + threadIdx.x; j < V && j < j0 + kSeg; j += kThreads) {
      const float p = num::exp(__fsub_rn(z[j], l));
      dz[j] = __fmul_rn(j == tt ? __fsub_rn(p, 1.0f) : p, dl);
    }
  }
}

}  // namespace

void ce_fwd(std::size_t rows, std::size_t vocab, const float* logits, const Index* targets, float* loss,
            float* lse) {
  if (rows == 0) return;
  const std::size_t m_chunks = vocab <= rd::kChunk ? 1 : (vocab + rd::kChunk - 1) / rd::kChunk;
  if (m_chunks > kMaxChunks) throw std::invalid_argument("ce_fwd: vocabulary larger than 4096² on the device");
  const unsigned blocks = static_cast<unsigned>(rows < 1u << 20 ? rows : 1u << 20);
  trace::launched("ce_fwd");
  ce_fwd_kernel<<<blocks, kThreads, m_chunks * sizeof(float)>>>(rows, vocab, logits, targets, loss, lse);
  check_launch("ce_fwd");
}

void ce_bwd(std::size_t rows, std::size_t vocab, const float* logits, const Index* targets, const float* lse,
            const float* dloss, float* dlogits) {
  if (rows == 0 || vocab == 0) return;
  const std::size_t segs = (vocab + kSeg - 1) / kSeg;
  if (segs > 0x7FFFFFFF) throw std::invalid_argument("ce_bwd: vocabulary too large");
  const dim3 grid(static_cast<unsigned>(segs), static_cast<unsigned>(rows < 65535 ? rows : 65535));
  trace::launched("ce_bwd");
  ce_bwd_kernel<<<grid, kThreads>>>(rows, vocab, logits, targets, lse, dloss, dlogits);
  check_launch("ce_bwd");
}

}  // namespace lockstep::cuda::launch
