// Canonical reductions over float: sum, sum of squares, dot, max, min.
//
// The association order of every reduction is a function of the LENGTH ONLY
// (docs/NUMERICS.md, "Canonical reductions and products", states it exactly):
//
//   * a vector of n elements is cut into chunks of kChunk = 4096 elements
//     (the last one may be shorter; n <= 4096, including n == 0, is one chunk);
//   * inside a chunk, 32 lanes: lane j starts at the identity (+0 for sums,
//     -inf for max) and folds in elements j, j+32, j+64, ... of the chunk,
//     strictly in that order (sum: acc + x; sum of squares: fma(x, x, acc);
//     dot: fma(x, y, acc));
//   * the 32 lane partials combine by a fixed pairwise tree, the CUDA warp
//     shuffle-down pattern: p[j] += p[j+16] (j < 16), then +8, +4, +2, +1;
//     p[0] is the chunk's partial;
//   * more than one chunk: the chunk partials, in order, form a new vector
//     that is reduced by the same rule (as a plain SUM for sum/sumsq/dot),
//     recursively, until one value is left;
//   * a NaN result is returned as the canonical quiet NaN 0x7FC00000.
//
// A warp computes a chunk natively (coalesced loads, one sequential chain per
// lane, shuffles for the tree); a CPU computes it natively too (32 lanes = two
// AVX-512 or four AVX2 registers of vertical adds, no horizontal shuffles in
// the loop).
//
// max/min use a total order (NaN propagates, -0 < +0), under which they are
// associative and commutative: every evaluation order gives the same bits,
// so implementations may use any order (the fast one here is a flat pass).
//
// Three layers:
//   * this header: the single-row functions, written once for host and CUDA
//     device code (LOCKSTEP_HD). They never start threads, so CPU kernels call
//     them per row from inside their own parallel loops, and a CUDA thread can
//     call them as a mirror. On the host, GCC vectorizes the 32-lane loops.
//   * reduce.cpp: the same reductions spread over threads (one long vector:
//     chunks across threads; a matrix: rows across threads). Same bits for any
//     thread count, because the split is along chunk/row boundaries and the
//     combining order never changes.
//   * reduce::ref: a plain scalar reference written straight from the
//     definition, which the tests compare everything against bit for bit.
//
// Matrix products (GEMM, matvec) do NOT use the chunked order: their order
// over k is a sequential fma chain per output cell (dot_seq below).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/num/fp.hpp"

