// Launchers of the causal attention kernels (attention.cu), callable from g++
// code (ops_attention.cpp). Plain pointers and sizes only: nvcc never sees the
// op headers.
//
// Layout (ops/attention.hpp): q row (b, t, h) at q + (b·T + t)·ldq + h·Dh;
// k and v rows (b, t, g) at + (b·T + t)·ldkv + g·Dh; o and dout contiguous
// [B, T, Hq, Dh]; lse [B, Hq, T]. dq is written with q's stride ldq, dk and dv
// with ldkv (GPT-2's fused q|k|v gradient buffer), cells between rows untouched.
#pragma once

#include <cstddef>

namespace lockstep::cuda::launch {

struct AttentionShape {
  std::size_t batch = 0, seq = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  std::size_t key_block = 64;  // the canonical online-softmax block
  std::size_t ldq = 0, ldkv = 0;
  float scale = 0.0f;  // ops::Attention::scale_of<float>, computed by the caller
};

// Which implementation a shape runs: the tiled kernels (key_block 64,
// head_dim <= 128) or the one-thread-per-cell kernels (any other shape). Both
// compute the same canonical expression.
bool attention_tiled(const AttentionShape& s);

// The forward's query tile on the tiled kernels: 128 queries a CTA for
// head_dim <= 64 (two 64-row halves over each 64-key block loaded once), else
// 64. attention_fwd_tile_override(64) runs the 64-query kernel for every
// shape, (0) or (128) the rule again (process-wide, like the GEMM's tile
// override: tests and gates only). Both tiles give the same bits.
void attention_fwd_tile_override(int rows);
// The query tile attention_fwd runs for s now (0: the per-cell kernels).
int attention_fwd_tile(const AttentionShape& s);

// o, lse from q, k, v.
void attention_fwd(const AttentionShape& s, const float* q, const float* k, const float* v, float* o, float* lse);

// The backward's dk/dv kernel runs whole tiles off the diagonal in a fixed,
// unrolled loop (v5, float4 rows; scalar rows keep v4's loop);
// attention_bwd_dkdv_v4_override(true) runs v4's single
// loop for every tile instead (false: the rule again; process-wide, tests and
// gates only). Same bits either way.
void attention_bwd_dkdv_v4_override(bool on);

// Device scratch (floats) that attention_bwd uses for shape s: D_i
// (batch·q_heads·seq floats) and, on the tiled kernels, the dS tiles of as
// many batch elements as fit in max_ds_bytes (the stored-dS path: the dq
// kernel reads dS instead of recomputing s, P and dP; batch·q_heads·
// ceil(seq/64)(ceil(seq/64) + 1)/2·4096 floats for the whole batch).
constexpr std::size_t kAttentionMaxDsBytes = std::size_t{512} << 20;
std::size_t attention_bwd_scratch_floats(const AttentionShape& s, std::size_t max_ds_bytes = kAttentionMaxDsBytes);

// dq, dk, dv. `scratch`: device floats, at least batch·q_heads·seq (D_i);
// what it has beyond that decides the path: the dS tiles of k >= 1 batch
// elements -> stored-dS path in chunks of k; less -> dq recomputes dS. Both
// paths give the same bits.
void attention_bwd(const AttentionShape& s, const float* q, const float* k, const float* v, const float* o,
                   const float* lse, const float* dout, float* dq, float* dk, float* dv, float* scratch,
                   std::size_t scratch_floats);

}  // namespace lockstep::cuda::launch
