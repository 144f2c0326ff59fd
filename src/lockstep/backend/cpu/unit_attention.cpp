// Causal attention through int8 units on the CPU: ops::UnitAttention's float
// expression, bit for bit. The codes of q, k, v (one step per (token, head))
// are made once per call by the spec's quantizer; the rows then run the spec's
// own per-query expression (UnitAttention::attend: int32 dots, the online
// softmax, the per-block weight codes) on (batch, head) pairs spread over
// threads. A row is computed whole by one thread, so the bits do not depend
// on the thread count. The backward is the float attention's kernel at the
// dequantized point (q̂, k̂, v̂), as the spec defines it.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::cpu {

void OpKernels::run(const ops::UnitAttention::Config& c, const ops::UnitAttention::FwdArgs<float>& args) {
  const auto& [q, ldq, k, v, ldkv, o, lse] = args;
  ops::UnitAttention::validate(c);
  using UA = ops::UnitAttention;
  const UA::Codes<float> z = UA::codes(c, q, ldq, k, v, ldkv);
  const std::size_t T = c.seq, Dh = c.head_dim, Hq = c.q_heads;
  const float scale = ops::Attention::scale_of<float>(c);
  const std::size_t grain = std::max<std::size_t>(1, min_parallel_work() / (T * (T + 1) / 2 * Dh + 1));
  util::parallel_for(c.batch * Hq, threads, grain, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t task = lo; task < hi; ++task) {
      const std::size_t b = task / Hq, h = task % Hq;
      for (std::size_t i = 0; i < T; ++i)
        UA::forward_row(c, z, b, h, i, scale, o + ((b * T + i) * Hq + h) * Dh, lse[(b * Hq + h) * T + i]);
    }
  });
}

void OpKernels::run(const ops::UnitAttention::Config& c, const ops::UnitAttention::BwdArgs<float>& args) {
  const auto& [q, ldq, k, v, ldkv, o, lse, dout, dq, dk, dv] = args;
  ops::UnitAttention::validate(c);
  const std::size_t rows = c.batch * c.seq, Dh = c.head_dim;
  // q̂, k̂, v̂ in the inputs' strides (the float kernel writes dq, dk, dv with them).
  auto dequantized = [&](const float* x, std::size_t ld, std::size_t heads) {
    const ops::RowCodes<float> r = ops::UnitAttention::head_codes(x, rows, ld, heads, Dh);
    std::vector<float> d(rows * ld);
    for (std::size_t t = 0; t < rows; ++t)
      for (std::size_t e = 0; e < heads * Dh; ++e)
        d[t * ld + e] = static_cast<float>(r.q[t * heads * Dh + e]) * r.step[t * heads + e / Dh];
    return d;
  };
  const std::vector<float> qh = dequantized(q, ldq, c.q_heads), kh = dequantized(k, ldkv, c.kv_heads),
                           vh = dequantized(v, ldkv, c.kv_heads);
  run(static_cast<const ops::Attention::Config&>(c),
      ops::Attention::BwdArgs<float>{.q = qh.data(), .ldq = ldq, .k = kh.data(), .v = vh.data(), .ldkv = ldkv,
                                     .o = o, .lse = lse, .dout = dout, .dq = dq, .dk = dk, .dv = dv});
}

}  // namespace lockstep::cpu
