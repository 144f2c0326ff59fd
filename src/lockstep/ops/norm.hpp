// LayerNorm (GPT-2) and RMSNorm (LLaMA, BitNet) over the last dimension D of
// an [N, D] input. sum/sumsq/dot below are the canonical row reductions
// (num/reduce.hpp) in float; "/" is the correctly rounded division.
//
// LayerNorm, per row:
//   mean = sum(x) / D;  xc_j = x_j - mean;  var = sumsq(xc) / D   (two-pass)
//   rstd = rsqrt(var + eps);  xhat_j = xc_j * rstd
//   y_j  = fma(xhat_j, gamma_j, beta_j)                            saved: mean, rstd
// backward, per row (xhat recomputed exactly as in the forward):
//   g_j = dy_j * gamma_j;  a = sum(g) / D;  b = dot(g, xhat) / D
//   dx_j = (g_j - fma(xhat_j, b, a)) * rstd
//   dgamma_j = chain_n(dy[n,j] * xhat[n,j]);  dbeta_j = +0 + dy[0,j] + dy[1,j] + ...
//
// RMSNorm, per row:
//   ms = sumsq(x) / D;  rstd = rsqrt(ms + eps);  y_j = (x_j * rstd) * w_j    saved: rstd
// backward:
//   xhat_j = x_j * rstd;  g_j = dy_j * w_j;  b = dot(g, xhat) / D
//   dx_j = (g_j - xhat_j * b) * rstd;  dw_j = chain_n(dy[n,j] * xhat[n,j])
#pragma once

#include <string_view>
#include <vector>

#include "lockstep/ad/check.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/ops/linear.hpp"
#include "lockstep/ops/kernel_args.hpp"
#include "lockstep/ops/op.hpp"

namespace lockstep::ops {

struct NormConfig {
  std::size_t rows = 0;  // N
  std::size_t dim = 0;   // D
  double eps = 1e-5;     // converted to T once (float: the nearest float)
};

// The gate shapes of the norms: rows 1, 3, 37, 130 (and 600, 1029: more than
// one 256-row tile of the column chains), dims 1 to 256 and 5000 (two 4096-
// chunks of the canonical lane tree); eps 0.5 at rows 37 too.
inline std::vector<GateCase<NormConfig>> norm_gate_cases() {
  std::vector<std::pair<std::size_t, std::size_t>> shapes;
  for (std::size_t N : {1, 3, 37, 130})
    for (std::size_t D : {1, 5, 33, 97, 256}) shapes.push_back({N, D});
  shapes.push_back({3, 5000});
  shapes.push_back({37, 5000});
  shapes.push_back({600, 97});
  shapes.push_back({1029, 33});
  std::vector<GateCase<NormConfig>> v;
  for (auto [N, D] : shapes)
    for (double eps : {1e-5, 0.5}) {
      if (eps == 0.5 && N != 37) continue;
      v.push_back({{N, D, eps}, shape_text({{"rows", N}, {"dim", D}}) + (eps == 0.5 ? " eps 0.5" : " eps 1e-05")});
    }
  return v;
}

struct LayerNorm {
  static constexpr std::string_view name = "layernorm";
  using Config = NormConfig;
  template <class T>
  struct Inputs {
    Tensor<T> x;      // [N, D]
    Tensor<T> gamma;  // [D]
    Tensor<T> beta;   // [D]
    static void fields(auto& s, auto&& f) {
      f("x", s.x, Arg::diff);
      f("gamma", s.gamma, Arg::diff);
      f("beta", s.beta, Arg::diff);
    }
  };
  template <class T>
  struct Outputs {
    Tensor<T> y;     // [N, D]
    Tensor<T> mean;  // [N]
    Tensor<T> rstd;  // [N]
    static void fields(auto& s, auto&& f) {
      f("y", s.y, Arg::output);
      f("mean", s.mean, Arg::saved);
      f("rstd", s.rstd, Arg::saved);
    }
  };

