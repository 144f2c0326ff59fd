// Causal self-attention with grouped-query heads, written as the flash
// algorithm so that a GPU kernel can compute the same bits.
//
// Layout: q [B, T, Hq, Dh], k and v [B, T, Hkv, Dh] (a projection's output
// reshaped, no transpose), o [B, T, Hq, Dh]. Query head h reads key/value head
// h / (Hq/Hkv) (Hugging Face's repeat_kv). scale = 1/sqrt(Dh) unless given.
//
// Canonical forward, for each (b, h, query i); keys j = 0..i only (causal);
// dot_seq is the GEMM cell order (acc = +0, fma over d ascending):
//   s_j = dot_seq(q_i, k_j) * scale
//   keys walked in blocks [j0, j0 + KB) from j0 = 0 (KB = key_block = 64), the
//   last block cut at i:
//     mb = max of s_j over the block
//     first block:  m = mb                       (l = +0, acc = +0)
//     later blocks: m' = max(m, mb); alpha = exp(m - m'); l = l * alpha;
//                   acc_d = acc_d * alpha; m = m'
//     then for j ascending in the block: p = exp(s_j - m); l = l + p;
//                                        acc_d = fma(p, v_jd, acc_d)
//   o_id = acc_d / l;   lse_i = m + log(l)                  saved: lse [B, Hq, T]
// A row depends only on keys 0..i, never on the batch, on later keys, or on
// how many rows are computed together (prefill = decode, bit for bit): the
// KV-cache attention of decoding (ops/cached_attention.hpp) runs this very
// per-query expression (attend) over the cached keys.
//
// Canonical backward (flash-attention 2's):
//   D_i = dot_seq(dO_i, o_i);  P_ij = exp(s_ij - lse_i);  dP_ij = dot_seq(dO_i, v_j)
//   dS_ij = P_ij * (dP_ij - D_i)
//   dq_id = chain_{j=0..i}(dS_ij * k_jd) * scale
//   dk_jd = chain_{h in group, ascending} chain_{i=j..T-1}(dS^h_ij * q^h_id) * scale
//   dv_jd = chain_{h in group, ascending} chain_{i=j..T-1}(P^h_ij * dO^h_id)
// In double the same code is the textbook softmax(QKᵀ·scale + mask)·V.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/ad/check.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/ops/kernel_args.hpp"
#include "lockstep/ops/op.hpp"
#include "lockstep/ops/softmax.hpp"

namespace lockstep::ops {

struct Attention {
  static constexpr std::string_view name = "attention";
  struct Config {
    std::size_t batch = 0;
    std::size_t seq = 0;
    std::size_t q_heads = 0;
    std::size_t kv_heads = 0;  // divides q_heads (1: multi-query; q_heads: multi-head)
    std::size_t head_dim = 0;
    double scale = 0.0;           // 0: 1/sqrt(head_dim), computed in T
    std::size_t key_block = 64;   // the canonical online-softmax block
  };
  template <class T>
  struct Inputs {
    Tensor<T> q, k, v;
    static void fields(auto& s, auto&& f) {
      f("q", s.q, Arg::diff);
      f("k", s.k, Arg::diff);
      f("v", s.v, Arg::diff);
    }
  };
  template <class T>
  struct Outputs {
    Tensor<T> o;    // [B, T, Hq, Dh]
    Tensor<T> lse;  // [B, Hq, T]
    static void fields(auto& s, auto&& f) {
      f("o", s.o, Arg::output);
      f("lse", s.lse, Arg::saved);
    }
  };

