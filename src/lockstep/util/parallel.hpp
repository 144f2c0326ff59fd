// A small deterministic parallel-for with an explicit thread count.
//
// parallel_for(n, threads, grain, body) cuts [0, n) into contiguous pieces
// that depend only on (n, threads, grain) — never on timing — and calls
// body(lo, hi) once per piece, on up to `threads` threads (OpenMP underneath).
// Which thread runs which piece, and in which order pieces finish, is
// unspecified: a body must write disjoint outputs and must not combine
// results across pieces itself. Canonical computations split along their own
// boundaries (rows, reduction chunks), so their bits never depend on the
// thread count.
//
// Called from inside another parallel region (a parallel_for body, an OpenMP
// region), it runs the pieces serially on the calling thread.
#pragma once

#include <cstddef>
#include <utility>

namespace lockstep::util {

// std::thread::hardware_concurrency(), at least 1.
int hardware_threads();
// The thread count a request means: <= 0 asks for hardware_threads().
int resolve_threads(int requested);

// The pieces [0, n) is cut into: `pieces` near-equal contiguous ranges (the
// first n % pieces of them one element longer), pieces = min(threads,
// ceil(n / grain)), at least 1 when n > 0, 0 when n == 0.
struct Partition {
  std::size_t n = 0;
  std::size_t pieces = 0;
  std::size_t begin(std::size_t p) const {
    const std::size_t base = n / pieces, extra = n % pieces;
    return p * base + (p < extra ? p : extra);
  }
  std::size_t end(std::size_t p) const { return begin(p + 1); }
};
Partition partition(std::size_t n, int threads, std::size_t grain);

namespace detail {
// Runs fn(ctx, p) for p in [0, pieces), in parallel unless already inside a
// parallel region. Rethrows the exception of the lowest failing piece.
void run_pieces(std::size_t pieces, void (*fn)(void*, std::size_t), void* ctx);
}  // namespace detail

template <class Body>
void parallel_for(std::size_t n, int threads, std::size_t grain, Body&& body) {
  const Partition part = partition(n, threads, grain);
  if (part.pieces == 0) return;
  if (part.pieces == 1) {
    body(std::size_t{0}, n);
    return;
  }
  auto piece = [&](std::size_t p) { body(part.begin(p), part.end(p)); };
  using Piece = decltype(piece);
  detail::run_pieces(
      part.pieces, [](void* ctx, std::size_t p) { (*static_cast<Piece*>(ctx))(p); }, &piece);
}

}  // namespace lockstep::util
