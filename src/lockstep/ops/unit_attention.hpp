// Causal self-attention through int8 units (docs/UNITS.md "Attention through
// units", docs/NUMERICS.md): QKᵀ and P·V as exact int32 sums of int8 codes,
// in ops::Attention's flash order (fixed key blocks from position 0), so that
// a row never depends on the batch, on later keys or on how many rows are
// computed together (prefill = decode, batch invariance). A NEW op: the float
// attention's expression (ops/attention.hpp) is untouched.
//
// Layout, config, arguments and kernels' contract: ops::Attention's (q [B, T,
// Hq, Dh], k, v [B, T, Hkv, Dh], o [B, T, Hq, Dh], lse [B, Hq, T]; query head h
// reads kv head h / (Hq/Hkv)). Config is its own type (a run picks the op by
// the config's type) holding the same fields.
//
// Quantizer: ops/quant.hpp's quantize_rows ("/" correctly rounded):
//   m = max(absmax(v), floor); inv = 127 / m; c = clamp(floor(v·inv + 0.5), ±127);
//   step = m / 127.
// WHICH VECTORS, and why (a scale must be constant along the contraction, and
// no code may depend on a key or query the row does not read):
//   q: per (token, head) over d (Dh values): contraction of QKᵀ is d.
//   k: per (token, kv head) over d: each key its own step, so a key's codes do
//      not depend on which block it sits in nor on how many keys exist yet.
//   v: per (token, kv head) over d, the same way (a V quantized per column
//      over a key block would read keys a decoding row has not seen: the last
//      block is cut at the row's position, so prefill ≠ decode).
//   P·V contracts over keys j, but v's step varies with j: it is folded into
//   the weights, u_j = p_j · step^v_j (>= 0), and u is quantized per
//   (query row, key block) with a fixed-point step from the block's max of u
//   (floor kWeightFloor = 2^-100): the block's keys are keys <= i only, so the
//   codes are the same in prefill and in decode.
//
// Forward, per (b, h, query i), keys j = 0..i (causal), blocks [j0, j0 + KB)
// from j0 = 0, the last cut at i; codes cq, ck_j, cv_j with steps sq, sk_j, sv_j:
//   s_j = ((f32(Σ_d cq_d·ck_jd) · sq) · sk_j) · scale       (int32 exact, 3 roundings)
//   mb = max_j s_j over the block
//   first block: m = mb                (l = +0, acc = +0)
//   later blocks: m' = max(m, mb); alpha = exp(m - m'); l = l·alpha;
//                 acc_d = acc_d·alpha; m = m'
//   for j ascending: p_j = exp(s_j - m); l = l + p_j; u_j = p_j · sv_j
//   mu = max(max_j u_j, 2^-100); inv = 127 / mu; cu_j = min(floor(u_j·inv + 0.5), 127)
//   acc_d = acc_d + f32(Σ_j cu_j·cv_jd) · (mu / 127)          (int32 exact, KB <= 131071)
//   o_d = acc_d / l;  lse = m + log(l)                         saved: lse [B, Hq, T]
// The softmax schedule (block max, rescale, exponentials, l in key order) is
// ops::Attention::attend's; l sums the float p (not the quantized weights).
//
// Backward (straight-through; the float backward first): with the forward's
// dequantized q̂ = cq·sq, k̂, v̂, the float attention backward
// ops::Attention::backward(q̂, k̂, v̂, o, lse, dO) with the saved o and lse:
//   D_i = dot_seq(dO_i, o_i); P_ij = exp(dot_seq(q̂_i, k̂_j)·scale - lse_i);
//   dP_ij = dot_seq(dO_i, v̂_j); dS = P·(dP - D); dq = Σ_j dS k̂ · scale, ...
// It is the exact vector-Jacobian product (up to the float roundings of the
// scores, ~1 ulp) of the SURROGATE, with detached corrections taken at the
// point x₀ (q̂ = q + c_q, k̂ = k + c_k, v̂ = v + c_v) and w_j = exp(s_j - lse₀):
//   o(x) = (Σ_j w_j v̂_j + E) / (Σ_j w_j + F),
//   E = o₀ - Σ_j w_j(x₀) v̂_j(x₀),  F = 1 - Σ_j w_j(x₀)   (the P quantization's error)
// At x₀ it is the forward (numerator o₀, denominator 1); its derivatives are
// dv_j = Σ_i P_ij dO_i and ds_ij = P_ij (dO_i·v̂_j - dO_i·o_i): D uses the saved
// (quantized) o, which is why E divides like the weights.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "lockstep/ad/check.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/ops/attention.hpp"
#include "lockstep/ops/kernel_args.hpp"
#include "lockstep/ops/op.hpp"
#include "lockstep/ops/quant.hpp"

