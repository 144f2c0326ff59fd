// Launchers of the engine-glue kernels (core.cu), callable from g++ code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

// *out = divisor == 0 ? +0 : num::reduce::sum(x, n) / divisor (the engine's
// mean loss: the canonical chunked lane tree, then the division correctly rounded, as on the host).
void canonical_mean(const float* x, std::size_t n, float divisor, float* out);
// x[i] = value for i < n.
void fill(float* x, std::size_t n, float value);

}  // namespace lockstep::cuda::launch
