// Row softmax and the fused softmax + cross-entropy loss over logits.
// max/sum/dot are the canonical row reductions (num/reduce.hpp) in float.
//
//   Softmax, per row of C:
//     m = max(x);  e_j = exp(x_j - m);  s = sum(e);  y_j = e_j / s
//     backward: d = dot(dy, y);  dx_j = y_j * (dy_j - d)
//   CrossEntropy, per row of V logits z with target t (t < 0: ignored row):
//     m = max(z);  s = sum(exp(z_j - m));  lse = m + log(s)        saved: lse
//     loss = lse - z_t            (ignored row: loss = +0)
//     backward (fused, never materializing the softmax forward):
//       dz_j = (exp(z_j - lse) - [j == t]) * dloss              (ignored row: +0)
// The loss is per row; the mean over rows is the caller's (dloss = 1/N).
#pragma once

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/ad/check.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/ops/kernel_args.hpp"
#include "lockstep/ops/op.hpp"

namespace lockstep::ops {

struct Softmax {
  static constexpr std::string_view name = "softmax";
  struct Config {
    std::size_t rows = 0;
    std::size_t cols = 0;
  };
  template <class T>
  struct Inputs {
    Tensor<T> x;  // [rows, cols]
    static void fields(auto& s, auto&& f) { f("x", s.x, Arg::diff); }
  };
  template <class T>
  struct Outputs {
    Tensor<T> y;  // [rows, cols]
    static void fields(auto& s, auto&& f) { f("y", s.y, Arg::output); }
  };

  template <class T>
  static void row(const T* x, T* y, std::size_t C) {
    using M = Math<T>;
    const T m = M::max(x, C);
    for (std::size_t j = 0; j < C; ++j) y[j] = M::exp(x[j] - m);
    const T s = M::sum(y, C);
    for (std::size_t j = 0; j < C; ++j) y[j] = y[j] / s;
  }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    Outputs<T> out{Tensor<T>({c.rows, c.cols})};
    for (std::size_t r = 0; r < c.rows; ++r)
      row(in.x.ptr() + r * c.cols, out.y.ptr() + r * c.cols, c.cols);
    return out;
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>&, const Outputs<T>& out,
                            const Outputs<T>& dout) {
    Inputs<T> g{Tensor<T>({c.rows, c.cols})};
    for (std::size_t r = 0; r < c.rows; ++r) {
      const T* y = out.y.ptr() + r * c.cols;
      const T* dy = dout.y.ptr() + r * c.cols;
      const T d = Math<T>::dot(dy, y, c.cols);
      for (std::size_t j = 0; j < c.cols; ++j) g.x[r * c.cols + j] = y[j] * (dy[j] - d);
    }
    return g;
  }

  static std::vector<Config> cases() { return {{3, 9}, {2, 33}, {1, 2}}; }
  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    return {rng.normal({c.rows, c.cols}, 3.0)};
  }

  // Rows sum to 1 and entries are in [0, 1]. In float: each y_j = e_j/s is one
  // rounding, s = sum(e) at most C - 1 more: |Σy - 1| <= (C + 1)·2^-24 <= C·2^-23,
  // checked as |Σy - 1| / C <= 2^-23.
  static void algebra(const Config& c, ad::Rng& rng, ad::Checks& k) {
    const Inputs<double> in = sample(c, rng);
    const auto yd = forward(c, in).y;
    const auto yf = forward(c, cast_fields<Inputs, float>(in)).y;
    std::vector<double> sd(c.rows, 0.0), sf(c.rows, 0.0), one(c.rows, 1.0);
    std::uint64_t out_of_range = 0;
    for (std::size_t r = 0; r < c.rows; ++r)
      for (std::size_t j = 0; j < c.cols; ++j) {
        sd[r] += yd[r * c.cols + j];
        sf[r] += static_cast<double>(yf[r * c.cols + j]);
        out_of_range += !(yf[r * c.cols + j] >= 0.0f && yf[r * c.cols + j] <= 1.0f);
      }
    const double C = static_cast<double>(c.cols);
    k.close("rows sum to 1 (double)", sd, one, kAlgebraTol);
    for (double& v : sf) v = 1.0 + (v - 1.0) / C;
    k.close("rows sum to 1, error / C (float)", sf, one, 0x1p-23);
    k.expect("0 <= y <= 1 (float)", yf.numel(), out_of_range, "probability outside [0, 1]");
  }
};

struct CrossEntropy {
  static constexpr std::string_view name = "cross_entropy";
  struct Config {
    std::size_t rows = 0;   // N
    std::size_t vocab = 0;  // V
  };
  template <class T>
  struct Inputs {
    Tensor<T> logits;       // [N, V]
    Tensor<Index> targets;  // [N]; < 0 ignores the row
    static void fields(auto& s, auto&& f) {
      f("logits", s.logits, Arg::diff);
      f("targets", s.targets, Arg::index);
    }
  };
  template <class T>
  struct Outputs {
    Tensor<T> loss;  // [N]
    Tensor<T> lse;   // [N] logsumexp per row
    static void fields(auto& s, auto&& f) {
      f("loss", s.loss, Arg::output);
      f("lse", s.lse, Arg::saved);
    }
  };