namespace lockstep::ops {

struct UnitAttention {
  static constexpr std::string_view name = "unit_attention";
  // ops::Attention's fields; a distinct type so that the kernel sets' run()
  // overloads choose this op by the config passed.
  struct Config : Attention::Config {};
  static Config of(const Attention::Config& c) { return Config{c}; }

  static constexpr double kFloor = 1e-8;            // q, k, v absmax floor (as Int8Linear's x and W)
  static constexpr double kWeightFloor = 0x1p-100;  // u = p·step_v: 127 / 2^-100 is finite

  template <class T>
  using Inputs = Attention::Inputs<T>;
  template <class T>
  using Outputs = Attention::Outputs<T>;
  template <class T>
  using FwdArgs = Attention::FwdArgs<T>;
  template <class T>
  using BwdArgs = Attention::BwdArgs<T>;

  static void validate(const Config& c) {
    Attention::validate(c);
    if (c.head_dim > kMaxQuantK || c.key_block > kMaxQuantK)
      throw std::invalid_argument(
          fmt::format("unit_attention head_dim {} key_block {}: both must be <= 131071, the longest int32-exact "
                      "int8 product (QKᵀ sums over head_dim, P·V over a key block)",
                      c.head_dim, c.key_block));
  }

  // Codes of strided head segments: rows of `heads`·Dh values `ld` apart (a
  // projection's output, possibly inside a wider fused row); segment (r, h)
  // is row r·heads + h of the result (codes [rows·heads, Dh], steps [rows·heads]).
  template <class T>
  static RowCodes<T> head_codes(const T* x, std::size_t rows, std::size_t ld, std::size_t heads, std::size_t Dh) {
    std::vector<T> seg(rows * heads * Dh);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t e = 0; e < heads * Dh; ++e) seg[r * heads * Dh + e] = x[r * ld + e];
    return quantize_rows(seg.data(), rows * heads, Dh, static_cast<T>(kFloor));
  }

