// The GEMM launcher's block-tile rule (gemm.cu's choose_tile) as a host
// function of the shape and the device's multiprocessor count, so code without
// a GPU can ask which kernel a product runs on (tests/cuda/gate_cases_test.cpp
// checks that every tile a GPT-2 124M step picks is gated). No CUDA here.
#pragma once

#include <array>
#include <cstddef>

namespace lockstep::cuda::launch {

// Measured on the H200 (docs/perf/GEMM_CUDA.md, v2): blocks run in
// ceil(blocks / SMs) rounds at the SM's rate for the tile (one 128×128 block
// already takes the SM's whole rate), so a tile's time is ~ ceil(blocks / SMs)
// · cells per block / its rate. The rule takes the cheapest tile by that
// model; it leaves the base tile (7, or 2 where the operands cannot take
// 16-byte loads) only for a predicted gain of 3% or more. Rates relative to
// tile 7, from v2's forced-tile timings of the GPT-2 products; the
// shape-fitted tiles 3, 4, 5, 6 run only with 16-byte loads (their
// scalar-load forms are correct but unmeasured and slower). Tile 6 (128×144,
// v3, for the 768×3072 weight gradient) is tile 3 turned on its side: its rate
// is taken to be tile 3's until measured.
struct TileModel {
  int cfg, bm, bn;
  double rate;
  bool needs_vec;
};
inline constexpr TileModel kTiles[] = {
    {7, 128, 128, 1.000, true},  {2, 128, 128, 0.916, false}, {1, 64, 64, 0.760, false},
    {3, 144, 128, 0.871, true},  {4, 112, 128, 0.857, true},  {5, 48, 128, 0.578, true},
    {6, 128, 144, 0.871, true},
};

// The tile (gemm_launch.hpp's override numbers) for an I×J output; vec: both
// operands take 16-byte loads; sms: the device's multiprocessors.
inline int tile_rule(long I, long J, bool vec, long sms) {
  const auto cost = [&](const TileModel& t) {
    const long blocks = static_cast<long>((I + t.bm - 1) / t.bm) * ((J + t.bn - 1) / t.bn);
    return static_cast<double>((blocks + sms - 1) / sms) * t.bm * t.bn / t.rate;
  };
  const TileModel& base = vec ? kTiles[0] : kTiles[1];
  const TileModel* best = &base;
  for (const TileModel& t : kTiles)
    if ((vec || !t.needs_vec) && cost(t) < cost(*best)) best = &t;
  return cost(*best) <= 0.97 * cost(base) ? best->cfg : base.cfg;
}

// One product as gemm() hands it to the launcher: C is I×J, k runs to K; an
// operand contiguous along k (akc, bkc) has rows ld apart. 16-byte loads when
// (pointers aligned, as the engine's buffers are) the row stride and the
// extent along the contiguous index are multiples of 4 (gemm.cu's dispatch).
struct GemmProduct {
  std::size_t I, J, K;
  bool akc, bkc;
  std::size_t lda, ldb;
  bool va() const { return lda % 4 == 0 && (akc ? K % 4 == 0 : I % 4 == 0); }
  bool vb() const { return ldb % 4 == 0 && (bkc ? K % 4 == 0 : J % 4 == 0); }
  // The rule's `vec`: both operands take 16-byte loads.
  bool vec() const { return va() && vb(); }
};
// The three products of a linear layer with N rows, K inputs and M outputs:
// gemm_xwt (Y = X·Wᵀ), gemm_dyw (dX = dY·W), gemm_dytx (dW = dYᵀ·X).
inline std::array<GemmProduct, 3> linear_products(std::size_t N, std::size_t K, std::size_t M) {
  return {GemmProduct{N, M, K, true, true, K, K}, GemmProduct{N, K, M, true, false, M, K},
          GemmProduct{M, K, N, false, false, M, K}};
}

}  // namespace lockstep::cuda::launch
