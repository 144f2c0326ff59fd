// Launchers of the optimizer kernels (optim.cu): the trainer's host loop of
// train/optim.cpp, on the device, with the same expressions.
#pragma once

#include <cstddef>

namespace lockstep::train {
struct AdamWScalars;
}

namespace lockstep::cuda::launch {

// x[i] = x[i] * s for i < n.
void scale(float* x, std::size_t n, float s);
// The canonical sum of squares of x[0..n) (num::reduce::sumsq) into *out:
// per 4096-chunk partials into `partials` (ceil(n/4096) floats, n > 0), then
// their canonical sum — the recursion of num/reduce.hpp, bit for bit.
void sumsq(const float* x, std::size_t n, float* partials, float* out);
// g' = clip < 1 ? g * clip : g, then train::adamw_element(p, g', m, v, s, decay)
// for each element (clip >= 1 leaves g as it is, as clip_grad_norm does).
void adamw(float* p, const float* g, float* m, float* v, std::size_t n, float clip, const train::AdamWScalars& s,
           bool decay);

}  // namespace lockstep::cuda::launch