  // Kernels (ops/kernel_args.hpp). q: rows of q_heads·head_dim values, ldq
  // apart (one row per token); k, v: rows of kv_heads·head_dim, ldkv apart;
  // o, dout: contiguous [tokens, q_heads·head_dim]; lse [batch, q_heads, seq];
  // dq/dk/dv with ldq/ldkv, the cells between rows untouched. In GPT-2's
  // fused q|k|v rows (ldq = ldkv = (q_heads + 2·kv_heads)·head_dim) k starts
  // q_heads·head_dim cells into its row and v kv_heads·head_dim cells later:
  // the gates place them there (Field::lead), pointer alignment included.
  template <class T>
  struct FwdArgs {
    const T *q;
    std::size_t ldq;
    const T *k, *v;
    std::size_t ldkv;
    T *o, *lse;
    static void fields(auto& a, const Config& c, auto&& f) {
      const Places p(c, a.ldq, a.ldkv);
      f(ops::in("q", p.n_q, Seed::normal(1.5), a.ldq), a.q);
      f(lead(ops::in("k", p.n_kv - p.lead_k, Seed::normal(1.5), a.ldkv), p.lead_k), a.k);
      f(lead(ops::in("v", p.n_kv - p.lead_v, Seed::normal(1.5), a.ldkv), p.lead_v), a.v);
      f(ops::out("o", p.rows * p.qw, p.qw), a.o);
      f(ops::saved("lse", c.batch * c.q_heads * c.seq, c.seq), a.lse);
    }
  };
  template <class T>
  struct BwdArgs {
    const T *q;
    std::size_t ldq;
    const T *k, *v;
    std::size_t ldkv;
    const T *o, *lse, *dout;
    T *dq, *dk, *dv;
    static void fields(auto& a, const Config& c, auto&& f) {
      const Places p(c, a.ldq, a.ldkv);
      f(ops::in("q", p.n_q, Seed::normal(1.5), a.ldq), a.q);
      f(lead(ops::in("k", p.n_kv - p.lead_k, Seed::normal(1.5), a.ldkv), p.lead_k), a.k);
      f(lead(ops::in("v", p.n_kv - p.lead_v, Seed::normal(1.5), a.ldkv), p.lead_v), a.v);
      f(ops::saved("o", p.rows * p.qw, p.qw), a.o);
      f(ops::saved("lse", c.batch * c.q_heads * c.seq, c.seq), a.lse);
      f(ops::in("dout", p.rows * p.qw, Seed::normal(1.0), p.qw), a.dout);
      f(ops::out("dq", p.n_q, a.ldq), a.dq);
      f(lead(ops::out("dk", p.n_kv - p.lead_k, a.ldkv), p.lead_k), a.dk);
      f(lead(ops::out("dv", p.n_kv - p.lead_v, a.ldkv), p.lead_v), a.dv);
    }
  };
  // Where the strided arguments lie (see FwdArgs).
  struct Places {
    std::size_t rows, qw, kvw, n_q, n_kv, lead_k = 0, lead_v = 0;
    Places(const Config& c, std::size_t ldq, std::size_t ldkv)
        : rows(c.batch * c.seq), qw(c.q_heads * c.head_dim), kvw(c.kv_heads * c.head_dim), n_q(rows * ldq),
          n_kv(rows * ldkv) {
      if (ldq == qw + 2 * kvw && ldkv == ldq) {
        lead_k = qw;
        lead_v = qw + kvw;
      }
    }
  };
  static Field lead(Field f, std::size_t cells) {
    f.lead = cells;
    return f;
  }