  // Kernels (ops/kernel_args.hpp).
  template <class T>
  struct FwdArgs {
    const T *x, *gamma, *beta;
    T *y, *mean, *rstd;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("x", c.rows * c.dim, Seed::of(Seed::Kind::norm_rows, c.dim), c.dim), a.x);
      f(ops::in("gamma", c.dim), a.gamma);
      f(ops::in("beta", c.dim), a.beta);
      f(ops::saved("mean", c.rows), a.mean);
      f(ops::saved("rstd", c.rows), a.rstd);
      f(ops::out("y", c.rows * c.dim, c.dim), a.y);
    }
  };
  template <class T>
  struct BwdArgs {
    const T *x, *gamma, *mean, *rstd, *dy;
    T *dx, *dgamma, *dbeta;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("x", c.rows * c.dim, Seed::of(Seed::Kind::norm_rows, c.dim), c.dim), a.x);
      f(ops::in("gamma", c.dim), a.gamma);
      f(ops::saved("mean", c.rows), a.mean);
      f(ops::saved("rstd", c.rows), a.rstd);
      f(ops::in("dy", c.rows * c.dim, Seed::normal(1.0, 1e3f), c.dim), a.dy);
      f(ops::out("dx", c.rows * c.dim, c.dim), a.dx);
      f(ops::out("dgamma", c.dim), a.dgamma);
      f(ops::out("dbeta", c.dim), a.dbeta);
    }
  };
  static std::vector<GateCase<Config>> gate_cases() { return norm_gate_cases(); }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    using M = Math<T>;
    const std::size_t D = c.dim;
    Outputs<T> out{Tensor<T>({c.rows, D}), Tensor<T>({c.rows}), Tensor<T>({c.rows})};
    std::vector<T> xc(D);
    for (std::size_t n = 0; n < c.rows; ++n) {
      const T* x = in.x.ptr() + n * D;
      const T mean = M::sum(x, D) / static_cast<T>(D);
      for (std::size_t j = 0; j < D; ++j) xc[j] = x[j] - mean;
      const T var = M::sumsq(xc.data(), D) / static_cast<T>(D);
      const T rstd = M::rsqrt(var + static_cast<T>(c.eps));
      for (std::size_t j = 0; j < D; ++j)
        out.y[n * D + j] = M::fma(xc[j] * rstd, in.gamma[j], in.beta[j]);
      out.mean[n] = mean;
      out.rstd[n] = rstd;
    }
    return out;
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>& in, const Outputs<T>& out,
                            const Outputs<T>& dout) {
    using M = Math<T>;
    const std::size_t D = c.dim, N = c.rows;
    Inputs<T> g{Tensor<T>({N, D}), Tensor<T>({D}), {}};
    Tensor<T> xhat({N, D});
    std::vector<T> gr(D);
    for (std::size_t n = 0; n < N; ++n) {
      const T mean = out.mean[n], rstd = out.rstd[n];
      T* xh = xhat.ptr() + n * D;
      for (std::size_t j = 0; j < D; ++j) {
        xh[j] = (in.x[n * D + j] - mean) * rstd;
        gr[j] = dout.y[n * D + j] * in.gamma[j];
      }
      const T a = M::sum(gr.data(), D) / static_cast<T>(D);
      const T b = M::dot(gr.data(), xh, D) / static_cast<T>(D);
      for (std::size_t j = 0; j < D; ++j) g.x[n * D + j] = (gr[j] - M::fma(xh[j], b, a)) * rstd;
    }
    // Parameter gradients: column chains over the rows (dgamma = Σ_n dy ∘ xhat).
    for (std::size_t j = 0; j < D; ++j)
      g.gamma[j] = M::dot_seq(dout.y.ptr() + j, static_cast<std::ptrdiff_t>(D), xhat.ptr() + j,
                              static_cast<std::ptrdiff_t>(D), N);
    g.beta = column_sums(dout.y.ptr(), N, D);
    return g;
  }

  // --- verification -------------------------------------------------------
  static std::vector<Config> cases() { return {{4, 8, 1e-5}, {3, 33, 1e-5}, {2, 5, 0.5}}; }

  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    // An offset mean and a spread scale exercise the centering.
    Inputs<double> in{rng.normal({c.rows, c.dim}, 2.0), rng.normal({c.dim}), rng.normal({c.dim})};
    for (double& v : in.x.data) v += 0.75;
    return in;
  }

  static void algebra(const Config& c, ad::Rng& rng, ad::Checks& k);
};

