// Launchers of the pointwise kernel family (embedding, positions, norms,
// activations, residual, RoPE, cross-entropy, add_into), callable from g++
// code (ops_pointwise.cpp). Kernels: pointwise.cu, embed.cu, rope.cu, norm.cu,
// loss.cu. All pointers are device pointers; every launcher enqueues on the
// default stream and returns without synchronizing. Each kernel computes the
// float expression of its cpu::OpKernels twin (backend/cpu/ops.cpp) bit for
// bit; the comment on each launcher names the expression.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

using Index = std::int32_t;  // ops::Index

// --- embeddings (embed.cu) -----------------------------------------------------
// y[n, :] = wte[ids[n], :] (a copy); an id outside [0, V) gives a NaN row (the
// CPU throws; the device cannot, and a NaN is an error downstream).
void embedding_fwd(std::size_t tokens, std::size_t vocab, std::size_t dim, const Index* ids, const float* wte,
                   float* y);
// Bytes of device scratch embedding_bwd needs.
std::size_t embedding_bwd_scratch_bytes(std::size_t tokens, std::size_t vocab);
// dwte[v, :] = +0 + dy[n1, :] + dy[n2, :] + ... over the tokens with id v in
// ascending n (a stable sort of the ids, then one chain per (v, column)).
// Ids outside [0, V) contribute nothing.
void embedding_bwd(std::size_t tokens, std::size_t vocab, std::size_t dim, const Index* ids, const float* dy,
                   float* dwte, void* scratch, std::size_t scratch_bytes);
// y[b, t, :] = x[b, t, :] + wpe[offset + t, :].
void positions_fwd(std::size_t batch, std::size_t seq, std::size_t dim, std::size_t offset, const float* x,
                   const float* wpe, float* y);
// dwpe[offset + t, :] = +0 + dy[0, t, :] + dy[1, t, :] + ... (b ascending);
// every other row of dwpe (max_seq rows) = +0. (dx = dy is the caller's copy.)
void positions_bwd_wpe(std::size_t batch, std::size_t seq, std::size_t dim, std::size_t max_seq,
                       std::size_t offset, const float* dy, float* dwpe);

// --- norms (norm.cu) -------------------------------------------------------------
// A warp per row (canonical chunked lane tree, num/reduce.hpp); dim <= 4096².
void layernorm_fwd(std::size_t rows, std::size_t dim, float eps, const float* x, const float* g, const float* b,
                   float* y, float* mean, float* rstd);
void layernorm_bwd(std::size_t rows, std::size_t dim, const float* x, const float* g, const float* mean,
                   const float* rstd, const float* dy, float* dx, float* dg, float* db);
void rmsnorm_fwd(std::size_t rows, std::size_t dim, float eps, const float* x, const float* w, float* y,
                 float* rstd);
void rmsnorm_bwd(std::size_t rows, std::size_t dim, const float* x, const float* w, const float* rstd,
                 const float* dy, float* dx, float* dw);
// rmsnorm_fwd, then row_quantize_i8 (gemm_launch.hpp) of its output y: y,
// rstd, codes [rows, dim] and step [rows] with those kernels' bits. For
// rmsnorm_quantize_fused(rows, dim) (1 to 32 rows of at most 8192: the
// decode's) one kernel, a CTA a row, that reads x once; otherwise the two
// launches. y may be x.
bool rmsnorm_quantize_fused(std::size_t rows, std::size_t dim);
// The session-8 decode changes (docs/perf/DECODE_CUDA.md §9): the CUDA decode
// runs its norms as rmsnorm_quantize_i8 where a BitLinear reads them next
// (model/cuda_model.cpp), and ternary_gemv prefetches each row's units
// (decode_linear.cu). On unless the environment says LOCKSTEP_DECODE_FUSION=0;
// set_decode_fusion(1 or 0) overrides it (tests), -1 goes back to the
// environment. The bits are the same either way.
bool decode_fusion();
void set_decode_fusion(int on);
void rmsnorm_quantize_i8(std::size_t rows, std::size_t dim, float eps, const float* x, const float* w, float* y,
                         float* rstd, float floor_x, std::int8_t* codes, float* step);

// --- activations, residual, add_into (pointwise.cu) --------------------------------
struct GeluConstants {
  float k0, kc, k3;  // float(√(2/π)), float(0.044715), float(3·0.044715)
};
// t = tanh(u(x)) kept in ts; y = (0.5·x)·(1 + t).
void gelu_fwd(std::size_t n, GeluConstants k, const float* x, float* y, float* ts);
// ts == nullptr: t recomputed (num::tanh).
void gelu_bwd(std::size_t n, GeluConstants k, const float* x, const float* ts, const float* dy, float* dx);
// s = σ(gate) kept in sg; y = (gate·s)·up.
void swiglu_fwd(std::size_t n, const float* gate, const float* up, float* y, float* sg);
void swiglu_bwd(std::size_t n, const float* gate, const float* up, const float* sg, const float* dy, float* dgate,
                float* dup);
void relu2mul_fwd(std::size_t n, const float* gate, const float* up, float* y);
void relu2mul_bwd(std::size_t n, const float* gate, const float* up, const float* dy, float* dgate, float* dup);
// y = a + b (mutant residual_flush_negative_zero: -0 written as +0).
void residual_fwd(std::size_t n, const float* a, const float* b, float* y);
// acc = acc + x.
void add_into(std::size_t n, float* acc, const float* x);

// --- RoPE (rope.cu) ---------------------------------------------------------------
// tab: cos [seq, Dh/2] then sin [seq, Dh/2] (ops::Rope::table<float>).
// y_a = a·c - b·s, y_b = b·c + a·s with s negated when inverse. y may be x.
void rope(std::size_t batch, std::size_t seq, std::size_t heads, std::size_t head_dim, bool interleaved,
          const float* tab, const float* x, float* y, bool inverse);

// --- cross-entropy (loss.cu) -----------------------------------------------------------
// A block per row: m = max, lse = m + log(Σ exp(z - m)) (canonical sum),
// loss = t < 0 ? +0 : lse - z[t] (t >= V: NaN; the CPU throws).
void ce_fwd(std::size_t rows, std::size_t vocab, const float* logits, const Index* targets, float* loss,
            float* lse);
// dz_j = (j == t ? exp(z_j - lse) - 1 : exp(z_j - lse)) · dloss; ignored rows +0.
// dlogits may be logits.
void ce_bwd(std::size_t rows, std::size_t vocab, const float* logits, const Index* targets, const float* lse,
            const float* dloss, float* dlogits);

}  // namespace lockstep::cuda::launch
