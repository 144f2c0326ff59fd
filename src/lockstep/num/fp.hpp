// The float primitives every canonical expression is written in, usable from
// host code and from CUDA device code alike (one source, identical bits).
//
// Host code is compiled with -ffp-contract=off and device code with
// -fmad=false, so `a * b + c` is always two roundings; an fma happens only
// where the expression calls fma_rn.
#pragma once

#include <cstdint>
#include <cstring>
#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

#if defined(__CUDACC__)
#define LOCKSTEP_HD __host__ __device__
#else
#define LOCKSTEP_HD
#endif

namespace lockstep::num {

// The raw IEEE-754 binary32 bit pattern of x, and back.
LOCKSTEP_HD inline std::uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

LOCKSTEP_HD inline float float_of(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// Fused multiply-add, one rounding (round to nearest even).
LOCKSTEP_HD inline float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

}  // namespace lockstep::num
