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

// RoPE (ops::Rope's forward rotation) of `rows` rows of heads·head_dim floats,
// row r at position pos[r] (a device array), with tab the cos/sin table of
// ops::Rope::table<float> for positions 0..tab_seq-1 ([cos tab_seq × head_dim/2,
// then sin]); x and y may be the same rows.
void rope_rows(std::size_t rows, std::size_t heads, std::size_t head_dim, bool interleaved, std::size_t tab_seq,
               const float* tab, const std::int32_t* pos, const float* x, float* y);

// Row r of `width` floats (ld apart at src) to row slot[r]·ctx + pos[r] of dst
// (device arrays), all rows in one launch: the cache writes of a pass.
void store_rows_at(const float* src, std::size_t ld, std::size_t rows, std::size_t width, const std::int32_t* slot,
                   const std::int32_t* pos, std::size_t ctx, float* dst);

// rows rows of `width` floats, ld apart at src, to contiguous rows at dst (in stream order).
void store_rows(const float* src, std::size_t ld, std::size_t rows, std::size_t width, float* dst);

}  // namespace lockstep::cuda::launch
