// ReLU²·up and the RMSNorm + activation codes after it in one launch
// (act_norm.cu), callable from g++ code (the CUDA model's decode backend,
// model/cuda_model.cpp). Plain pointers and sizes; the default stream.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

// h = ReLU²(gate)·up (ops::ReluSqMul, relu2mul_fwd's element: r = max2(gate,
// 0), h = (r·r)·up), written to h [rows, dim], then rmsnorm_quantize_i8
// (pointwise_launch.hpp) of h: y, rstd, codes and step with that kernel's
// bits — the BitNet FFN's activation and sub-norm for the down projection, in
// one launch that stages each row of h as it computes it, for
// act_norm_fused(rows, dim) (1 to 32 rows of at most 8192: the decode's);
// otherwise relu2mul_fwd and rmsnorm_quantize_i8, the same bits. h may not
// overlap gate, up or y.
bool act_norm_fused(std::size_t rows, std::size_t dim);
struct ActNormOptions {
  bool gate_unclamped = false;  // the planted bug (DecodeLinearMutant::act_norm_gate_unclamped): r = gate, not max2(gate, 0)
};
void relu2mul_rmsnorm_quantize_i8(std::size_t rows, std::size_t dim, float eps, const float* gate, const float* up,
                                  float* h, const float* w, float* y, float* rstd, float floor_x, std::int8_t* codes,
                                  float* step, const ActNormOptions& options = {});

}  // namespace lockstep::cuda::launch
