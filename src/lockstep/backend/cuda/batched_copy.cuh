// A CTA's copy of global memory into shared memory (or registers) with many
// loads in flight per thread. A plain loop `dst[i] = src[i]` may wait on each
// load in turn: the compiler cannot prove that a load through a generic
// pointer does not alias the shared store before it, so it keeps them in
// order. Here each thread issues B loads into registers, then does B stores.
#pragma once

#include <cstddef>

namespace lockstep::cuda::detail {

// For i = first, first + stride, ... < n (each thread its own first: its index
// in the CTA; stride: the CTA's threads): store(i, load(i)), B loads at a time.
template <int B, class T, class Load, class Store>
__device__ __forceinline__ void batched_copy(std::size_t n, std::size_t first, std::size_t stride, Load load,
                                             Store store) {
  for (std::size_t i0 = first; i0 < n; i0 += B * stride) {
    T r[B] = {};
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const std::size_t i = i0 + b * stride;
      if (i < n) r[b] = load(i);
    }
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const std::size_t i = i0 + b * stride;
      if (i < n) store(i, r[b]);
    }
  }
}

}  // namespace lockstep::cuda::detail