  // The gates' layouts: q, k, v fused in one row (GPT-2) or separate tensors
  // (LLaMA), rows `pad` cells longer than that.
  struct GateLayout {
    bool fused = false;
    std::size_t pad = 0;
  };
  template <class A>
  static void gate_arrange(const GateCase<Config, GateLayout>& g, A& a) {
    const std::size_t qw = g.config.q_heads * g.config.head_dim, kvw = g.config.kv_heads * g.config.head_dim;
    a.ldq = (g.layout.fused ? qw + 2 * kvw : qw) + g.layout.pad;
    a.ldkv = (g.layout.fused ? qw + 2 * kvw : kvw) + g.layout.pad;
  }
  // Sequence lengths off and on the 64-key block (1, 2, 63, 64, 65, 130),
  // head sizes 1, 8, 33, 64 (and 17, 100, 128 for the other register
  // tilings, 160 for the per-cell kernels), multi-head, grouped-query and
  // multi-query heads, batch 1 and 3, fused and separate q/k/v; then other
  // key blocks (the per-cell kernels) and padded rows. Swept: the backward
  // runs each of its paths (attention_bwd's dS stored, in chunks, recomputed).
  static std::vector<GateCase<Config, GateLayout>> gate_cases() {
    struct S {
      std::size_t batch, seq, q_heads, kv_heads, head_dim;
      bool fused;
      std::size_t key_block = 64, pad = 0;
    };
    std::vector<S> shapes;
    const std::size_t seqs[] = {1, 2, 63, 64, 65, 130};
    const std::size_t dims[] = {1, 8, 33, 64};
    const std::size_t heads[][2] = {{1, 1}, {4, 2}, {6, 1}, {12, 12}};
    // Every (T, Dh, heads) triple; batch and layout alternate so that each
    // value of either meets every T, every Dh and every head grouping.
    std::size_t n = 0;
    for (std::size_t t : seqs)
      for (std::size_t d : dims)
        for (const auto& h : heads) {
          const bool fused = (n + n / 4) % 2 == 0;
          const std::size_t batch = (n / 2 + n / 8) % 2 == 0 ? 1 : 3;
          shapes.push_back({batch, t, h[0], h[1], d, fused});
          ++n;
        }
    shapes.push_back({2, 129, 4, 4, 17, true});
    shapes.push_back({1, 130, 2, 1, 100, false});
    shapes.push_back({1, 193, 2, 1, 128, true});
    shapes.push_back({1, 300, 12, 4, 64, true});
    shapes.push_back({2, 70, 4, 2, 33, true, 16});
    shapes.push_back({1, 130, 2, 2, 8, false, 100});
    shapes.push_back({1, 65, 2, 2, 160, true});
    // Padded rows (strides past the row), key blocks of 4 and 5.
    shapes.push_back({2, 131, 4, 2, 16, false, 64, 5});
    shapes.push_back({1, 129, 2, 2, 64, false, 64, 7});
    shapes.push_back({2, 9, 4, 2, 3, false, 4});
    shapes.push_back({1, 67, 3, 3, 20, false, 5});
    shapes.push_back({3, 5, 8, 2, 32, false});
    std::vector<GateCase<Config, GateLayout>> v;
    for (const S& s : shapes) {
      std::string text = "B " + std::to_string(s.batch) + " T " + std::to_string(s.seq) + " Hq " +
                         std::to_string(s.q_heads) + " Hkv " + std::to_string(s.kv_heads) + " Dh " +
                         std::to_string(s.head_dim) + (s.fused ? " (fused qkv)" : "");
      if (s.key_block != 64) text += " key_block " + std::to_string(s.key_block);
      if (s.pad != 0) text += " rows padded by " + std::to_string(s.pad);
      v.push_back({{s.batch, s.seq, s.q_heads, s.kv_heads, s.head_dim, 0.0, s.key_block}, text, {s.fused, s.pad},
                   true});
    }
    return v;
  }

