// Launchers of the decode kernels (decode.cu), callable from g++ code (the
// CUDA model's decode backend, model/cuda_model.cpp). Plain pointers and sizes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

// ops::CachedAttention (ops/cached_attention.hpp): `rows` query rows, row r of
// cache slot slot[r] at position pos[r] (device arrays), over the caches
// [slots, ctx, kv_heads·head_dim]; o contiguous [rows, q_heads·head_dim].
struct CachedAttentionShape {
  std::size_t rows = 0, q_heads = 0, kv_heads = 0, head_dim = 0, ctx = 0, key_block = 64;
  std::size_t ldq = 0;
  float scale = 0.0f;  // ops::Attention::scale_of<float>, computed by the caller
};
void cached_attention(const CachedAttentionShape& s, const float* q, const float* k_cache, const float* v_cache,
                      const std::int32_t* slot, const std::int32_t* pos, float* o);

// rows rows of `width` floats, ld apart at src, to contiguous rows at dst (in stream order).
void store_rows(const float* src, std::size_t ld, std::size_t rows, std::size_t width, float* dst);

}  // namespace lockstep::cuda::launch
