// RoPE of a decode pass's q and k rows and the K/V cache writes in one launch
// (rope_store.cu), callable from g++ code (the CUDA model's decode backend,
// model/cuda_model.cpp). Plain pointers and sizes; the default stream.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

// decode_launch.hpp's rope_rows of q (q_heads) and of k (kv_heads) — the same
// table, positions pos[r] — then store_rows_at of the rotated k rows and of
// the v rows (ld ldv) into the layer's caches at (slot[r], pos[r]): each
// element's float ops exactly those launches', in one launch. q_x/q_y and
// k_x/k_y contiguous rows (heads·head_dim); y may be x. k_y, v and the
// caches must not overlap q's rows, and the caches no input.
struct RopeStoreShape {
  std::size_t rows = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  bool interleaved = false;
  std::size_t tab_seq = 0;  // the table's positions (the session's ctx)
  std::size_t ldv = 0;      // v's row stride
  std::size_t ctx = 0;      // the caches' positions a slot
};
struct RopeStoreOptions {
  bool cache_unrotated = false;  // the planted bug: the k cache gets k before its rotation
};
void rope_store_rows(const RopeStoreShape& s, const float* tab, const std::int32_t* slot, const std::int32_t* pos,
                     const float* q_x, float* q_y, const float* k_x, float* k_y, const float* v, float* k_cache,
                     float* v_cache, const RopeStoreOptions& options = {});

}  // namespace lockstep::cuda::launch
