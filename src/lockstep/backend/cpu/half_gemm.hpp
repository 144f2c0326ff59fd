// A Linear's product for a few rows with its weights read as f16 where f16
// holds every weight exactly (a tied F16 embedding used as the LM head: half
// the bytes of f32, and a decode pass reads every weight once).
//
//   y[n, m] = canonical_nan(chain over k ascending of fma(x[n, k], f32(h[m, k]), acc) from +0)
//
// the chain of cpu::gemm and ops::matmul (dot_seq) on the same products —
// f32(h) is the weight itself, exactly — so the same bits as the f32 path.
// The weights are stored in panels of 64 output columns, k-major inside a
// panel ([panel][K][64] halves), so that a panel is one contiguous stream; the
// 64 chains of a panel run in the lanes of four vectors, one fma per lane per k
// (AVX-512: vcvtph2ps then vfmadd; elsewhere one num::fma_rn per cell).
// Threads split the panels (output columns); every chain is computed whole by
// one thread, so the bits depend neither on the thread count nor on the rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lockstep::cpu {

struct HalfPanels {
  static constexpr std::size_t kWidth = 64;  // output columns a panel
  std::size_t rows = 0, cols = 0;            // the weight's M (outputs), K (inputs)
  std::vector<std::uint16_t> h;              // [ceil(M / 64)][K][64], zero past M
  std::size_t bytes() const { return h.size() * sizeof(std::uint16_t); }
};

// w [M, K] (nn.Linear's layout) into panels, or false (and `out` left
// empty) when some weight is not an f16 value (then f32 it is).
bool pack_half(const float* w, std::size_t M, std::size_t K, HalfPanels& out, int threads);

// y [N, M] (row stride M) = the chains of x [N, K] (row stride K) against the weights.
void half_gemm(const HalfPanels& w, const float* x, std::size_t N, float* y, int threads);

}  // namespace lockstep::cpu
