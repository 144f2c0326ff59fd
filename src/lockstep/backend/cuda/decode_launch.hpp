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

// Which kernel cached_attention launches (the same cells, bit for bit): 1,
// decode.cu's one CTA per (row, head); 2, decode_attention_v2.cu's scores
// launch (a CTA per 32 keys of a kv head, K read once for the group) and fold
// launch (a CTA per 32 d of a kv head, a warp per query head, V read once for
// the group); 3, v2 with the fold as a programmatic dependent launch (sm_90:
// its CTAs start and issue their V copies while the scores run, then wait for
// them); 5, v3 (decode_attention_v2.cu's one launch: a CTA per 32 d of a kv
// head computes its group's scores itself, then v2's fold; no scratch). From
// the environment's LOCKSTEP_DECODE_ATTENTION = v1 | v2 | v2pdl | auto | v3
// at first use (unset: kDefaultDecodeAttention; another value: an
// std::invalid_argument naming it); set_decode_attention_version(1 … 5)
// overrides it (tests), 0 goes back to the environment. A shape v3 cannot
// hold (cached_attention_v3_fits) runs v2, one v2 cannot hold
// (cached_attention_v2_fits) runs v1. 4 ("auto", the default) picks per call
// by auto_decode_attention below.
inline constexpr int kAutoDecodeAttention = 4;
inline constexpr int kDecodeAttentionV3 = 5;
inline constexpr int kDefaultDecodeAttention = kAutoDecodeAttention;
int decode_attention_version();
void set_decode_attention_version(int version);

// auto's rule, the one place it lives: kAutoSmallBatchAttention when v1's CTAs
// (rows × query heads) would not fill the device's SMs, else v1 — measured on
// the H200 (session 10, docs/perf/DECODE_CUDA.md §12, §13): v2 with the
// epilogues gained 8.6% at batch 1 (20 CTAs of v1), while batch 32 and the
// prefill fell 18% under v2 everywhere. v3 (§18, scores and fold in one
// launch) replaced v2 here in session 17: with early launch and PDL on, the
// batch-1 graph's device time 1,677 µs under v3 against 1,725-1,728 under v2
// (H100, one process, §21).
inline constexpr int kAutoSmallBatchAttention = kDecodeAttentionV3;
constexpr int auto_decode_attention(std::size_t rows, std::size_t q_heads, std::size_t sms) {
  return rows * q_heads < sms ? kAutoSmallBatchAttention : 1;
}

// Known bugs switched on by the kernel tests (tests/infer/decode_kernels_gpu_test.cpp)
// to show that the comparisons catch them; never set otherwise. v2 and v3 (the fold they share).
enum class DecodeAttentionMutant {
  none,
  max_from_next_block,  // the m chain reads block b + 1's maximum for block b (the last block its own)
  acc_keys_reversed,    // each block's acc chains run over its keys descending (the l chain ascending)
  score_d_descending,   // v3 only: the score chains over d descending
};
void set_decode_attention_mutant(DecodeAttentionMutant m);

// v2 itself, for the launcher above and the host emulator's test
// (tests/cuda/decode_attention_emu_test.cpp): scores is a scratch of
// rows · q_heads · ctx floats (device memory; nothing in it is read before
// this call writes it).
struct CachedAttentionV2Options {
  bool pdl = false;                  // the fold as a programmatic dependent launch (sm_90)
  bool wait_first = false;           // LOCKSTEP_DECODE_PDL: the fold waits before its V copies (the cache's
                                     // writer, rope_store, may still run: the scores kernel started early too)
  bool max_from_next_block = false;  // DecodeAttentionMutant::max_from_next_block
  bool acc_keys_reversed = false;    // DecodeAttentionMutant::acc_keys_reversed
  bool no_reuse_barrier = false;     // host emulator only: no barrier before a V ring slot is restaged
  bool score_d_descending = false;   // v3: DecodeAttentionMutant::score_d_descending
  bool no_chunk_barrier = false;     // v3, host emulator only: no barrier before a K chunk is restaged
};
bool cached_attention_v2_fits(const CachedAttentionShape& s);
void cached_attention_v2(const CachedAttentionShape& s, const float* q, const float* k_cache, const float* v_cache,
                         const std::int32_t* slot, const std::int32_t* pos, float* o, float* scores,
                         const CachedAttentionV2Options& options);
// v3 (the same options but pdl; no scratch): one launch, a CTA per (32 d, kv head, row).
bool cached_attention_v3_fits(const CachedAttentionShape& s);
void cached_attention_v3(const CachedAttentionShape& s, const float* q, const float* k_cache, const float* v_cache,
                         const std::int32_t* slot, const std::int32_t* pos, float* o,
                         const CachedAttentionV2Options& options);

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
