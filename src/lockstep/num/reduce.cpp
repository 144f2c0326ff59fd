#include "lockstep/num/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "lockstep/util/parallel.hpp"

namespace lockstep::num::reduce {

namespace {

// Work per parallel piece: at least this many elements, so small inputs stay
// on one thread (a piece costs about a microsecond to hand out).
constexpr std::size_t kMinElemsPerPiece = std::size_t{1} << 16;

std::size_t chunks_of(std::size_t n) { return (n + kChunk - 1) / kChunk; }

// One long vector: the first-level chunk partials in parallel (each one is a
// fixed function of its chunk), then those partials summed by the canonical
// rule on this thread — exactly the recursion of the definition.
template <class ChunkPartial>
float sum_like_parallel(std::size_t n, int threads, ChunkPartial chunk_partial) {
  const std::size_t m = chunks_of(n);
  std::vector<float> partial(m);
  util::parallel_for(m, threads, kMinElemsPerPiece / kChunk, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t k = lo; k < hi; ++k) partial[k] = chunk_partial(k);
  });
  return sum(partial.data(), m);
}

// max/min: every order gives the same bits (reduce.hpp), so each piece's
// extremum is taken, then the extremum of those.
template <class Extremum>
float extremum_parallel(const float* x, std::size_t n, int threads, Extremum ext) {
  const util::Partition part = util::partition(chunks_of(n), threads, kMinElemsPerPiece / kChunk);
  std::vector<float> partial(part.pieces);
  util::parallel_for(part.pieces, static_cast<int>(part.pieces), 1,
                     [&](std::size_t lo, std::size_t hi) {
                       for (std::size_t p = lo; p < hi; ++p) {
                         const std::size_t b = std::min(n, part.begin(p) * kChunk);
                         const std::size_t e = std::min(n, part.end(p) * kChunk);
                         partial[p] = ext(x + b, e - b);
                       }
                     });
  return ext(partial.data(), partial.size());
}

std::size_t rows_grain(std::size_t n) { return std::max<std::size_t>(1, kMinElemsPerPiece / (n + 1)); }

// Rows in parallel, each row by the single-row function. With fewer rows
// than threads and long rows, each row's chunks are spread instead.
template <class RowFn, class RowParallelFn>
void rows_parallel(std::size_t rows, std::size_t n, int threads, float* out, RowFn row,
                   RowParallelFn row_parallel) {
  const int t = util::resolve_threads(threads);
  if (rows < static_cast<std::size_t>(t) && n > 4 * kChunk) {
    for (std::size_t r = 0; r < rows; ++r) out[r] = row_parallel(r, t);
    return;
  }
  util::parallel_for(rows, t, rows_grain(n), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t r = lo; r < hi; ++r) out[r] = row(r);
  });
}

}  // namespace

float sum_parallel(const float* x, std::size_t n, int threads) {
  if (n <= kChunk) return sum(x, n);
  return sum_like_parallel(n, threads, [&](std::size_t k) {
    return detail::chunk(detail::chunk_len(n, k),
                         [p = x + k * kChunk](float acc, std::size_t i) { return acc + p[i]; });
  });
}

float sumsq_parallel(const float* x, std::size_t n, int threads) {
  if (n <= kChunk) return sumsq(x, n);
  return sum_like_parallel(n, threads, [&](std::size_t k) {
    return detail::chunk(detail::chunk_len(n, k), [p = x + k * kChunk](float acc, std::size_t i) {
      return fma_rn(p[i], p[i], acc);
    });
  });
}

float dot_parallel(const float* x, const float* y, std::size_t n, int threads) {
  if (n <= kChunk) return dot(x, y, n);
  return sum_like_parallel(n, threads, [&](std::size_t k) {
    return detail::chunk(detail::chunk_len(n, k),
                         [p = x + k * kChunk, q = y + k * kChunk](float acc, std::size_t i) {
                           return fma_rn(p[i], q[i], acc);
                         });
  });
}

float max_parallel(const float* x, std::size_t n, int threads) {
  return extremum_parallel(x, n, threads, [](const float* p, std::size_t m) { return max(p, m); });
}

float min_parallel(const float* x, std::size_t n, int threads) {
  return extremum_parallel(x, n, threads, [](const float* p, std::size_t m) { return min(p, m); });
}

void sum_rows(const float* x, std::size_t rows, std::size_t n, std::size_t ld, float* out,
              int threads) {
  rows_parallel(
      rows, n, threads, out, [&](std::size_t r) { return sum(x + r * ld, n); },
      [&](std::size_t r, int t) { return sum_parallel(x + r * ld, n, t); });
}

