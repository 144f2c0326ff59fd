#include "lockstep/ad/mutants.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "lockstep/ops/all.hpp"

namespace lockstep::ad {

namespace {

using namespace lockstep::ops;

template <class Op>
using In = InputsOf<Op, double>;
template <class Op>
using Out = OutputsOf<Op, double>;

// Applies f(name, gradient tensor) to every filled differentiable gradient.
template <class Op, class F>
void each_gradient(In<Op>& g, F&& f) {
  for (auto& v : fields_of<double>(g))
    if (v.values && v.arg == Arg::diff && !v.values->empty()) f(v.name, *v.values);
}

template <class Op>
bool same_bits(const In<Op>& a, const In<Op>& b) {
  const auto av = fields_of<double>(a);
  const auto bv = fields_of<double>(b);
  for (std::size_t f = 0; f < av.size(); ++f) {
    if (av[f].indices) {
      if (av[f].indices->data != bv[f].indices->data) return false;
      continue;
    }
    const auto& x = *av[f].values;
    const auto& y = *bv[f].values;
    if (x.shape != y.shape) return false;
    if (x.numel() != 0 && std::memcmp(x.ptr(), y.ptr(), x.numel() * sizeof(double)) != 0)
      return false;
  }
  return true;
}

// Runs the checker with `backward` on every declared case (fresh inputs).
template <class Op>
MutantResult trial(const RunOptions& o, std::string name, const Backward<Op>& backward,
                   bool expect_reject, bool may_be_equivalent = false) {
  MutantResult r;
  r.op = std::string(Op::name);
  r.mutant = std::move(name);
  r.expect_reject = expect_reject;
  r.may_be_equivalent = may_be_equivalent;
  bool differs = false;
  const auto cases = Op::cases();
  const int trials = trials_of(o.effort);
  for (std::size_t ci = 0; ci < cases.size(); ++ci)
    for (int t = 0; t < trials; ++t) {
      const auto& c = cases[ci];
      Rng rng(derive_seed(o.seed, std::string(Op::name) + "/mutants",
                          ci * 1000 + static_cast<std::size_t>(t)));
      const In<Op> x0 = Op::sample(c, rng);
      const Out<Op> out0 = Op::template forward<double>(c, x0);
      const Out<Op> dout = cotangent_for<Op>(c, out0, rng);
      differs = differs || !same_bits<Op>(backward(c, x0, out0, dout),
                                          Op::template backward<double>(c, x0, out0, dout));
      const VjpReport rep = check_vjp<Op>(c, x0, dout, backward, o.grad);
      r.entries += rep.entries();
      const double m = rep.max_rel();
      r.max_rel = std::isnan(m) || m > r.max_rel ? m : r.max_rel;
      if (!rep.pass()) {
        r.rejected = true;
        if (r.reason.empty()) {
          for (const std::string& s : rep.contract) {
            if (!r.reason.empty()) r.reason.append("; ");
            r.reason.append(s);
          }
          for (const FieldReport& f : rep.fields)
            if (!f.pass && r.reason.empty()) r.reason = f.note;
        }
      }
    }
  r.equivalent = !differs;
  return r;
}

// --- generic mutants ----------------------------------------------------------

template <class Op>
Backward<Op> transformed(std::function<void(Tensor<double>&, const Out<Op>&)> edit) {
  return [edit](const ConfigOf<Op>& c, const In<Op>& in, const Out<Op>& out, const Out<Op>& d) {
    In<Op> g = Op::template backward<double>(c, in, out, d);
    each_gradient<Op>(g, [&](std::string_view, Tensor<double>& t) { edit(t, d); });
    return g;
  };
}

// The cotangent of the first primary output, when shaped like `t`.
template <class Op>
const Tensor<double>* output_like(const Out<Op>& d, const Tensor<double>& t) {
  for (const auto& f : fields_of<double>(d))
    if (f.arg == Arg::output) return f.values->shape == t.shape ? f.values : nullptr;
  return nullptr;
}

template <class Op>
void generic(const RunOptions& o, std::vector<MutantResult>& out) {
  out.push_back(trial<Op>(o, "correct backward", true_backward<Op>(), false));
  out.push_back(trial<Op>(o, "zero gradient",
                          transformed<Op>([](Tensor<double>& t, const Out<Op>&) {
                            for (double& v : t.data) v = 0.0;
                          }),
                          true));
  out.push_back(trial<Op>(o, "negated gradient",
                          transformed<Op>([](Tensor<double>& t, const Out<Op>&) {
                            for (double& v : t.data) v = -v;
                          }),
                          true));
  out.push_back(trial<Op>(o, "identity (cotangent passed through)",
                          transformed<Op>([](Tensor<double>& t, const Out<Op>& d) {
                            if (const Tensor<double>* dy = output_like<Op>(d, t)) t = *dy;
                          }),
                          true, /*may_be_equivalent=*/true));
  out.push_back(trial<Op>(o, "gradient scaled by (1 + 1e-5)",
                          transformed<Op>([](Tensor<double>& t, const Out<Op>&) {
                            for (double& v : t.data) v *= 1.0 + 1e-5;
                          }),
                          true));
}

// --- specific mutants, each a switch with a faithful setting --------------------

// RoPE: the backward must rotate by -θ (R(θ)ᵀ = R(-θ)); the mutant rotates by +θ.
Backward<Rope> rope_rotating_by(int sign) {
  return [sign](const Rope::Config& c, const In<Rope>&, const Out<Rope>&, const Out<Rope>& d) {
    return In<Rope>{Rope::rotate(c, d.y, sign)};
  };
}

// Attention, textbook (dense P) backward. With the softmax backward,
// dS = P∘(dP - rowsum(P∘dP)); without it (the bug), dS = dP: the gradient
// with respect to the probabilities is used as the gradient of the scores.
Backward<Attention> attention_textbook(bool softmax_backward) {
  return [softmax_backward](const Attention::Config& c, const In<Attention>& in,
                            const Out<Attention>&, const Out<Attention>& d) {
    const auto P = Attention::probs(c, in);
    const double scale = Attention::scale_of<double>(c);
    const std::size_t Tn = c.seq, Dh = c.head_dim, rep = c.q_heads / c.kv_heads;
    In<Attention> g{Tensor<double>(in.q.shape), Tensor<double>(in.k.shape),
                    Tensor<double>(in.v.shape)};
    std::vector<double> dP(Tn), dS(Tn);
    for (std::size_t b = 0; b < c.batch; ++b)
      for (std::size_t h = 0; h < c.q_heads; ++h)
        for (std::size_t i = 0; i < Tn; ++i) {
          const double* p = P.ptr() + ((b * c.q_heads + h) * Tn + i) * Tn;
          const std::size_t qi = Attention::qrow(c, b, i, h);
          double rowdot = 0.0;
          for (std::size_t j = 0; j <= i; ++j) {
            const std::size_t kj = Attention::kvrow(c, b, j, h / rep);
            dP[j] = 0.0;
            for (std::size_t e = 0; e < Dh; ++e) dP[j] += d.o[qi + e] * in.v[kj + e];
            rowdot += p[j] * dP[j];
          }
          for (std::size_t j = 0; j <= i; ++j)
            dS[j] = softmax_backward ? p[j] * (dP[j] - rowdot) : dP[j];
          for (std::size_t j = 0; j <= i; ++j) {
            const std::size_t kj = Attention::kvrow(c, b, j, h / rep);
            for (std::size_t e = 0; e < Dh; ++e) {
              g.q[qi + e] += scale * dS[j] * in.k[kj + e];
              g.k[kj + e] += scale * dS[j] * in.q[qi + e];
              g.v[kj + e] += p[j] * d.o[qi + e];
            }
          }
        }
    return g;
  };
}

// ReLU²·mul: d relu(g)²/dg = 2·relu(g); the mutant drops the 2.
Backward<ReluSqMul> relu2_with_factor(double factor) {
  return [factor](const ReluSqMul::Config& c, const In<ReluSqMul>& in, const Out<ReluSqMul>& out,
                  const Out<ReluSqMul>& d) {
    In<ReluSqMul> g = ReluSqMul::backward(c, in, out, d);
    for (std::size_t i = 0; i < c.n; ++i)
      g.gate[i] = d.y[i] * in.up[i] * factor * std::max(in.gate[i], 0.0);
    return g;
  };
}

// RMSNorm: dx = (g - xhat·<g, xhat>/D)·rstd; the mutant drops the mean term
// (the path through rstd), leaving dx = g·rstd.
Backward<RmsNorm> rmsnorm_backward(bool mean_term) {
  return [mean_term](const NormConfig& c, const In<RmsNorm>& in, const Out<RmsNorm>& out,
                     const Out<RmsNorm>& d) {
    In<RmsNorm> g = RmsNorm::backward(c, in, out, d);  // dw is right either way
    const std::size_t D = c.dim;
    for (std::size_t n = 0; n < c.rows; ++n) {
      const double r = out.rstd[n];
      double dot = 0.0;
      for (std::size_t j = 0; j < D; ++j) dot += d.y[n * D + j] * in.w[j] * in.x[n * D + j] * r;
      for (std::size_t j = 0; j < D; ++j) {
        const double gj = d.y[n * D + j] * in.w[j], xh = in.x[n * D + j] * r;
        g.x[n * D + j] = (gj - (mean_term ? xh * dot / static_cast<double>(D) : 0.0)) * r;
      }
    }
    return g;
  };
}

// LayerNorm: the same omission (the mean term b = <g, xhat>/D).
Backward<LayerNorm> layernorm_backward(bool mean_term) {
  return [mean_term](const NormConfig& c, const In<LayerNorm>& in, const Out<LayerNorm>& out,
                     const Out<LayerNorm>& d) {
    In<LayerNorm> g = LayerNorm::backward(c, in, out, d);
    const std::size_t D = c.dim;
    for (std::size_t n = 0; n < c.rows; ++n) {
      const double mu = out.mean[n], r = out.rstd[n];
      double a = 0.0, b = 0.0;
      for (std::size_t j = 0; j < D; ++j) {
        const double gj = d.y[n * D + j] * in.gamma[j];
        a += gj;
        b += gj * (in.x[n * D + j] - mu) * r;
      }
      a /= static_cast<double>(D);
      b /= static_cast<double>(D);
      for (std::size_t j = 0; j < D; ++j) {
        const double gj = d.y[n * D + j] * in.gamma[j], xh = (in.x[n * D + j] - mu) * r;
        g.x[n * D + j] = (gj - a - (mean_term ? xh * b : 0.0)) * r;
      }
    }
    return g;
  };
}

// A weight gradient stored transposed ([K, M] data under the [M, K] shape).
template <class Op>
Backward<Op> weight_gradient(bool transposed) {
  return [transposed](const ConfigOf<Op>& c, const In<Op>& in, const Out<Op>& out,
                      const Out<Op>& d) {
    In<Op> g = Op::template backward<double>(c, in, out, d);
    if (transposed) {
      const std::size_t M = c.out, K = c.in;
      Tensor<double> t(g.w.shape);
      for (std::size_t m = 0; m < M; ++m)
        for (std::size_t k = 0; k < K; ++k) t[k * M + m] = g.w[m * K + k];
      g.w = t;
    }
    return g;
  };
}

// LoRA: the frozen base weight must get no gradient; the mutant writes the
// (mathematically true) dW = dyᵀ·x into it, which an optimizer would apply.
Backward<LoraLinear> lora_into_base(bool into_base) {
  return [into_base](const LoraLinear::Config& c, const In<LoraLinear>& in,
                     const Out<LoraLinear>& out, const Out<LoraLinear>& d) {
    In<LoraLinear> g = LoraLinear::backward(c, in, out, d);
    if (into_base) {
      g.w = Tensor<double>({c.out, c.in});
      matmul_dytx(c.rows, c.out, c.in, d.y.ptr(), in.x.ptr(), g.w.ptr());
    }
    return g;
  };
}

// STE: dx must flow through the dequantized weights Ŵ (what the forward
// multiplied by); the mutant uses the latent full-precision W.
template <class Op>
Backward<Op> ste_through(bool latent) {
  return [latent](const ConfigOf<Op>& c, const In<Op>& in, const Out<Op>& out, const Out<Op>& d) {
    In<Op> g = Op::template backward<double>(c, in, out, d);
    if (latent) matmul_dyw(c.rows, c.out, c.in, d.y.ptr(), in.w.ptr(), g.x.ptr());
    return g;
  };
}

// The int8 unit backward with other quantization axes (the float-backward
// cases keep the true backward).
Backward<Int8Linear> unit_axes(UnitBackwardAxes axes) {
  return [axes](const Int8Linear::Config& c, const In<Int8Linear>& in, const Out<Int8Linear>& out,
                const Out<Int8Linear>& d) {
    return c.unit_backward ? Int8Linear::unit_backward(c, in, d.y, axes) : Int8Linear::backward(c, in, out, d);
  };
}

// Cross-entropy: dz = (softmax - onehot)·dloss; the mutant forgets the one-hot.
Backward<CrossEntropy> cross_entropy_onehot(bool onehot) {
  return [onehot](const CrossEntropy::Config& c, const In<CrossEntropy>& in,
                  const Out<CrossEntropy>& out, const Out<CrossEntropy>& d) {
    In<CrossEntropy> g = CrossEntropy::backward(c, in, out, d);
    if (!onehot)
      for (std::size_t n = 0; n < c.rows; ++n)
        if (in.targets[n] >= 0)
          g.logits[n * c.vocab + static_cast<std::size_t>(in.targets[n])] += d.loss[n];
    return g;
  };
}

// Embedding: the scatter must ACCUMULATE rows of repeated tokens; the mutant
// overwrites (the last occurrence wins), the classic `=` for `+=`.
Backward<Embedding> embedding_scatter(bool accumulate) {
  return [accumulate](const Embedding::Config& c, const In<Embedding>& in, const Out<Embedding>&,
                      const Out<Embedding>& d) {
    In<Embedding> g;
    g.wte = Tensor<double>({c.vocab, c.dim});
    for (std::size_t n = 0; n < c.tokens; ++n) {
      double* row = g.wte.ptr() + static_cast<std::size_t>(in.ids[n]) * c.dim;
      for (std::size_t e = 0; e < c.dim; ++e)
        row[e] = (accumulate ? row[e] : 0.0) + d.y[n * c.dim + e];
    }
    return g;
  };
}

template <class Op>
void specific(const RunOptions&, std::vector<MutantResult>&) {}

template <>
void specific<Rope>(const RunOptions& o, std::vector<MutantResult>& out) {
  out.push_back(trial<Rope>(o, "control: backward rotates by -θ", rope_rotating_by(-1), false));
  out.push_back(trial<Rope>(o, "wrong RoPE sign (rotates by +θ)", rope_rotating_by(+1), true));
}
template <>
void specific<Attention>(const RunOptions& o, std::vector<MutantResult>& out) {
  out.push_back(trial<Attention>(o, "control: textbook backward", attention_textbook(true), false));
  out.push_back(trial<Attention>(o, "skipped softmax backward (dAttn as dScores)",
                                 attention_textbook(false), true));
}
template <>
void specific<ReluSqMul>(const RunOptions& o, std::vector<MutantResult>& out) {
  out.push_back(trial<ReluSqMul>(o, "control: factor 2", relu2_with_factor(2.0), false));
  out.push_back(trial<ReluSqMul>(o, "ReLU² missing its factor 2", relu2_with_factor(1.0), true));
}
template <>
void specific<RmsNorm>(const RunOptions& o, std::vector<MutantResult>& out) {
  out.push_back(trial<RmsNorm>(o, "control: with the mean term", rmsnorm_backward(true), false));
  out.push_back(trial<RmsNorm>(o, "RMSNorm backward missing the mean term",
                               rmsnorm_backward(false), true));
}
template <>
void specific<LayerNorm>(const RunOptions& o, std::vector<MutantResult>& out) {
  out.push_back(trial<LayerNorm>(o, "control: with the mean term", layernorm_backward(true), false));
  out.push_back(trial<LayerNorm>(o, "LayerNorm backward missing the xhat·mean term",
                                 layernorm_backward(false), true));
}
template <>
void specific<Linear>(const RunOptions& o, std::vector<MutantResult>& out) {
  out.push_back(trial<Linear>(o, "transposed weight gradient", weight_gradient<Linear>(true), true));
}
template <>
void specific<BitLinear>(const RunOptions& o, std::vector<MutantResult>& out) {
  out.push_back(
      trial<BitLinear>(o, "transposed weight gradient", weight_gradient<BitLinear>(true), true));
  out.push_back(trial<BitLinear>(o, "STE through latent W instead of ternary Ŵ",
                                 ste_through<BitLinear>(true), true));
}
template <>
void specific<Int8Linear>(const RunOptions& o, std::vector<MutantResult>& out) {
  out.push_back(trial<Int8Linear>(o, "STE through latent W instead of int8 Ŵ",
                                  ste_through<Int8Linear>(true), true));
  out.push_back(trial<Int8Linear>(o, "transposed weight gradient", weight_gradient<Int8Linear>(true), true));
  // The unit backward's axes (ops/units.hpp): W re-quantized by its rows (over
  // K, the forward's axis) for dx, x by its rows for dW. The checker's grid
  // cotangents pin these two; the axis of dy's quantization is invisible there
  // (the identity on the grid either way) and is pinned by the op's bound
  // check instead (tests/ops/units_test.cpp plants it).
  out.push_back(trial<Int8Linear>(o, "unit dx: W re-quantized by rows (over K) instead of by columns",
                                  unit_axes({.dx_w_by_rows = true}), true));
  out.push_back(trial<Int8Linear>(o, "unit dW: x quantized by rows (over K) instead of by columns",
                                  unit_axes({.dw_x_by_rows = true}), true));
}
// Attention through int8 units (ops/unit_attention.hpp): the float backward
// must run at the dequantized q̂, k̂, v̂, with D from the saved (quantized) o.
// Mutants: the latent q, k, v; the float attention's own o and lse at q̂, k̂, v̂
// (what one gets by reusing the float attention's forward for the backward).
Backward<UnitAttention> unit_attention_backward(bool latent, bool float_o) {
  return [latent, float_o](const UnitAttention::Config& c, const In<UnitAttention>& in, const Out<UnitAttention>& out,
                           const Out<UnitAttention>& d) {
    const In<UnitAttention> at = latent ? in : UnitAttention::dequantized(c, in);
    return Attention::backward(c, at, float_o ? Attention::forward(c, at) : out, d);
  };
}
template <>
void specific<UnitAttention>(const RunOptions& o, std::vector<MutantResult>& out) {
  out.push_back(trial<UnitAttention>(o, "control: float backward at q̂, k̂, v̂ with the saved o",
                                     unit_attention_backward(false, false), false));
  out.push_back(trial<UnitAttention>(o, "STE through latent q, k, v instead of q̂, k̂, v̂",
                                     unit_attention_backward(true, false), true));
  out.push_back(trial<UnitAttention>(o, "D and P from the float attention's o at q̂, k̂, v̂ (not the unit o)",
                                     unit_attention_backward(false, true), true));
}
template <>
void specific<LoraLinear>(const RunOptions& o, std::vector<MutantResult>& out) {
  out.push_back(trial<LoraLinear>(o, "LoRA gradient flowing into the frozen base",
                                  lora_into_base(true), true));
}
template <>
void specific<CrossEntropy>(const RunOptions& o, std::vector<MutantResult>& out) {
  out.push_back(trial<CrossEntropy>(o, "softmax without the one-hot subtraction",
                                    cross_entropy_onehot(false), true));
}
template <>
void specific<Embedding>(const RunOptions& o, std::vector<MutantResult>& out) {
  out.push_back(trial<Embedding>(o, "control: accumulating scatter", embedding_scatter(true), false));
  out.push_back(trial<Embedding>(o, "scatter overwrites repeated tokens (= for +=)",
                                 embedding_scatter(false), true));
}

template <class... Ops>
void all(OpList<Ops...>, const RunOptions& o, std::vector<MutantResult>& out) {
  ((generic<Ops>(o, out), specific<Ops>(o, out)), ...);
}

}  // namespace

std::vector<MutantResult> run_mutants(const RunOptions& o) {
  std::vector<MutantResult> out;
  all(AllOps{}, o, out);
  return out;
}

}  // namespace lockstep::ad