  static void validate(const Config& c) {
    if (c.kv_heads == 0 || c.q_heads % c.kv_heads != 0)
      throw std::invalid_argument("attention: kv_heads must divide q_heads");
    if (c.key_block == 0) throw std::invalid_argument("attention: key_block must be > 0");
  }
  template <class T>
  static T scale_of(const Config& c) {
    return c.scale > 0.0 ? static_cast<T>(c.scale)
                         : T(1) / Math<T>::sqrt(static_cast<T>(c.head_dim));
  }
  // Offsets of the row vectors.
  static std::size_t qrow(const Config& c, std::size_t b, std::size_t t, std::size_t h) {
    return ((b * c.seq + t) * c.q_heads + h) * c.head_dim;
  }
  static std::size_t kvrow(const Config& c, std::size_t b, std::size_t t, std::size_t g) {
    return ((b * c.seq + t) * c.kv_heads + g) * c.head_dim;
  }
  static std::size_t lse_at(const Config& c, std::size_t b, std::size_t h, std::size_t t) {
    return (b * c.q_heads + h) * c.seq + t;
  }
  template <class T>
  static T score(const Config& c, const Inputs<T>& in, std::size_t b, std::size_t h,
                 std::size_t i, std::size_t j, T scale) {
    const std::size_t g = h / (c.q_heads / c.kv_heads);
    return Math<T>::dot_seq(in.q.ptr() + qrow(c, b, i, h), 1, in.k.ptr() + kvrow(c, b, j, g), 1,
                            c.head_dim) *
           scale;
  }

  // The forward's per-query expression on raw rows: one query q (head_dim
  // values) over keys j = 0..n_keys-1, key j at k + j·ldkv and its value at
  // v + j·ldkv (the query head's kv head already chosen): o (head_dim values)
  // and lse. forward_row below and the KV-cache attention of decoding
  // (ops/cached_attention.hpp) both run this code: whatever holds the keys,
  // a query at position i over keys 0..i has one expression (prefill = decode).
  template <class T>
  static void attend(const Config& c, const T* q, const T* k, const T* v, std::size_t ldkv, std::size_t n_keys,
                     T scale, T* o, T& lse) {
    using M = Math<T>;
    const std::size_t Dh = c.head_dim;
    std::vector<T> s(c.key_block), acc(Dh, T(0));
    T m = T(0), l = T(0);
    auto score_j = [&](std::size_t j) { return M::dot_seq(q, 1, k + j * ldkv, 1, Dh) * scale; };
    for (std::size_t j0 = 0; j0 < n_keys; j0 += c.key_block) {
      const std::size_t j1 = std::min(j0 + c.key_block, n_keys);
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
      for (std::size_t j = j0; j < j1; ++j) {
        const T p = M::exp(s[j - j0] - m);
        l = l + p;
        const T* vj = v + j * ldkv;
        for (std::size_t d = 0; d < Dh; ++d) acc[d] = M::fma(p, vj[d], acc[d]);
      }
    }
    for (std::size_t d = 0; d < Dh; ++d) o[d] = acc[d] / l;
    lse = m + M::log(l);
  }

  // One output row: o[b, i, h, :] and lse[b, h, i] (a row reads q row i and
  // key/value rows 0..i of its group only). The live audits recompute single
  // rows of a device's output with it.
  template <class T>
  static void forward_row(const Config& c, const Inputs<T>& in, std::size_t b, std::size_t h, std::size_t i,
                          T scale, T* o, T& lse) {
    const std::size_t g = h / (c.q_heads / c.kv_heads);
    attend(c, in.q.ptr() + qrow(c, b, i, h), in.k.ptr() + kvrow(c, b, 0, g), in.v.ptr() + kvrow(c, b, 0, g),
           c.kv_heads * c.head_dim, i + 1, scale, o, lse);
  }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    validate(c);
    const T scale = scale_of<T>(c);
    Outputs<T> out{Tensor<T>({c.batch, c.seq, c.q_heads, c.head_dim}),
                   Tensor<T>({c.batch, c.q_heads, c.seq})};
    for (std::size_t b = 0; b < c.batch; ++b)
      for (std::size_t h = 0; h < c.q_heads; ++h)
        for (std::size_t i = 0; i < c.seq; ++i)
          forward_row(c, in, b, h, i, scale, out.o.ptr() + qrow(c, b, i, h), out.lse[lse_at(c, b, h, i)]);
    return out;
  }

