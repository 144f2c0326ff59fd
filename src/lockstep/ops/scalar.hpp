// The scalar layer the op specifications are written in: Math<T> supplies the
// elementary functions, fma and the reductions for T = double (the checking
// arithmetic) and T = float (the canonical execution arithmetic).
//
// Every op in src/lockstep/ops/ is one template over T. Instantiated with
// float it IS the canonical expression of the numeric contract (DESIGN.md §1),
// which the GPU backend must reproduce bit for bit:
//   * elementary functions are lockstep's own (num/elementary.hpp), never libm;
//   * row reductions over a feature dimension (norm statistics, softmax max and
//     sum, logsumexp) use the canonical chunked-lane order (num/reduce.hpp);
//   * matrix-product cells use the canonical GEMM order: acc = +0, then
//     acc = fma(a[k], b[k], acc) for k ascending (dot_seq);
//   * add, sub, mul, div, sqrt, floor, min/max are the correctly rounded
//     IEEE-754 binary32 primitives (host: -ffp-contract=off).
// Instantiated with double the same code is the textbook mathematics to ~1e-16,
// which the finite-difference checker differentiates (src/lockstep/ad/).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>

#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"

namespace lockstep::ops {

template <class T>
struct Math;

// double: the reference arithmetic for checking. libm is fine here (its
// error, < 1 double ulp, is ~1e-16 relative: far below every tolerance), and
// the reductions are plain left-to-right loops.
template <>
struct Math<double> {
  static constexpr const char* name = "double";
  static double fma(double a, double b, double c) { return std::fma(a, b, c); }
  static double sqrt(double x) { return std::sqrt(x); }
  static double rsqrt(double x) { return 1.0 / std::sqrt(x); }
  static double exp(double x) { return std::exp(x); }
  static double log(double x) { return std::log(x); }
  static double tanh(double x) { return std::tanh(x); }
  static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
  static double sin(double x) { return std::sin(x); }
  static double cos(double x) { return std::cos(x); }
  static double pow(double x, double y) { return std::pow(x, y); }
  static double floor(double x) { return std::floor(x); }
  static double abs(double x) { return std::fabs(x); }

  static double sum(const double* x, std::size_t n) {
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s += x[i];
    return s;
  }
  static double sumsq(const double* x, std::size_t n) {
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s = std::fma(x[i], x[i], s);
    return s;
  }
  static double dot(const double* x, const double* y, std::size_t n) {
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s = std::fma(x[i], y[i], s);
    return s;
  }
  static double max(const double* x, std::size_t n) {
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
    return m;
  }
  // One matrix-product cell: acc = +0; acc = fma(a[i*sa], b[i*sb], acc), i ascending.
  static double dot_seq(const double* a, std::ptrdiff_t sa, const double* b, std::ptrdiff_t sb,
                        std::size_t k) {
    double acc = 0.0;
    for (std::size_t i = 0; i < k; ++i) {
      const auto ii = static_cast<std::ptrdiff_t>(i);
      acc = std::fma(a[ii * sa], b[ii * sb], acc);
    }
    return acc;
  }
};

// float: the canonical arithmetic. Nothing here may call libm's float
// functions (their results differ between libraries and devices).
template <>
struct Math<float> {
  static constexpr const char* name = "float";
  static float fma(float a, float b, float c) { return num::fma_rn(a, b, c); }
  static float sqrt(float x) { return std::sqrt(x); }  // correctly rounded primitive
  static float rsqrt(float x) { return num::rsqrt(x); }
  static float exp(float x) { return num::exp(x); }
  static float log(float x) { return num::log(x); }
  static float tanh(float x) { return num::tanh(x); }
  static float sigmoid(float x) { return num::sigmoid(x); }
  static float sin(float x) { return num::sin(x); }
  static float cos(float x) { return num::cos(x); }
  static float pow(float x, float y) { return num::pow(x, y); }
  static float floor(float x) { return std::floor(x); }  // exact
  static float abs(float x) { return std::fabs(x); }     // exact (sign bit)

  static float sum(const float* x, std::size_t n) { return num::reduce::sum(x, n); }
  static float sumsq(const float* x, std::size_t n) { return num::reduce::sumsq(x, n); }
  static float dot(const float* x, const float* y, std::size_t n) {
    return num::reduce::dot(x, y, n);
  }
  static float max(const float* x, std::size_t n) { return num::reduce::max(x, n); }
  static float dot_seq(const float* a, std::ptrdiff_t sa, const float* b, std::ptrdiff_t sb,
                       std::size_t k) {
    return num::reduce::dot_seq(a, sa, b, sb, k);
  }
};

// max(a, b) for the quantizers' clamps and the attention running maximum:
// a plain comparison-select (no NaN can reach it on a checked path).
template <class T>
inline T max2(T a, T b) {
  return a > b ? a : b;
}
template <class T>
inline T min2(T a, T b) {
  return a < b ? a : b;
}

}  // namespace lockstep::ops