  // The per-query expression on codes: query codes cq (Dh) with step sq over
  // keys j = 0..n_keys-1, key j's codes at ck + j·ldc and step at sk[j·lds]
  // (the value's likewise): o (Dh values) and lse. The spec, the CPU kernel
  // and the live audits run this code.
  template <class T>
  static void attend(const Config& c, const std::int8_t* cq, T sq, const std::int8_t* ck, const T* sk,
                     const std::int8_t* cv, const T* sv, std::size_t ldc, std::size_t lds, std::size_t n_keys, T scale,
                     T* o, T& lse) {
    using M = Math<T>;
    const std::size_t Dh = c.head_dim, KB = c.key_block;
    std::vector<T> s(KB), acc(Dh, T(0));
    std::vector<std::int32_t> cu(KB), iv(Dh);
    T m = T(0), l = T(0);
    auto score_j = [&](std::size_t j) {
      std::int32_t dot = 0;
      const std::int8_t* kj = ck + j * ldc;
      for (std::size_t d = 0; d < Dh; ++d) dot += std::int32_t{cq[d]} * std::int32_t{kj[d]};
      return ((static_cast<T>(dot) * sq) * sk[j * lds]) * scale;
    };
    for (std::size_t j0 = 0; j0 < n_keys; j0 += KB) {
      const std::size_t j1 = std::min(j0 + KB, n_keys), nb = j1 - j0;
      T mb = score_j(j0);
      s[0] = mb;
      for (std::size_t j = j0 + 1; j < j1; ++j) {
        s[j - j0] = score_j(j);
        mb = max2(mb, s[j - j0]);
      }
      if (j0 == 0) {
        m = mb;
      } else {
        const T mn = max2(m, mb);
        const T alpha = M::exp(m - mn);
        l = l * alpha;
        for (T& a : acc) a = a * alpha;
        m = mn;
      }
      // s[] becomes u_j = p_j · sv_j.
      T mu = static_cast<T>(kWeightFloor);
      for (std::size_t j = j0; j < j1; ++j) {
        const T p = M::exp(s[j - j0] - m);
        l = l + p;
        s[j - j0] = p * sv[j * lds];
        mu = max2(mu, s[j - j0]);
      }
      const T inv = T(127) / mu, su = mu / T(127);
      for (std::size_t jj = 0; jj < nb; ++jj)
        cu[jj] = static_cast<std::int32_t>(min2(M::floor(s[jj] * inv + T(0.5)), T(127)));
      std::fill(iv.begin(), iv.end(), 0);
      for (std::size_t jj = 0; jj < nb; ++jj) {
        const std::int8_t* vj = cv + (j0 + jj) * ldc;
        for (std::size_t d = 0; d < Dh; ++d) iv[d] += cu[jj] * std::int32_t{vj[d]};
      }
      for (std::size_t d = 0; d < Dh; ++d) acc[d] = acc[d] + static_cast<T>(iv[d]) * su;
    }
    for (std::size_t d = 0; d < Dh; ++d) o[d] = acc[d] / l;
    lse = m + M::log(l);
  }

  // The codes of one forward: q per (token, head), k and v per (token, kv head).
  template <class T>
  struct Codes {
    RowCodes<T> q, k, v;
  };
  template <class T>
  static Codes<T> codes(const Config& c, const T* q, std::size_t ldq, const T* k, const T* v, std::size_t ldkv) {
    const std::size_t rows = c.batch * c.seq;
    return {head_codes(q, rows, ldq, c.q_heads, c.head_dim), head_codes(k, rows, ldkv, c.kv_heads, c.head_dim),
            head_codes(v, rows, ldkv, c.kv_heads, c.head_dim)};
  }