struct RmsNorm {
  static constexpr std::string_view name = "rmsnorm";
  using Config = NormConfig;
  template <class T>
  struct Inputs {
    Tensor<T> x;  // [N, D]
    Tensor<T> w;  // [D]
    static void fields(auto& s, auto&& f) {
      f("x", s.x, Arg::diff);
      f("w", s.w, Arg::diff);
    }
  };
  template <class T>
  struct Outputs {
    Tensor<T> y;     // [N, D]
    Tensor<T> rstd;  // [N]
    static void fields(auto& s, auto&& f) {
      f("y", s.y, Arg::output);
      f("rstd", s.rstd, Arg::saved);
    }
  };

  // Kernels (ops/kernel_args.hpp).
  template <class T>
  struct FwdArgs {
    const T *x, *w;
    T *y, *rstd;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("x", c.rows * c.dim, Seed::of(Seed::Kind::norm_rows, c.dim), c.dim), a.x);
      f(ops::in("w", c.dim), a.w);
      f(ops::saved("rstd", c.rows), a.rstd);
      f(ops::out("y", c.rows * c.dim, c.dim), a.y);
    }
  };
  template <class T>
  struct BwdArgs {
    const T *x, *w, *rstd, *dy;
    T *dx, *dw;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("x", c.rows * c.dim, Seed::of(Seed::Kind::norm_rows, c.dim), c.dim), a.x);
      f(ops::in("w", c.dim), a.w);
      f(ops::saved("rstd", c.rows), a.rstd);
      f(ops::in("dy", c.rows * c.dim, Seed::normal(1.0, 1e3f), c.dim), a.dy);
      f(ops::out("dx", c.rows * c.dim, c.dim), a.dx);
      f(ops::out("dw", c.dim), a.dw);
    }
  };
  // The norm shapes, and the decode's: 1 to 32 rows of the 2B4T widths (the CUDA
  // forward's CTA-a-row path, 16-byte and scalar loads) and 33 (its warp-a-row path).
  static std::vector<GateCase<Config>> gate_cases() {
    std::vector<GateCase<Config>> v = norm_gate_cases();
    const std::pair<std::size_t, std::size_t> decode[] = {{1, 2560}, {8, 2561}, {32, 2560}, {33, 2560},
                                                          {1, 6912}, {32, 6912}, {33, 6912}};
    for (auto [N, D] : decode) v.push_back({{N, D, 1e-5}, shape_text({{"rows", N}, {"dim", D}}) + " eps 1e-05"});
    return v;
  }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    using M = Math<T>;
    const std::size_t D = c.dim;
    Outputs<T> out{Tensor<T>({c.rows, D}), Tensor<T>({c.rows})};
    for (std::size_t n = 0; n < c.rows; ++n) {
      const T* x = in.x.ptr() + n * D;
      const T ms = M::sumsq(x, D) / static_cast<T>(D);
      const T rstd = M::rsqrt(ms + static_cast<T>(c.eps));
      for (std::size_t j = 0; j < D; ++j) out.y[n * D + j] = (x[j] * rstd) * in.w[j];
      out.rstd[n] = rstd;
    }
    return out;
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>& in, const Outputs<T>& out,
                            const Outputs<T>& dout) {
    using M = Math<T>;
    const std::size_t D = c.dim, N = c.rows;
    Inputs<T> g{Tensor<T>({N, D}), Tensor<T>({D})};
    Tensor<T> xhat({N, D});
    std::vector<T> gr(D);
    for (std::size_t n = 0; n < N; ++n) {
      const T rstd = out.rstd[n];
      T* xh = xhat.ptr() + n * D;
      for (std::size_t j = 0; j < D; ++j) {
        xh[j] = in.x[n * D + j] * rstd;
        gr[j] = dout.y[n * D + j] * in.w[j];
      }
      // The "mean term": the projection of g onto xhat, from d(rstd)/dx.
      const T b = M::dot(gr.data(), xh, D) / static_cast<T>(D);
      for (std::size_t j = 0; j < D; ++j) g.x[n * D + j] = (gr[j] - xh[j] * b) * rstd;
    }
    for (std::size_t j = 0; j < D; ++j)
      g.w[j] = M::dot_seq(dout.y.ptr() + j, static_cast<std::ptrdiff_t>(D), xhat.ptr() + j,
                          static_cast<std::ptrdiff_t>(D), N);
    return g;
  }

  // --- verification -------------------------------------------------------
  static std::vector<Config> cases() { return {{4, 8, 1e-6}, {3, 33, 1e-5}, {2, 5, 0.5}}; }

  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    Inputs<double> in{rng.normal({c.rows, c.dim}, 1.5), rng.normal({c.dim})};
    for (double& v : in.w.data) v += 1.0;
    return in;
  }

  static void algebra(const Config& c, ad::Rng& rng, ad::Checks& k);
};

