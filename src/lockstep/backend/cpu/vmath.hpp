// Elementary functions over arrays, bit for bit num::exp / num::tanh /
// num::sigmoid (num/elementary.hpp), for the CPU kernels' hot loops (softmax
// and cross-entropy exponentials, GELU's tanh, SwiGLU's sigmoid).
//
// With AVX-512 the array is processed 16 lanes at a time by a lane-wise copy
// of the scalar function's fixed sequence of correctly rounded primitives
// (the same mul, add, sub, fma, division and exponent-bit steps, in the same
// order: no step is reassociated, fused or approximated), so each lane gets
// exactly the scalar result. The scalar function's rare paths (NaN, ±inf,
// overflow, results that underflow to subnormals, tanh's tiny and saturated
// arguments) are not copied: lanes that need them are recomputed by the
// scalar function itself. Without AVX-512 the scalar function runs.
// tests/model/cpu_vmath_test.cpp compares them on a sweep of every 61st float
// plus the boundaries.
#pragma once

#include <cstddef>

namespace lockstep::cpu {

// y[i] = num::exp(x[i]), i < n (y may alias x).
void exp_n(const float* x, float* y, std::size_t n);
// y[i] = num::tanh(x[i]), i < n (y may alias x).
void tanh_n(const float* x, float* y, std::size_t n);
// y[i] = num::sigmoid(x[i]), i < n (y may alias x).
void sigmoid_n(const float* x, float* y, std::size_t n);
// True when the lane-wise (AVX-512) versions are compiled in.
bool vmath_vectorized();

}  // namespace lockstep::cpu