  // The backward's pieces, extracted (as forward_row is) so that the live
  // audits recompute single rows of a device's gradients with the spec's own
  // code; `backward` is written with them, so the spec stays one expression.
  //
  // D_i = dot_seq(dO_i, o_i) of query row (b, h, i).
  template <class T>
  static T backward_D(const Config& c, const Outputs<T>& out, const Outputs<T>& dout, std::size_t b, std::size_t h,
                      std::size_t i) {
    return Math<T>::dot_seq(dout.o.ptr() + qrow(c, b, i, h), 1, out.o.ptr() + qrow(c, b, i, h), 1, c.head_dim);
  }
  // P_ij = exp(s_ij - lse_i) and dS_ij = P_ij * (dP_ij - D_i), dP_ij = dot_seq(dO_i, v_j),
  // of query row (b, h, i) and key j <= i.
  template <class T>
  struct ProbGrad {
    T p, ds;
  };
  template <class T>
  static ProbGrad<T> backward_pds(const Config& c, const Inputs<T>& in, const Outputs<T>& dout, std::size_t b,
                                  std::size_t h, std::size_t i, std::size_t j, T Di, T lse, T scale) {
    using M = Math<T>;
    const std::size_t g = h / (c.q_heads / c.kv_heads);
    const T p = M::exp(score(c, in, b, h, i, j, scale) - lse);
    const T dp = M::dot_seq(dout.o.ptr() + qrow(c, b, i, h), 1, in.v.ptr() + kvrow(c, b, j, g), 1, c.head_dim);
    return {p, p * (dp - Di)};
  }
  // One query row: P_ij and dS_ij for j = 0..i (into P[j], dS[j]) and
  //   dq[d] = chain_{j=0..i}(dS_ij * k_jd) * scale        (dq: the row dq[b, i, h, :])
  template <class T>
  static void backward_q_row(const Config& c, const Inputs<T>& in, const Outputs<T>& out, const Outputs<T>& dout,
                             std::size_t b, std::size_t h, std::size_t i, T scale, T* P, T* dS, T* dq) {
    using M = Math<T>;
    const std::size_t g = h / (c.q_heads / c.kv_heads);
    const T Di = backward_D(c, out, dout, b, h, i);
    const T lse = out.lse[lse_at(c, b, h, i)];
    for (std::size_t j = 0; j <= i; ++j) {
      const ProbGrad<T> x = backward_pds(c, in, dout, b, h, i, j, Di, lse, scale);
      P[j] = x.p;
      dS[j] = x.ds;
    }
    for (std::size_t d = 0; d < c.head_dim; ++d) {
      T acc = T(0);
      for (std::size_t j = 0; j <= i; ++j) acc = M::fma(dS[j], in.k[kvrow(c, b, j, g) + d], acc);
      dq[d] = acc * scale;
    }
  }
  // One key row j of kv head g: with P^r_ij = P[r * ldr + i * ldi] and dS^r_ij
  // likewise (r: the group's r-th query head g·rep + r; i = j..T-1),
  //   dk[d] = chain_{r ascending} chain_{i=j..T-1}(dS^r_ij * q^r_id) * scale
  //   dv[d] = chain_{r ascending} chain_{i=j..T-1}(P^r_ij * dO^r_id)
  template <class T>
  static void backward_kv_row(const Config& c, const Inputs<T>& in, const Outputs<T>& dout, std::size_t b,
                              std::size_t g, std::size_t j, T scale, const T* P, const T* dS, std::size_t ldr,
                              std::size_t ldi, T* dk, T* dv) {
    using M = Math<T>;
    const std::size_t rep = c.q_heads / c.kv_heads;
    for (std::size_t d = 0; d < c.head_dim; ++d) {
      T ak = T(0), av = T(0);
      for (std::size_t r = 0; r < rep; ++r)
        for (std::size_t i = j; i < c.seq; ++i) {
          const std::size_t h = g * rep + r;
          ak = M::fma(dS[r * ldr + i * ldi], in.q[qrow(c, b, i, h) + d], ak);
          av = M::fma(P[r * ldr + i * ldi], dout.o[qrow(c, b, i, h) + d], av);
        }
      dk[d] = ak * scale;
      dv[d] = av;
    }
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>& in, const Outputs<T>& out,
                            const Outputs<T>& dout) {
    validate(c);
    const std::size_t Tn = c.seq, rep = c.q_heads / c.kv_heads;
    const T scale = scale_of<T>(c);
    Inputs<T> g{Tensor<T>(in.q.shape), Tensor<T>(in.k.shape), Tensor<T>(in.v.shape)};
    // P and dS of the rep query heads of one kv head: [rep, T, T], lower triangle.
    std::vector<T> P(rep * Tn * Tn), dS(rep * Tn * Tn);
    auto at = [Tn](std::size_t r, std::size_t i, std::size_t j) { return (r * Tn + i) * Tn + j; };
    for (std::size_t b = 0; b < c.batch; ++b)
      for (std::size_t kv = 0; kv < c.kv_heads; ++kv) {
        for (std::size_t r = 0; r < rep; ++r) {
          const std::size_t h = kv * rep + r;
          for (std::size_t i = 0; i < Tn; ++i)
            backward_q_row(c, in, out, dout, b, h, i, scale, P.data() + at(r, i, 0), dS.data() + at(r, i, 0),
                           g.q.ptr() + qrow(c, b, i, h));
        }
        // dk_j, dv_j: chains over the group's heads, then the queries i >= j.
        for (std::size_t j = 0; j < Tn; ++j)
          backward_kv_row(c, in, dout, b, kv, j, scale, P.data() + at(0, 0, j), dS.data() + at(0, 0, j), Tn * Tn,
                          Tn, g.k.ptr() + kvrow(c, b, j, kv), g.v.ptr() + kvrow(c, b, j, kv));
      }
    return g;
  }