// The moment checks: with unit gain and zero bias, LayerNorm's output has mean 0
// and mean square var/(var+eps); RMSNorm's has mean square ms/(ms+eps). These
// hold exactly in real arithmetic; they are measured in double (tolerance from
// ~D roundings of 2^-53) and in float (tolerance from ~D roundings of 2^-24).
inline void LayerNorm::algebra(const Config& c, ad::Rng& rng, ad::Checks& k) {
  Inputs<double> in = sample(c, rng);
  for (double& v : in.gamma.data) v = 1.0;
  for (double& v : in.beta.data) v = 0.0;
  const auto inf = cast_fields<Inputs, float>(in);
  const auto yd = forward(c, in).y;
  const auto yf = forward(c, inf).y;
  const std::size_t D = c.dim;
  for (int mode = 0; mode < 2; ++mode) {
    const double tol = mode == 0 ? kAlgebraTol : 0x1p-16;
    std::vector<double> mean_got, mean_want, msq_got, msq_want;
    for (std::size_t n = 0; n < c.rows; ++n) {
      // The exact statistics of the row as given to this mode (float inputs
      // for the float mode), in double.
      double mu = 0.0, var = 0.0;
      for (std::size_t j = 0; j < D; ++j)
        mu += mode == 0 ? in.x[n * D + j] : static_cast<double>(inf.x[n * D + j]);
      mu /= static_cast<double>(D);
      for (std::size_t j = 0; j < D; ++j) {
        const double x = mode == 0 ? in.x[n * D + j] : static_cast<double>(inf.x[n * D + j]);
        var += (x - mu) * (x - mu);
      }
      var /= static_cast<double>(D);
      double m1 = 0.0, m2 = 0.0;
      for (std::size_t j = 0; j < D; ++j) {
        const double y = mode == 0 ? yd[n * D + j] : static_cast<double>(yf[n * D + j]);
        m1 += y;
        m2 += y * y;
      }
      mean_got.push_back(m1 / static_cast<double>(D));
      mean_want.push_back(0.0);
      msq_got.push_back(m2 / static_cast<double>(D));
      msq_want.push_back(var / (var + static_cast<double>(mode == 0 ? c.eps
                                                                     : static_cast<double>(
                                                                           static_cast<float>(c.eps)))));
    }
    const char* m = mode == 0 ? " (double)" : " (float)";
    // The mean is compared absolutely (its exact value is 0; the output's scale is ~1).
    k.close(std::string("output mean = 0") + m, mean_got, mean_want, tol);
    k.close(std::string("output mean square = var/(var+eps)") + m, msq_got, msq_want, tol);
  }
}

inline void RmsNorm::algebra(const Config& c, ad::Rng& rng, ad::Checks& k) {
  Inputs<double> in = sample(c, rng);
  for (double& v : in.w.data) v = 1.0;
  const auto inf = cast_fields<Inputs, float>(in);
  const auto yd = forward(c, in).y;
  const auto yf = forward(c, inf).y;
  const std::size_t D = c.dim;
  for (int mode = 0; mode < 2; ++mode) {
    const double tol = mode == 0 ? kAlgebraTol : 0x1p-16;
    const double eps = mode == 0 ? c.eps : static_cast<double>(static_cast<float>(c.eps));
    std::vector<double> got, want;
    for (std::size_t n = 0; n < c.rows; ++n) {
      double ms = 0.0, m2 = 0.0;
      for (std::size_t j = 0; j < D; ++j) {
        const double x = mode == 0 ? in.x[n * D + j] : static_cast<double>(inf.x[n * D + j]);
        const double y = mode == 0 ? yd[n * D + j] : static_cast<double>(yf[n * D + j]);
        ms += x * x;
        m2 += y * y;
      }
      ms /= static_cast<double>(D);
      got.push_back(m2 / static_cast<double>(D));
      want.push_back(ms / (ms + eps));
    }
    k.close(std::string("output mean square = ms/(ms+eps)") + (mode == 0 ? " (double)" : " (float)"),
            got, want, tol);
  }
}

}  // namespace lockstep::ops
