// Problems for the live-audit tests (audit_host_test.cpp on the CPU,
// cuda_model_test.cpp on the GPU): inputs from the counter-based generator and
// correct results computed by cpu::OpKernels, the reference the CUDA kernels
// are gated against bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/num/rng.hpp"

namespace lockstep::test {

// Uniform values in [lo, lo + width), exact multiples of width·2^-24.
inline std::vector<float> uniform(std::size_t n, std::uint64_t stream, float lo, float width) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = lo + width * num::rng::uniform(7, stream, i);
  return v;
}

// Attention in the model's fused layout: q, k, v interleaved in one
// [B·T, (Hq + 2·Hkv)·Dh] buffer (gpt2's qkv; ldq = ldkv = ld) and their
// gradients in a buffer of the same layout; o, dout [B, T, Hq, Dh]; lse [B, Hq, T].
struct AttentionProblem {
  ops::Attention::Config c;
  std::size_t ld = 0, ok = 0, ov = 0;  // row stride; offsets of k and v in a row
  std::vector<float> qkv, o, lse, dout, dqkv;

  explicit AttentionProblem(const ops::Attention::Config& cfg, std::uint64_t stream = 1) : c(cfg) {
    const std::size_t N = c.batch * c.seq, Dh = c.head_dim;
    ok = c.q_heads * Dh;
    ov = ok + c.kv_heads * Dh;
    ld = ov + c.kv_heads * Dh;
    qkv = uniform(N * ld, stream, -2.0f, 4.0f);
    dout = uniform(N * c.q_heads * Dh, stream + 1, -1.0f, 2.0f);
    o.assign(N * c.q_heads * Dh, std::numeric_limits<float>::quiet_NaN());
    lse.assign(c.batch * c.q_heads * c.seq, std::numeric_limits<float>::quiet_NaN());
    dqkv.assign(N * ld, std::numeric_limits<float>::quiet_NaN());
    cpu::OpKernels k;
    k.forward<ops::Attention>(c, {.q = qkv.data(), .ldq = ld, .k = qkv.data() + ok, .v = qkv.data() + ov, .ldkv = ld,
                                  .o = o.data(), .lse = lse.data()});
    k.backward<ops::Attention>(c, {.q = qkv.data(), .ldq = ld, .k = qkv.data() + ok, .v = qkv.data() + ov, .ldkv = ld,
                                   .o = o.data(), .lse = lse.data(), .dout = dout.data(), .dq = dqkv.data(),
                                   .dk = dqkv.data() + ok, .dv = dqkv.data() + ov});
  }
  // Offsets into dqkv of dq[b, i, h, d] and of dk/dv[b, j, g, d].
  std::size_t dq_at(std::size_t b, std::size_t i, std::size_t h, std::size_t d) const {
    return (b * c.seq + i) * ld + h * c.head_dim + d;
  }
  std::size_t dk_at(std::size_t b, std::size_t j, std::size_t g, std::size_t d) const {
    return (b * c.seq + j) * ld + ok + g * c.head_dim + d;
  }
  std::size_t dv_at(std::size_t b, std::size_t j, std::size_t g, std::size_t d) const {
    return (b * c.seq + j) * ld + ov + g * c.head_dim + d;
  }
};

// BitLinear's forward y = x·Wᵀ on codes: x [N, K], w [M, K], y [N, M] and the
// weight scale, by cpu::OpKernels::bitlinear_fwd.
struct BitLinearProblem {
  std::size_t N, K, M;
  std::vector<float> x, w, y;
  float scale = 0.0f;
  BitLinearProblem(std::size_t n, std::size_t k, std::size_t m, std::uint64_t stream = 3) : N(n), K(k), M(m) {
    x = uniform(N * K, stream, -3.0f, 6.0f);
    w = uniform(M * K, stream + 1, -0.1f, 0.2f);
    y.assign(N * M, std::numeric_limits<float>::quiet_NaN());
    cpu::OpKernels kern;
    cpu::Aux aux;
    kern.forward<ops::BitLinear>({N, K, M}, {.x = x.data(), .w = w.data(), .y = y.data()}, aux);
    scale = aux.s;
  }
};

}  // namespace lockstep::test