  // One output row (b, h, i) from the codes (the live audits' entry too).
  template <class T>
  static void forward_row(const Config& c, const Codes<T>& z, std::size_t b, std::size_t h, std::size_t i, T scale,
                          T* o, T& lse) {
    const std::size_t Hq = c.q_heads, Hkv = c.kv_heads, Dh = c.head_dim, g = h / (Hq / Hkv);
    const std::size_t qs = (b * c.seq + i) * Hq + h, ks = (b * c.seq) * Hkv + g;
    attend(c, z.q.q.data() + qs * Dh, z.q.step[qs], z.k.q.data() + ks * Dh, z.k.step.data() + ks,
           z.v.q.data() + ks * Dh, z.v.step.data() + ks, Hkv * Dh, Hkv, i + 1, scale, o, lse);
  }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    validate(c);
    const T scale = Attention::scale_of<T>(c);
    const std::size_t qw = c.q_heads * c.head_dim, kvw = c.kv_heads * c.head_dim;
    const Codes<T> z = codes(c, in.q.ptr(), qw, in.k.ptr(), in.v.ptr(), kvw);
    Outputs<T> out{Tensor<T>({c.batch, c.seq, c.q_heads, c.head_dim}), Tensor<T>({c.batch, c.q_heads, c.seq})};
    for (std::size_t b = 0; b < c.batch; ++b)
      for (std::size_t h = 0; h < c.q_heads; ++h)
        for (std::size_t i = 0; i < c.seq; ++i)
          forward_row(c, z, b, h, i, scale, out.o.ptr() + Attention::qrow(c, b, i, h),
                      out.lse[Attention::lse_at(c, b, h, i)]);
    return out;
  }

  // q̂, k̂, v̂: the forward's codes dequantized (code · step), in the inputs' layout.
  template <class T>
  static Inputs<T> dequantized(const Config& c, const Inputs<T>& in) {
    const std::size_t qw = c.q_heads * c.head_dim, kvw = c.kv_heads * c.head_dim, Dh = c.head_dim;
    const Codes<T> z = codes(c, in.q.ptr(), qw, in.k.ptr(), in.v.ptr(), kvw);
    auto deq = [Dh](const RowCodes<T>& r, const Shape& s) {
      Tensor<T> t(s);
      for (std::size_t e = 0; e < t.numel(); ++e) t[e] = static_cast<T>(r.q[e]) * r.step[e / Dh];
      return t;
    };
    return {deq(z.q, in.q.shape), deq(z.k, in.k.shape), deq(z.v, in.v.shape)};
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>& in, const Outputs<T>& out, const Outputs<T>& dout) {
    validate(c);
    return Attention::backward(c, dequantized(c, in), out, dout);
  }

  // The straight-through surrogate (header) at x, corrections taken at `at`.
  template <class T>
  static Outputs<T> surrogate(const Config& c, const Inputs<T>& at, const Inputs<T>& x) {
    validate(c);
    using M = Math<T>;
    const Inputs<T> hat = dequantized(c, at);
    const Outputs<T> f0 = forward(c, at);
    auto shifted = [](const Tensor<T>& xv, const Tensor<T>& h, const Tensor<T>& a) {
      Tensor<T> t(xv.shape);
      for (std::size_t e = 0; e < t.numel(); ++e) t[e] = xv[e] + (h[e] - a[e]);
      return t;
    };
    const Inputs<T> xs{shifted(x.q, hat.q, at.q), shifted(x.k, hat.k, at.k), shifted(x.v, hat.v, at.v)};
    const T scale = Attention::scale_of<T>(c);
    const std::size_t Dh = c.head_dim;
    Outputs<T> out{Tensor<T>(f0.o.shape), f0.lse};
    std::vector<T> w0(c.seq), w(c.seq);
    for (std::size_t b = 0; b < c.batch; ++b)
      for (std::size_t h = 0; h < c.q_heads; ++h) {
        const std::size_t g = h / (c.q_heads / c.kv_heads);
        for (std::size_t i = 0; i < c.seq; ++i) {
          const T lse0 = f0.lse[Attention::lse_at(c, b, h, i)];
          T sum0 = T(0), sum = T(0);
          for (std::size_t j = 0; j <= i; ++j) {
            w0[j] = M::exp(Attention::score(c, hat, b, h, i, j, scale) - lse0);
            w[j] = M::exp(Attention::score(c, xs, b, h, i, j, scale) - lse0);
            sum0 = sum0 + w0[j];
            sum = sum + w[j];
          }
          const T den = sum + (T(1) - sum0);
          for (std::size_t d = 0; d < Dh; ++d) {
            T num0 = T(0), num = T(0);
            for (std::size_t j = 0; j <= i; ++j) {
              num0 = num0 + w0[j] * hat.v[Attention::kvrow(c, b, j, g) + d];
              num = num + w[j] * xs.v[Attention::kvrow(c, b, j, g) + d];
            }
            const std::size_t at_o = Attention::qrow(c, b, i, h) + d;
            out.o[at_o] = (num + (f0.o[at_o] - num0)) / den;
          }
        }
      }
    return out;
  }

  // --- gates and verification ---------------------------------------------
  using GateLayout = Attention::GateLayout;
  template <class A>
  static void gate_arrange(const GateCase<Config, GateLayout>& g, A& a) {
    Attention::gate_arrange(GateCase<Attention::Config, GateLayout>{g.config, g.shape, g.layout, g.sweep}, a);
  }
  // Attention's shapes (T off and on the 64-key block, head sizes 1..160,
  // grouped and multi-query heads, fused and separate q/k/v, padded rows,
  // key blocks 4, 5, 16, 100), every second of the swept grid to keep the
  // gate short, and every extra shape.
  static std::vector<GateCase<Config, GateLayout>> gate_cases() {
    std::vector<GateCase<Config, GateLayout>> v;
    const auto all = Attention::gate_cases();
    for (std::size_t n = 0; n < all.size(); ++n) {
      const auto& g = all[n];
      if (n < 96 && n % 2 == 1) continue;
      v.push_back({of(g.config), g.shape, g.layout, false});
    }
    return v;
  }

  static std::vector<Config> cases() {
    return {
        of({1, 6, 2, 2, 4, 0.0, 64}),   // multi-head, one key block
        of({2, 9, 4, 2, 3, 0.0, 4}),    // grouped-query, several (small) key blocks
        of({1, 70, 2, 1, 4, 0.0, 64}),  // multi-query, crosses the canonical 64-key block
    };
  }
  static Inputs<double> sample(const Config& c, ad::Rng& rng) { return Attention::sample(c, rng); }

  static void algebra(const Config& c, ad::Rng& rng, ad::Checks& k);
};