  // The textbook attention probabilities softmax(QKᵀ·scale + causal mask),
  // dense [B, Hq, T, T] with zeros above the diagonal (checks and mutants).
  template <class T>
  static Tensor<T> probs(const Config& c, const Inputs<T>& in) {
    validate(c);
    const T scale = scale_of<T>(c);
    Tensor<T> P({c.batch, c.q_heads, c.seq, c.seq});
    std::vector<T> s(c.seq);
    for (std::size_t b = 0; b < c.batch; ++b)
      for (std::size_t h = 0; h < c.q_heads; ++h)
        for (std::size_t i = 0; i < c.seq; ++i) {
          for (std::size_t j = 0; j <= i; ++j) s[j] = score(c, in, b, h, i, j, scale);
          Softmax::row(s.data(), P.ptr() + ((b * c.q_heads + h) * c.seq + i) * c.seq, i + 1);
        }
    return P;
  }

  // --- verification -------------------------------------------------------
  static std::vector<Config> cases() {
    return {
        {1, 6, 2, 2, 4, 0.0, 64},   // multi-head, one key block
        {2, 9, 4, 2, 3, 0.0, 4},    // grouped-query, several (small) key blocks
        {1, 70, 2, 1, 4, 0.0, 64},  // multi-query, crosses the canonical 64-key block
    };
  }
  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    return {rng.normal({c.batch, c.seq, c.q_heads, c.head_dim}, 1.5),
            rng.normal({c.batch, c.seq, c.kv_heads, c.head_dim}, 1.5),
            rng.normal({c.batch, c.seq, c.kv_heads, c.head_dim})};
  }

  static void algebra(const Config& c, ad::Rng& rng, ad::Checks& k);
};

