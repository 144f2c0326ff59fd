// cuda::OpKernels: causal attention, forward and backward (kernels:
// attention.cu). The contract is cpu::OpKernels::attention_fwd/_bwd's, bit
// for bit (ops/attention.hpp's float expression).
#include "lockstep/backend/cuda/audit.hpp"
#include "lockstep/backend/cuda/attention_launch.hpp"
#include "lockstep/backend/cuda/ops.hpp"

namespace lockstep::cuda {
namespace {

launch::AttentionShape shape_of(const ops::Attention::Config& c, std::size_t ldq, std::size_t ldkv) {
  ops::Attention::validate(c);
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

void OpKernels::attention_fwd(const ops::Attention::Config& c, const float* q, std::size_t ldq, const float* k,
                              const float* v, std::size_t ldkv, float* o, float* lse) {
  launch::attention_fwd(shape_of(c, ldq, ldkv), q, k, v, o, lse);
  audit::attention_fwd(c, q, ldq, k, v, ldkv, o, lse);
}

void OpKernels::attention_bwd(const ops::Attention::Config& c, const float* q, std::size_t ldq, const float* k,
                              const float* v, std::size_t ldkv, const float* o, const float* lse, const float* dout,
                              float* dq, float* dk, float* dv) {
  // The kernels' scratch: D_i = dot_seq(dO_i, o_i) of every (batch, head,
  // query), then the dS tiles (at most launch::kAttentionMaxDsBytes).
  const launch::AttentionShape s = shape_of(c, ldq, ldkv);
  const std::size_t n = launch::attention_bwd_scratch_floats(s);
  scratch_.resize(n);
  launch::attention_bwd(s, q, k, v, o, lse, dout, dq, dk, dv, scratch_.data(), n);
  audit::attention_bwd(c, q, ldq, k, v, ldkv, o, lse, dout, dq, dk, dv);
}

}  // namespace lockstep::cuda