namespace lockstep::num::reduce {

inline constexpr std::size_t kLanes = 32;       // one CUDA warp
inline constexpr std::size_t kLaneDepth = 128;  // elements per lane per chunk
inline constexpr std::size_t kChunk = kLanes * kLaneDepth;  // 4096

// The one NaN a canonical reduction writes (positive, quiet, zero payload).
inline constexpr std::uint32_t kCanonicalNaN = 0x7FC00000u;

LOCKSTEP_HD inline float canonical_nan(float x) { return x != x ? float_of(kCanonicalNaN) : x; }

// ---------------------------------------------------------------------------
// GEMM / matvec order: acc = +0; for k in 0..K-1: acc = fma(a[k], b[k], acc).
// The reference for every matrix-product cell (strides in elements; a row of
// A has stride 1, a column of row-major B has stride N).
// ---------------------------------------------------------------------------
LOCKSTEP_HD inline float dot_seq(const float* a, std::ptrdiff_t stride_a, const float* b,
                                 std::ptrdiff_t stride_b, std::size_t k) {
  float acc = 0.0f;
  for (std::size_t i = 0; i < k; ++i) {
    const std::ptrdiff_t ii = static_cast<std::ptrdiff_t>(i);
    acc = fma_rn(a[ii * stride_a], b[ii * stride_b], acc);
  }
  return canonical_nan(acc);
}

namespace detail {

// The fixed pairwise tree over 32 lane partials (warp shuffle-down order).
LOCKSTEP_HD inline float lane_tree(float (&p)[kLanes]) {
  for (std::size_t off = kLanes / 2; off >= 1; off /= 2)
    for (std::size_t j = 0; j < off; ++j) p[j] = p[j] + p[j + off];
  return p[0];
}

// One chunk (len <= kChunk) of a sum-like reduction. `step(acc, i)` folds
// element i into a lane accumulator. The full rows of 32 are written as a
// fixed-width inner loop so the compiler keeps 32 vertical accumulators.
template <class Step>
LOCKSTEP_HD inline float chunk(std::size_t len, Step step) {
  float acc[kLanes];
  for (std::size_t j = 0; j < kLanes; ++j) acc[j] = 0.0f;
  std::size_t t = 0;
  for (; t + kLanes <= len; t += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) acc[j] = step(acc[j], t + j);
  for (std::size_t j = 0; t + j < len; ++j) acc[j] = step(acc[j], t + j);  // ragged tail
  return lane_tree(acc);
}

LOCKSTEP_HD inline std::size_t chunk_len(std::size_t n, std::size_t k) {
  const std::size_t begin = k * kChunk;
  return n - begin < kChunk ? n - begin : kChunk;
}

// Canonical sum of the m values get(0), ..., get(m-1), computing each value
// once, in index order, with no buffer: the level above the first chunk
// partials. Depth bounds the template recursion (kChunk^6 > 2^64).
template <int Depth, class Get>
LOCKSTEP_HD inline float sum_of(std::size_t m, Get get) {
  auto chunk_of = [&](std::size_t k) {
    const std::size_t base = k * kChunk;
    return chunk(chunk_len(m, k), [&](float acc, std::size_t i) { return acc + get(base + i); });
  };
  if constexpr (Depth >= 4) {
    return chunk_of(0);  // m <= 2^64 / kChunk^5 < kChunk here
  } else {
    if (m <= kChunk) return chunk_of(0);
    return sum_of<Depth + 1>((m + kChunk - 1) / kChunk, chunk_of);
  }
}

// First level (the elements themselves) then the chunk partials summed.
template <class Step>
LOCKSTEP_HD inline float sum_like(std::size_t n, Step step) {
  auto first_level = [&](std::size_t k) {
    const std::size_t base = k * kChunk;
    return chunk(chunk_len(n, k), [&](float acc, std::size_t i) { return step(acc, base + i); });
  };
  if (n <= kChunk) return canonical_nan(first_level(0));
  return canonical_nan(sum_of<0>((n + kChunk - 1) / kChunk, first_level));
}

// max/min: a float's bits mapped to an int32 that orders like the float,
// -0 < +0 (a negative float's magnitude bits are flipped). Its own inverse.
LOCKSTEP_HD inline std::int32_t order_key(float x) {
  const std::int32_t s = static_cast<std::int32_t>(bits_of(x));
  return s ^ ((s >> 31) & 0x7FFFFFFF);
}
LOCKSTEP_HD inline float from_order_key(std::int32_t k) {
  return float_of(static_cast<std::uint32_t>(k ^ ((k >> 31) & 0x7FFFFFFF)));
}

// max (Max = true) or min over a flat pass in 32 lanes. Order-free, see top.
// NaN inputs are tracked apart (their magnitude bits exceed those of inf).
template <bool Max>
LOCKSTEP_HD inline float extremum(const float* x, std::size_t n) {
  // Start at the identity: -inf for max, +inf for min.
  const std::int32_t init = order_key(float_of(Max ? 0xFF800000u : 0x7F800000u));
  std::int32_t key[kLanes];
  std::uint32_t mag[kLanes];
  for (std::size_t j = 0; j < kLanes; ++j) key[j] = init, mag[j] = 0;
  auto fold = [&](std::size_t j, float v) {
    const std::int32_t k = order_key(v);
    key[j] = Max ? (k > key[j] ? k : key[j]) : (k < key[j] ? k : key[j]);
    const std::uint32_t m = bits_of(v) & 0x7FFFFFFFu;
    mag[j] = m > mag[j] ? m : mag[j];
  };
  std::size_t t = 0;
  for (; t + kLanes <= n; t += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) fold(j, x[t + j]);
  for (std::size_t j = 0; t + j < n; ++j) fold(j, x[t + j]);
  std::int32_t best = init;
  std::uint32_t top = 0;
  for (std::size_t j = 0; j < kLanes; ++j) {
    best = Max ? (key[j] > best ? key[j] : best) : (key[j] < best ? key[j] : best);
    top = mag[j] > top ? mag[j] : top;
  }
  return top > 0x7F800000u ? float_of(kCanonicalNaN) : from_order_key(best);
}

}  // namespace detail

// ---------------------------------------------------------------------------
// Single row, single thread, host and device. n == 0: sum/sumsq/dot give +0,
// max gives -inf, min gives +inf.
// ---------------------------------------------------------------------------
LOCKSTEP_HD inline float sum(const float* x, std::size_t n) {
  return detail::sum_like(n, [x](float acc, std::size_t i) { return acc + x[i]; });
}
LOCKSTEP_HD inline float sumsq(const float* x, std::size_t n) {
  return detail::sum_like(n, [x](float acc, std::size_t i) { return fma_rn(x[i], x[i], acc); });
}
LOCKSTEP_HD inline float dot(const float* x, const float* y, std::size_t n) {
  return detail::sum_like(n, [x, y](float acc, std::size_t i) { return fma_rn(x[i], y[i], acc); });
}
LOCKSTEP_HD inline float max(const float* x, std::size_t n) { return detail::extremum<true>(x, n); }
LOCKSTEP_HD inline float min(const float* x, std::size_t n) { return detail::extremum<false>(x, n); }

// ---------------------------------------------------------------------------
// Host, multithreaded (reduce.cpp). `threads` is explicit: 0 means all
// hardware threads. The result bits do not depend on it.
// ---------------------------------------------------------------------------

// One long vector: chunk partials computed across threads, then summed.
float sum_parallel(const float* x, std::size_t n, int threads);
float sumsq_parallel(const float* x, std::size_t n, int threads);
float dot_parallel(const float* x, const float* y, std::size_t n, int threads);
float max_parallel(const float* x, std::size_t n, int threads);
float min_parallel(const float* x, std::size_t n, int threads);

// Each row of a row-major [rows, n] matrix whose rows start `ld` elements
// apart (ld >= n): out[r] = reduce(row r). Rows are spread over threads.
void sum_rows(const float* x, std::size_t rows, std::size_t n, std::size_t ld, float* out,
              int threads);
void sumsq_rows(const float* x, std::size_t rows, std::size_t n, std::size_t ld, float* out,
                int threads);
void max_rows(const float* x, std::size_t rows, std::size_t n, std::size_t ld, float* out,
              int threads);
void min_rows(const float* x, std::size_t rows, std::size_t n, std::size_t ld, float* out,
              int threads);
// out[r] = dot(row r of x, row r of y).
void dot_rows(const float* x, std::size_t ldx, const float* y, std::size_t ldy, std::size_t rows,
              std::size_t n, float* out, int threads);

// ---------------------------------------------------------------------------
// The reference: scalar, straight from the definition (materializes each
// level's partials in a std::vector). Slow; for tests and audits only.
// ---------------------------------------------------------------------------
namespace ref {
float sum(const float* x, std::size_t n);
float sumsq(const float* x, std::size_t n);
float dot(const float* x, const float* y, std::size_t n);
float max(const float* x, std::size_t n);
float min(const float* x, std::size_t n);
// IEEE max/min under the reductions' rules: NaN if either is NaN, -0 < +0.
float max2(float a, float b);
float min2(float a, float b);
}  // namespace ref

}  // namespace lockstep::num::reduce