inline void Attention::algebra(const Config& c, ad::Rng& rng, ad::Checks& k) {
  const Inputs<double> in = sample(c, rng);
  const std::size_t Tn = c.seq, Dh = c.head_dim, rep = c.q_heads / c.kv_heads;
  // 1. The online (flash) forward equals the textbook P·V (double).
  const auto P = probs(c, in);
  Tensor<double> o_ref({c.batch, Tn, c.q_heads, Dh});
  std::vector<double> rowsum, one;
  for (std::size_t b = 0; b < c.batch; ++b)
    for (std::size_t h = 0; h < c.q_heads; ++h)
      for (std::size_t i = 0; i < Tn; ++i) {
        const double* p = P.ptr() + ((b * c.q_heads + h) * Tn + i) * Tn;
        double sum = 0.0;
        for (std::size_t j = 0; j <= i; ++j) sum += p[j];
        rowsum.push_back(sum);
        one.push_back(1.0);
        for (std::size_t d = 0; d < Dh; ++d)
          for (std::size_t j = 0; j <= i; ++j)
            o_ref[qrow(c, b, i, h) + d] += p[j] * in.v[kvrow(c, b, j, h / rep) + d];
      }
  k.close("flash forward = textbook softmax·V (double)", forward(c, in).o, o_ref, kAlgebraTol);
  k.close("attention rows sum to 1 (double)", rowsum, one, kAlgebraTol);

  // 2. Batch and prefix invariance (float, bit for bit): the first T' rows of
  // batch entry b computed alone, with only T' keys, equal the full run's.
  const auto inf = cast_fields<Inputs, float>(in);
  const auto full = forward(c, inf);
  const std::size_t Tp = Tn > 2 ? Tn - 2 : 1, b0 = c.batch - 1;
  Config cp = c;
  cp.batch = 1;
  cp.seq = Tp;
  Inputs<float> sub{Tensor<float>({1, Tp, c.q_heads, Dh}), Tensor<float>({1, Tp, c.kv_heads, Dh}),
                    Tensor<float>({1, Tp, c.kv_heads, Dh})};
  for (std::size_t t = 0; t < Tp; ++t) {
    for (std::size_t e = 0; e < c.q_heads * Dh; ++e)
      sub.q[t * c.q_heads * Dh + e] = inf.q[qrow(c, b0, t, 0) + e];
    for (std::size_t e = 0; e < c.kv_heads * Dh; ++e) {
      sub.k[t * c.kv_heads * Dh + e] = inf.k[kvrow(c, b0, t, 0) + e];
      sub.v[t * c.kv_heads * Dh + e] = inf.v[kvrow(c, b0, t, 0) + e];
    }
  }
  const auto part = forward(cp, sub);
  Tensor<float> want_o({1, Tp, c.q_heads, Dh}), want_lse({1, c.q_heads, Tp});
  for (std::size_t t = 0; t < Tp; ++t)
    for (std::size_t e = 0; e < c.q_heads * Dh; ++e)
      want_o[t * c.q_heads * Dh + e] = full.o[qrow(c, b0, t, 0) + e];
  for (std::size_t h = 0; h < c.q_heads; ++h)
    for (std::size_t t = 0; t < Tp; ++t) want_lse[h * Tp + t] = full.lse[lse_at(c, b0, h, t)];
  k.bitwise("rows independent of batch and later keys (float)", part.o, want_o);
  k.bitwise("lse independent of batch and later keys (float)", part.lse, want_lse);

  // 3. Grouped-query attention = multi-head attention on repeated K/V heads
  // (float, bit for bit).
  if (rep > 1) {
    Config cm = c;
    cm.kv_heads = c.q_heads;
    Inputs<float> mha{inf.q, Tensor<float>(inf.q.shape), Tensor<float>(inf.q.shape)};
    for (std::size_t b = 0; b < c.batch; ++b)
      for (std::size_t t = 0; t < Tn; ++t)
        for (std::size_t h = 0; h < c.q_heads; ++h)
          for (std::size_t d = 0; d < Dh; ++d) {
            mha.k[qrow(c, b, t, h) + d] = inf.k[kvrow(c, b, t, h / rep) + d];
            mha.v[qrow(c, b, t, h) + d] = inf.v[kvrow(c, b, t, h / rep) + d];
          }
    k.bitwise("grouped-query = multi-head on repeated K/V (float)", forward(cm, mha).o, full.o);
  }
}

}  // namespace lockstep::ops
