// cuda::OpKernels: causal attention, forward and backward (kernels:
// attention.cu). The contract is cpu::OpKernels::attention_fwd/_bwd's, bit
// for bit (ops/attention.hpp's float expression).
#include <algorithm>
#include <cstddef>

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

// The scratch that makes attention_bwd keep the dS tiles of `chunk` batch
// elements at a time (0: none, the recompute path): D_i, 64-float aligned,
// then chunk × one element's tiles (the whole budget's size less the rest).
std::size_t scratch_for_chunk(const launch::AttentionShape& s, std::size_t chunk) {
  const std::size_t rows = s.batch * s.q_heads * s.seq;
  const std::size_t all = launch::attention_bwd_scratch_floats(s, ~std::size_t{0} / 2);
  if (all == rows || s.batch == 0) return rows;  // per-cell kernels: no dS tiles
  const std::size_t offset = (rows + 63) / 64 * 64, per_b = (all - offset) / s.batch;
  return chunk == 0 ? rows : offset + std::min(chunk, s.batch) * per_b;
}

}  // namespace

void OpKernels::run(const ops::Attention::Config& c, const ops::Attention::FwdArgs<float>& args) {
  const auto& [q, ldq, k, v, ldkv, o, lse] = args;
  launch::attention_fwd(shape_of(c, ldq, ldkv), q, k, v, o, lse);
  audit::attention_fwd(c, q, ldq, k, v, ldkv, o, lse);
}

void OpKernels::run(const ops::Attention::Config& c, const ops::Attention::BwdArgs<float>& args) {
  const auto& [q, ldq, k, v, ldkv, o, lse, dout, dq, dk, dv] = args;
  // The kernels' scratch: D_i = dot_seq(dO_i, o_i) of every (batch, head,
  // query), then the dS tiles (at most launch::kAttentionMaxDsBytes).
  const launch::AttentionShape s = shape_of(c, ldq, ldkv);
  std::size_t n = launch::attention_bwd_scratch_floats(s);
  if (attention_ds_chunk >= 0) n = scratch_for_chunk(s, static_cast<std::size_t>(attention_ds_chunk));
  scratch_.resize(n);
  launch::attention_bwd(s, q, k, v, o, lse, dout, dq, dk, dv, scratch_.data(), n);
  audit::attention_bwd(c, q, ldq, k, v, ldkv, o, lse, dout, dq, dk, dv);
}

}  // namespace lockstep::cuda
