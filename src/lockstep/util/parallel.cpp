#include "lockstep/util/parallel.hpp"

#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

#include <omp.h>

namespace lockstep::util {

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int resolve_threads(int requested) { return requested <= 0 ? hardware_threads() : requested; }

Partition partition(std::size_t n, int threads, std::size_t grain) {
  Partition part;
  part.n = n;
  if (n == 0) return part;
  const std::size_t g = std::max<std::size_t>(grain, 1);
  const std::size_t by_grain = n / g + (n % g != 0);
  part.pieces = std::min(static_cast<std::size_t>(resolve_threads(threads)), by_grain);
  return part;
}

namespace detail {

void run_pieces(std::size_t pieces, void (*fn)(void*, std::size_t), void* ctx) {
  if (pieces <= 1 || omp_in_parallel()) {
    for (std::size_t p = 0; p < pieces; ++p) fn(ctx, p);
    return;
  }
  // Exceptions must not leave an OpenMP region: keep each piece's, rethrow
  // the lowest one afterwards (deterministic, whatever finished first).
  std::vector<std::exception_ptr> errors(pieces);
  const long long count = static_cast<long long>(pieces);
#pragma omp parallel for num_threads(static_cast<int>(pieces)) schedule(static, 1)
  for (long long p = 0; p < count; ++p) {
    try {
      fn(ctx, static_cast<std::size_t>(p));
    } catch (...) {
      errors[static_cast<std::size_t>(p)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace detail
}  // namespace lockstep::util
