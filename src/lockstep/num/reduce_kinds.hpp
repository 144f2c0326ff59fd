// The five canonical reductions of reduce.hpp by name, in each of their three
// implementations (single-row, plain reference, threaded): the one dispatch
// that `lockstep verify` (reduce_verify.cpp) and the reduce tests both drive.
#pragma once

#include <array>
#include <cstddef>

#include "lockstep/num/reduce.hpp"

namespace lockstep::num::reduce::by_kind {

enum class Kind { sum, sumsq, dot, max, min };
inline constexpr std::array<Kind, 5> kKinds = {Kind::sum, Kind::sumsq, Kind::dot, Kind::max, Kind::min};

inline const char* kind_name(Kind k) {
  constexpr const char* names[] = {"sum", "sumsq", "dot", "max", "min"};
  return names[static_cast<int>(k)];
}

// y is read by dot only.
inline float fast(Kind k, const float* x, const float* y, std::size_t n) {
  switch (k) {
    case Kind::sum: return sum(x, n);
    case Kind::sumsq: return sumsq(x, n);
    case Kind::dot: return dot(x, y, n);
    case Kind::max: return max(x, n);
    case Kind::min: return min(x, n);
  }
  return 0.0f;
}
inline float reference(Kind k, const float* x, const float* y, std::size_t n) {
  switch (k) {
    case Kind::sum: return ref::sum(x, n);
    case Kind::sumsq: return ref::sumsq(x, n);
    case Kind::dot: return ref::dot(x, y, n);
    case Kind::max: return ref::max(x, n);
    case Kind::min: return ref::min(x, n);
  }
  return 0.0f;
}
inline float parallel(Kind k, const float* x, const float* y, std::size_t n, int threads) {
  switch (k) {
    case Kind::sum: return sum_parallel(x, n, threads);
    case Kind::sumsq: return sumsq_parallel(x, n, threads);
    case Kind::dot: return dot_parallel(x, y, n, threads);
    case Kind::max: return max_parallel(x, n, threads);
    case Kind::min: return min_parallel(x, n, threads);
  }
  return 0.0f;
}

}  // namespace lockstep::num::reduce::by_kind