inline void UnitAttention::algebra(const Config& c, ad::Rng& rng, ad::Checks& k) {
  const Inputs<double> in = sample(c, rng);
  const auto inf = cast_fields<Inputs, float>(in);
  const std::size_t Tn = c.seq, Dh = c.head_dim;
  // Batch and prefix invariance (float, bit for bit): the first T' rows of
  // batch entry b computed alone, with only T' keys, equal the full run's
  // (prefill = decode: a row reads codes of keys <= i only).
  const auto full = forward(c, inf);
  const std::size_t Tp = Tn > 2 ? Tn - 2 : 1, b0 = c.batch - 1;
  Config cp = c;
  cp.batch = 1;
  cp.seq = Tp;
  Inputs<float> sub{Tensor<float>({1, Tp, c.q_heads, Dh}), Tensor<float>({1, Tp, c.kv_heads, Dh}),
                    Tensor<float>({1, Tp, c.kv_heads, Dh})};
  for (std::size_t t = 0; t < Tp; ++t) {
    for (std::size_t e = 0; e < c.q_heads * Dh; ++e)
      sub.q[t * c.q_heads * Dh + e] = inf.q[Attention::qrow(c, b0, t, 0) + e];
    for (std::size_t e = 0; e < c.kv_heads * Dh; ++e) {
      sub.k[t * c.kv_heads * Dh + e] = inf.k[Attention::kvrow(c, b0, t, 0) + e];
      sub.v[t * c.kv_heads * Dh + e] = inf.v[Attention::kvrow(c, b0, t, 0) + e];
    }
  }
  const auto part = forward(cp, sub);
  Tensor<float> want_o({1, Tp, c.q_heads, Dh}), want_lse({1, c.q_heads, Tp});
  for (std::size_t t = 0; t < Tp; ++t)
    for (std::size_t e = 0; e < c.q_heads * Dh; ++e)
      want_o[t * c.q_heads * Dh + e] = full.o[Attention::qrow(c, b0, t, 0) + e];
  for (std::size_t h = 0; h < c.q_heads; ++h)
    for (std::size_t t = 0; t < Tp; ++t) want_lse[h * Tp + t] = full.lse[Attention::lse_at(c, b0, h, t)];
  k.bitwise("rows independent of batch and later keys (float)", part.o, want_o);
  k.bitwise("lse independent of batch and later keys (float)", part.lse, want_lse);
}

}  // namespace lockstep::ops
