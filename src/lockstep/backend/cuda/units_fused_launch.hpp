// Launchers of the fused units paths' own kernels (units_fused.cu), callable
// from g++ code; the rest of those paths is quant.cu's quantizers and
// epilogue and the int8 GEMM (ops_units_fused.cpp). Device pointers, the
// default stream, asynchronous.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/backend/cuda/pointwise_launch.hpp"

namespace lockstep::cuda::launch {

// out[i*J + j] = ((f32(acc[i*ld + j]) * sa[i]) * sb[j]) (+ bias[j]): the unit
// epilogue (unit_epilogue) on J columns of a wider int32 product, row stride ld.
void unit_epilogue_cols(const std::int32_t* acc, std::size_t ld, const float* sa, const float* sb, const float* bias,
                        std::size_t I, std::size_t J, float* out);

// The GPT-2 MLP chain's middle, one warp per row n of acc [N, F]:
//   fc   = ((f32(acc) * sa[n]) * sb[j]) + b1[j]          (unit_epilogue with bias)
//   ts   = tanh(u(fc)), act = (0.5 * fc) * (1 + ts)      (gelu_fwd)
//   codes, step[n]: act's row codes                      (row_quantize_i8 of act)
// each value the expression of the kernel named, in its order.
void mlp_gelu_rows(const std::int32_t* acc, const float* sa, const float* sb, const float* b1, std::size_t N,
                   std::size_t F, GeluConstants k, float floor_x, float* fc, float* ts, float* act,
                   std::int8_t* codes, float* step);

// Tests only (tests/cuda/units_fused_cuda_test.cpp sees each caught): a
// planted bug in the fused paths, 0 = none (always, outside that test):
//   1  mlp_gelu_rows: GELU's y = fma(0.5·fc, t, 0.5·fc) (one rounding, not the spec's two)
//   2  unit_epilogue_cols: the bias dropped on the last column
//   3  units_shared_bwd: the stacked dW epilogue reads the first part's dy steps for every part
void set_units_fused_mutant(int m);
int units_fused_mutant();

}  // namespace lockstep::cuda::launch
