// Device helpers of the pointwise kernel family: the canonical reductions of
// num/reduce.hpp computed by one warp (docs/NUMERICS.md, "Canonical
// reductions"). Lane j folds elements j, j+32, ... of each 4096-chunk from +0
// in order; the 32 partials meet in the shuffle-down tree
// (p[j] = p[j] + p[j+off], off = 16, 8, 4, 2, 1); a vector of several chunks
// sums its chunk partials by the same rule (lane k mod 32 folds partial k as
// it arrives). tests/reduce/reduce_gpu.cu is the proven model of this.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"

namespace lockstep::cuda::detail {

namespace rd = num::reduce;
inline constexpr unsigned kFullMask = 0xffffffffu;

// reduce.hpp's lane_tree on the warp's 32 accumulators; the result in every lane.
__device__ __forceinline__ float lane_tree(float acc) {
  for (int off = 16; off >= 1; off /= 2) acc = __fadd_rn(acc, __shfl_down_sync(kFullMask, acc, off));
  return __shfl_sync(kFullMask, acc, 0);
}

// One chunk [base, base + len), len <= kChunk: step(acc, i) folds element i.
template <class Step>
__device__ __forceinline__ float warp_chunk(std::size_t base, std::size_t len, Step step) {
  const unsigned lane = threadIdx.x & 31u;
  float acc = 0.0f;
  for (std::size_t t = lane; t < len; t += 32) acc = step(acc, base + t);
  return lane_tree(acc);
}

// reduce.hpp's sum_like(n, step) by one warp (all 32 lanes call it; every lane
// gets the result). n <= kChunk² (the host checks).
template <class Step>
__device__ float warp_sum_like(std::size_t n, Step step) {
  if (n <= rd::kChunk) return rd::canonical_nan(warp_chunk(0, n, step));
  const unsigned lane = threadIdx.x & 31u;
  const std::size_t m = (n + rd::kChunk - 1) / rd::kChunk;
  float acc2 = 0.0f;
  for (std::size_t k = 0; k < m; ++k) {
    const std::size_t base = k * rd::kChunk;
    const float p = warp_chunk(base, n - base < rd::kChunk ? n - base : rd::kChunk, step);
    if (lane == k % 32) acc2 = __fadd_rn(acc2, p);
  }
  return rd::canonical_nan(lane_tree(acc2));
}

// max under reduce.hpp's total order (-0 < +0; any NaN gives the canonical
// NaN): order-free, so any fold order is the CPU's.
struct MaxFold {
  std::int32_t key = rd::detail::order_key(num::float_of(0xFF800000u));  // -inf
  std::uint32_t mag = 0;
  __device__ void add(float v) {
    const std::int32_t k = rd::detail::order_key(v);
    key = k > key ? k : key;
    const std::uint32_t m = num::bits_of(v) & 0x7FFFFFFFu;
    mag = m > mag ? m : mag;
  }
  __device__ void merge(const MaxFold& o) {
    key = o.key > key ? o.key : key;
    mag = o.mag > mag ? o.mag : mag;
  }
  __device__ void warp_merge() {
    for (int off = 16; off >= 1; off /= 2) {
      MaxFold o;
      o.key = __shfl_xor_sync(kFullMask, key, off);
      o.mag = __shfl_xor_sync(kFullMask, mag, off);
      merge(o);
    }
  }
  __device__ float value() const {
    return mag > 0x7F800000u ? num::float_of(rd::kCanonicalNaN) : rd::detail::from_order_key(key);
  }
};

// Grid sizes for grid-stride loops.
inline unsigned blocks_for(std::size_t n, unsigned threads, std::size_t cap = 65536) {
  std::size_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b < cap ? b : cap);
}

}  // namespace lockstep::cuda::detail