void sumsq_rows(const float* x, std::size_t rows, std::size_t n, std::size_t ld, float* out,
                int threads) {
  rows_parallel(
      rows, n, threads, out, [&](std::size_t r) { return sumsq(x + r * ld, n); },
      [&](std::size_t r, int t) { return sumsq_parallel(x + r * ld, n, t); });
}

void max_rows(const float* x, std::size_t rows, std::size_t n, std::size_t ld, float* out,
              int threads) {
  rows_parallel(
      rows, n, threads, out, [&](std::size_t r) { return max(x + r * ld, n); },
      [&](std::size_t r, int t) { return max_parallel(x + r * ld, n, t); });
}

void min_rows(const float* x, std::size_t rows, std::size_t n, std::size_t ld, float* out,
              int threads) {
  rows_parallel(
      rows, n, threads, out, [&](std::size_t r) { return min(x + r * ld, n); },
      [&](std::size_t r, int t) { return min_parallel(x + r * ld, n, t); });
}

void dot_rows(const float* x, std::size_t ldx, const float* y, std::size_t ldy, std::size_t rows,
              std::size_t n, float* out, int threads) {
  rows_parallel(
      rows, n, threads, out, [&](std::size_t r) { return dot(x + r * ldx, y + r * ldy, n); },
      [&](std::size_t r, int t) { return dot_parallel(x + r * ldx, y + r * ldy, n, t); });
}

// ---------------------------------------------------------------------------
// The reference, written from the definition and nothing else.
// ---------------------------------------------------------------------------
namespace ref {

float max2(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return float_of(kCanonicalNaN);
  if (a == b) return std::signbit(a) ? b : a;  // equal: prefer +0 over -0
  return a > b ? a : b;
}

float min2(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return float_of(kCanonicalNaN);
  if (a == b) return std::signbit(a) ? a : b;  // equal: prefer -0 over +0
  return a < b ? a : b;
}

namespace {

using Fold = float (*)(float acc, float x, float y);  // lane step (y unused but by dot)
using Combine = float (*)(float a, float b);          // tree step and later levels

float add(float a, float b) { return a + b; }
float fold_add(float acc, float x, float) { return acc + x; }
float fold_sq(float acc, float x, float) { return std::fma(x, x, acc); }
float fold_dot(float acc, float x, float y) { return std::fma(x, y, acc); }
float fold_max(float acc, float x, float) { return max2(acc, x); }
float fold_min(float acc, float x, float) { return min2(acc, x); }

// One level: vector v (with partner w for dot) -> one partial per chunk.
std::vector<float> level(const std::vector<float>& v, const std::vector<float>& w, float identity,
                         Fold fold, Combine combine) {
  std::vector<float> partials;
  const std::size_t n = v.size();
  for (std::size_t c = 0; c == 0 || c < n; c += kChunk) {  // n == 0: one empty chunk
    const std::size_t end = std::min(n, c + kChunk);
    float lane[kLanes];
    for (float& l : lane) l = identity;
    for (std::size_t i = c; i < end; ++i) {
      const std::size_t j = (i - c) % kLanes;
      lane[j] = fold(lane[j], v[i], w.empty() ? 0.0f : w[i]);
    }
    for (std::size_t off = 16; off >= 1; off /= 2)
      for (std::size_t j = 0; j < off; ++j) lane[j] = combine(lane[j], lane[j + off]);
    partials.push_back(lane[0]);
  }
  return partials;
}

float reduce_all(const float* x, const float* y, std::size_t n, float identity, Fold first,
                 Combine combine, Fold later) {
  std::vector<float> v(x, x + n), w;
  if (y) w.assign(y, y + n);
  v = level(v, w, identity, first, combine);
  while (v.size() > 1) v = level(v, {}, identity, later, combine);
  return std::isnan(v[0]) ? float_of(kCanonicalNaN) : v[0];
}

const float kInf = float_of(0x7F800000u);

}  // namespace

float sum(const float* x, std::size_t n) {
  return reduce_all(x, nullptr, n, 0.0f, fold_add, add, fold_add);
}
float sumsq(const float* x, std::size_t n) {
  return reduce_all(x, nullptr, n, 0.0f, fold_sq, add, fold_add);
}
float dot(const float* x, const float* y, std::size_t n) {
  return reduce_all(x, y, n, 0.0f, fold_dot, add, fold_add);
}
float max(const float* x, std::size_t n) {
  return reduce_all(x, nullptr, n, -kInf, fold_max, max2, fold_max);
}
float min(const float* x, std::size_t n) {
  return reduce_all(x, nullptr, n, kInf, fold_min, min2, fold_min);
}

}  // namespace ref
}  // namespace lockstep::num::reduce