  // Kernels (ops/kernel_args.hpp). dlogits may alias logits.
  template <class T>
  struct FwdArgs {
    const T *logits;
    const Index *targets;
    T *loss, *lse;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("logits", c.rows * c.vocab, Seed::of(Seed::Kind::logit_rows, c.vocab), c.vocab), a.logits);
      f(ops::in("targets", c.rows, Seed::of(Seed::Kind::targets, c.vocab)), a.targets);
      f(ops::saved("lse", c.rows), a.lse);
      f(ops::out("loss", c.rows), a.loss);
    }
  };
  template <class T>
  struct BwdArgs {
    const T *logits;
    const Index *targets;
    const T *lse, *dloss;
    T *dlogits;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("logits", c.rows * c.vocab, Seed::of(Seed::Kind::logit_rows, c.vocab), c.vocab), a.logits);
      f(ops::in("targets", c.rows, Seed::of(Seed::Kind::targets, c.vocab)), a.targets);
      f(ops::saved("lse", c.rows), a.lse);
      f(ops::in("dloss", c.rows), a.dloss);
      f(ops::out("dlogits", c.rows * c.vocab, c.vocab, "logits"), a.dlogits);
    }
  };
  static std::vector<GateCase<Config>> gate_cases() {
    std::vector<std::pair<std::size_t, std::size_t>> shapes;
    for (std::size_t N : {1, 3, 37, 130})
      for (std::size_t V : {1, 3, 300, 5003}) shapes.push_back({N, V});
    shapes.push_back({5, 50257});
    shapes.push_back({1, 8193});
    std::vector<GateCase<Config>> v;
    for (auto [N, V] : shapes) v.push_back({{N, V}, shape_text({{"rows", N}, {"vocab", V}})});
    return v;
  }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    using M = Math<T>;
    const std::size_t V = c.vocab;
    Outputs<T> out{Tensor<T>({c.rows}), Tensor<T>({c.rows})};
    std::vector<T> e(V);
    for (std::size_t n = 0; n < c.rows; ++n) {
      const T* z = in.logits.ptr() + n * V;
      const T m = M::max(z, V);
      for (std::size_t j = 0; j < V; ++j) e[j] = M::exp(z[j] - m);
      const T lse = m + M::log(M::sum(e.data(), V));
      out.lse[n] = lse;
      const Index t = in.targets[n];
      out.loss[n] = t < 0 ? T(0) : lse - z[target(c, t)];
    }
    return out;
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>& in, const Outputs<T>& out,
                            const Outputs<T>& dout) {
    const std::size_t V = c.vocab;
    Inputs<T> g{Tensor<T>({c.rows, V}), {}};
    for (std::size_t n = 0; n < c.rows; ++n) {
      const Index t = in.targets[n];
      if (t < 0) continue;  // ignored row: +0 gradient
      const std::size_t tt = target(c, t);
      const T* z = in.logits.ptr() + n * V;
      for (std::size_t j = 0; j < V; ++j) {
        const T p = Math<T>::exp(z[j] - out.lse[n]);
        g.logits[n * V + j] = (j == tt ? p - T(1) : p) * dout.loss[n];
      }
    }
    return g;
  }

  static std::size_t target(const Config& c, Index t) {
    if (static_cast<std::size_t>(t) >= c.vocab)
      throw std::out_of_range("cross_entropy: target " + std::to_string(t) + " >= vocab " +
                              std::to_string(c.vocab));
    return static_cast<std::size_t>(t);
  }

  static std::vector<Config> cases() { return {{4, 11}, {3, 40}}; }
  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    Inputs<double> in{rng.normal({c.rows, c.vocab}, 2.0), Tensor<Index>({c.rows})};
    for (std::size_t n = 0; n < c.rows; ++n)
      in.targets[n] = n == 1 ? -1 : static_cast<Index>(rng.below(c.vocab));  // row 1 ignored
    return in;
  }

  static void algebra(const Config& c, ad::Rng& rng, ad::Checks& k) {
    const Inputs<double> in = sample(c, rng);
    const auto inf = cast_fields<Inputs, float>(in);
    // loss >= 0 holds exactly in float too: exp(0) = 1 makes s >= 1, so
    // log(s) >= 0 and lse >= max(z) >= z_t.
    const auto of = forward(c, inf);
    std::uint64_t negative = 0;
    for (float l : of.loss.data) negative += !(l >= 0.0f);
    k.expect("loss >= 0 (float)", c.rows, negative, "negative loss");
    // The fused gradient's rows sum to zero (Σ_j p_j = 1).
    const auto od = forward(c, in);
    Outputs<double> dl{Tensor<double>({c.rows}, std::vector<double>(c.rows, 1.0)), {}};
    const auto g = backward(c, in, od, dl);
    std::vector<double> sums(c.rows, 0.0), zero(c.rows, 0.0);
    for (std::size_t n = 0; n < c.rows; ++n)
      for (std::size_t j = 0; j < c.vocab; ++j) sums[n] += g.logits[n * c.vocab + j];
    k.close("gradient rows sum to 0 (double)", sums, zero,
            kAlgebraTol);
    // The loss is -log softmax(z)_t: compare with the Softmax op's probability.
    std::vector<double> got, want;
    Softmax::Inputs<double> sm_in{in.logits};
    const auto p = Softmax::forward(Softmax::Config{c.rows, c.vocab}, sm_in).y;
    for (std::size_t n = 0; n < c.rows; ++n) {
      if (in.targets[n] < 0) continue;
      got.push_back(od.loss[n]);
      want.push_back(-std::log(p[n * c.vocab + static_cast<std::size_t>(in.targets[n])]));
    }
    k.close("loss = -log softmax_t (double)", got, want, kAlgebraTol);
  }
};

}  // namespace lockstep::ops
