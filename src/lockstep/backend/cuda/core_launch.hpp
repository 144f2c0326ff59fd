// Launchers of the engine-glue kernels (core.cu), callable from g++ code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

// *out = num::reduce::sum(x, n) (the canonical chunked lane tree), on the device.
void canonical_sum(const float* x, std::size_t n, float* out);
// x[i] = value for i < n.
void fill(float* x, std::size_t n, float value);

}  // namespace lockstep::cuda::launch
