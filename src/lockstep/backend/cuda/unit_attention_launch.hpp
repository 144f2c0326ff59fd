// Launchers of the int8-unit attention kernels (unit_attention.cu), callable
// from g++ code (ops_unit_attention.cpp). Plain pointers and sizes only.
//
// Layout: attention_launch.hpp's (q rows ldq apart, k and v rows ldkv apart,
// o contiguous [B, T, Hq, Dh], lse [B, Hq, T]). Codes: one int8 segment of Dh
// per (token, head), segment (t, h) at codes + (t·heads + h)·Dh, its step at
// step[t·heads + h] (ops::UnitAttention::head_codes).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/backend/cuda/attention_launch.hpp"

namespace lockstep::cuda::launch {

// The codes and steps of x's (token, head) segments (rows of heads·Dh values
// ld apart) under ops::quantize_rows (floor floor_x); with dequant not null,
// also code·step there, in x's own layout (row t at dequant + t·ld).
void head_quantize_i8(const float* x, std::size_t rows, std::size_t ld, std::size_t heads, std::size_t Dh,
                      float floor_x, std::int8_t* codes, float* step, float* dequant);

// The forward from the codes: o and lse (ops::UnitAttention::attend per
// (b, h, query)). head_dim <= 256 and key_block <= 1024 (refused otherwise).
void unit_attention_fwd(const AttentionShape& s, const std::int8_t* cq, const float* sq, const std::int8_t* ck,
                        const float* sk, const std::int8_t* cv, const float* sv, float* o, float* lse);

}  // namespace lockstep::cuda::launch
