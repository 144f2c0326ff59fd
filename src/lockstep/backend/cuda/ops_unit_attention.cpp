// cuda::OpKernels: causal attention through int8 units (ops/unit_attention.hpp),
// the same bits as cpu::OpKernels (backend/cpu/unit_attention.cpp). Forward:
// the (token, head) codes of q, k, v (head_quantize_i8), then
// unit_attention_fwd (unit_attention.cu). Backward: q̂, k̂, v̂ (the same codes,
// dequantized, in the inputs' strides) into the float attention's gated
// backward kernels (attention.cu), as the spec defines it. Not yet live-audited
// (the float attention's audits recompute float rows).
#include <algorithm>
#include <cstddef>

#include "lockstep/backend/cuda/attention_launch.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/backend/cuda/unit_attention_launch.hpp"

namespace lockstep::cuda {
namespace {

launch::AttentionShape unit_shape(const ops::UnitAttention::Config& c, std::size_t ldq, std::size_t ldkv) {
  ops::UnitAttention::validate(c);
  launch::AttentionShape s;
  s.batch = c.batch;
  s.seq = c.seq;
  s.q_heads = c.q_heads;
  s.kv_heads = c.kv_heads;
  s.head_dim = c.head_dim;
  s.key_block = c.key_block;
  s.ldq = ldq;
  s.ldkv = ldkv;
  s.scale = ops::Attention::scale_of<float>(c);
  return s;
}

}  // namespace

void OpKernels::run(const ops::UnitAttention::Config& c, const ops::UnitAttention::FwdArgs<float>& args) {
  const auto& [q, ldq, k, v, ldkv, o, lse] = args;
  const launch::AttentionShape s = unit_shape(c, ldq, ldkv);
  const std::size_t rows = c.batch * c.seq, Dh = c.head_dim, nq = rows * c.q_heads, nkv = rows * c.kv_heads;
  const auto floor_v = static_cast<float>(ops::UnitAttention::kFloor);
  UnitScratch& u = units_;
  u.qa.resize((nq + 2 * nkv) * Dh);
  u.sa.resize(nq + 2 * nkv);
  std::int8_t* cq = u.qa.data();
  std::int8_t* ck = cq + nq * Dh;
  std::int8_t* cv = ck + nkv * Dh;
  float* sq = u.sa.data();
  float* sk = sq + nq;
  float* sv = sk + nkv;
  launch::head_quantize_i8(q, rows, ldq, c.q_heads, Dh, floor_v, cq, sq, nullptr);
  launch::head_quantize_i8(k, rows, ldkv, c.kv_heads, Dh, floor_v, ck, sk, nullptr);
  launch::head_quantize_i8(v, rows, ldkv, c.kv_heads, Dh, floor_v, cv, sv, nullptr);
  launch::unit_attention_fwd(s, cq, sq, ck, sk, cv, sv, o, lse);
}

void OpKernels::run(const ops::UnitAttention::Config& c, const ops::UnitAttention::BwdArgs<float>& args) {
  const auto& [q, ldq, k, v, ldkv, o, lse, dout, dq, dk, dv] = args;
  const launch::AttentionShape s = unit_shape(c, ldq, ldkv);
  const std::size_t rows = c.batch * c.seq, Dh = c.head_dim, qw = c.q_heads * Dh, kvw = c.kv_heads * Dh;
  const std::size_t nq = rows * c.q_heads, nkv = rows * c.kv_heads;
  const auto floor_v = static_cast<float>(ops::UnitAttention::kFloor);
  UnitScratch& u = units_;
  // q̂, k̂, v̂ where the float kernels read them: GPT-2's fused q|k|v rows as
  // one fused buffer, otherwise one buffer each with its own stride.
  const bool fused = ldq == ldkv && k == q + qw && v == k + kvw;
  u.deq.resize(fused ? rows * ldq : rows * ldq + 2 * rows * ldkv);
  float* qh = u.deq.data();
  float* kh = fused ? qh + qw : qh + rows * ldq;
  float* vh = fused ? kh + kvw : kh + rows * ldkv;
  u.qa.resize((nq + 2 * nkv) * Dh);
  u.sa.resize(nq + 2 * nkv);
  launch::head_quantize_i8(q, rows, ldq, c.q_heads, Dh, floor_v, u.qa.data(), u.sa.data(), qh);
  launch::head_quantize_i8(k, rows, ldkv, c.kv_heads, Dh, floor_v, u.qa.data() + nq * Dh, u.sa.data() + nq, kh);
  launch::head_quantize_i8(v, rows, ldkv, c.kv_heads, Dh, floor_v, u.qa.data() + (nq + nkv) * Dh,
                           u.sa.data() + nq + nkv, vh);
  const std::size_t n = launch::attention_bwd_scratch_floats(s);
  scratch_.resize(n);
  launch::attention_bwd(s, qh, kh, vh, o, lse, dout, dq, dk, dv, scratch_.data(), n);
}

}  // namespace lockstep::cuda
