// Launchers for tests/reduce/reduce_gpu.cu: the canonical reductions and the
// RNG computed on a CUDA device, for comparison with the CPU bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lockstep::test::gpu {

enum class Kind : int { sum = 0, sumsq = 1, dot = 2, max = 3, min = 4 };

// The number of CUDA devices (0 when there is no driver or no device).
int device_count();

// out[r] = reduce(row r) by the header's single-row function
// (num::reduce::sum/...), one CUDA thread per row.
std::vector<float> rows_one_thread(Kind kind, const std::vector<float>& x,
                                   const std::vector<float>& y, std::size_t rows, std::size_t n,
                                   std::size_t ld);

// out[r] = reduce(row r) by the warp formulation of docs/NUMERICS.md: one
// block of `warps` warps per row, warp w takes chunks w, w + warps, ...,
// shuffle-down tree per chunk, then warp 0 reduces the chunk partials by the
// same rule. Requires ceil(n / 4096) <= 4096.
std::vector<float> rows_warp(Kind kind, const std::vector<float>& x, const std::vector<float>& y,
                             std::size_t rows, std::size_t n, std::size_t ld, int warps);

// uniform(seed, stream, first + i) and normal(...) for i < n, one thread each.
std::vector<float> uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                           std::size_t n);
std::vector<float> normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                          std::size_t n);

}  // namespace lockstep::test::gpu
