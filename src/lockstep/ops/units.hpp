// The int8 unit linear (DESIGN.md §1 "Int8 units"; docs/UNITS.md): y = x·Wᵀ + b
// on int8 codes with exact int32 accumulation, trained through the
// straight-through estimator (STE), with the float backward (dx = dy·Ŵ,
// dW = dyᵀ·x̂) or, with Config::unit_backward, a backward whose two products
// run through int8 codes as well.
//
// Quantizer (ops/quant.hpp, quantize_rows; "/" is the correctly rounded
// division, floor and the clamps are exact, so every device produces the same
// codes). A vector v (one row or one column of an operand) of length L:
//   m = max(max_i |v_i|, floor);  inv = 127 / m
//   q_i = clamp(floor(v_i * inv + 0.5), -127, 127)      (int8)
//   step = m / 127                                      (dequantized: q * step)
// floor = kFloor (1e-8) for x and W, kGradFloor (2^-100) for the cotangent dy
// (a gradient row may be far below 1e-8 and is not to be zeroed; 127 / 2^-100
// is finite).
//
// WHICH AXIS each quantization uses, and why. An int8 product C = A·B sums
// over one index (the contraction axis), and its int32 sum Σ q^A q^B can be
// turned back into Σ (q^A s^A)(q^B s^B) by ONE product of scales only if each
// scale is constant along that index: a scale may vary along the axes that
// survive (the output's rows and columns), never along the contraction axis.
// So every operand is quantized in vectors that run ALONG the contraction axis
// (one scale per vector, the vectors indexed by an output axis):
//   forward   y[n,m]  = Σ_k x[n,k] W[m,k]:   contraction k (= in, K)
//             x: per row n (a token) over k;  W: per output row m over k
//   unit dX   dx[n,k] = Σ_m dy[n,m] W[m,k]:  contraction m (= out, M)
//             dy: per row n over m;  W: re-quantized per column k over m
//   unit dW   dW[m,k] = Σ_n dy[n,m] x[n,k]:  contraction n (= rows, N)
//             dy: per column m over n;  x: per column k over n
// The unit backward re-quantizes the latent x and W (not the forward's x̂, Ŵ),
// so each of its operands carries one quantization error.
//
// Forward, in this order (the epilogue's rounding schedule, every step one
// correctly rounded binary32 operation):
//   acc[n,m] = Σ_k q^x[n,k] · q^W[m,k]                     int32, exact (K <= 131071)
//   y[n,m]   = ((f32(acc) * step^x_n) * step^W_m) + b[m]    int32→f32, ·step_n, ·wstep_m, +bias
// (the bias add only with Config::bias). An activation that follows (GELU,
// SwiGLU, ...) is its own op, applied to y.
//
// Backward, float STE (unit_backward false): with x̂ = q^x·step^x and
// Ŵ = q^W·step^W,
//   dx = dy·Ŵ,  dW = dyᵀ·x̂           (canonical GEMM chains, ops::matmul_dyw / matmul_dytx)
//   db[m] = +0 + dy[0,m] + dy[1,m] + ...  (rows ascending, as ops::Linear)
// the exact vector-Jacobian product of the surrogate y(x, W) = (x + c_x)·(W + c_W)ᵀ + b
// with c_x = x̂₀ - x₀, c_W = Ŵ₀ - W₀ held constant (ops/quant.hpp).
//
// Backward, unit (unit_backward true), the axes above (a = dy by rows, g = W by
// columns, c = dy by columns, d = x by columns; codes q, steps s):
//   dx[n,k] = (f32(Σ_m q^a[n,m] q^g[m,k]) * s^a_n) * s^g_k
//   dW[m,k] = (f32(Σ_n q^c[n,m] q^d[n,k]) * s^c_m) * s^d_k
//   db      = as the float backward (a float column sum: no product to save)
// Both sums are exact int32 (M, N <= 131071: checked, naming the shape). Where
// dy happens to lie on the int8 grid of both its rows and its columns (every
// value an integer multiple of one power of two, each row and column holding
// ±127 of them) this is the exact VJP of the surrogate with the corrections
// of the backward's quantizers, c_x = x̃₀ - x₀ (x by columns) and
// c_W = W̃₀ - W₀ (W by columns): that is what the gradient checker verifies,
// with such cotangents (`cotangent`). Off the grid, the quantization of dy is
// bounded: algebra() checks every gradient against the float STE backward
// within the bound its quantizers imply (unit_backward_excess).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "lockstep/ad/check.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/ops/kernel_args.hpp"
#include "lockstep/ops/linear.hpp"
#include "lockstep/ops/op.hpp"
#include "lockstep/ops/quant.hpp"

namespace lockstep::ops {

// The codes of the COLUMNS of x [rows, cols]: column j quantized over the rows,
// stored transposed, q[j * rows + n] (the layout the int8 product reads: each
// contraction vector contiguous), one step per column.
template <class T>
RowCodes<T> quantize_cols(const T* x, std::size_t rows, std::size_t cols, T floor_value) {
  std::vector<T> t(rows * cols);
  for (std::size_t n = 0; n < rows; ++n)
    for (std::size_t j = 0; j < cols; ++j) t[j * rows + n] = x[n * cols + j];
  return quantize_rows(t.data(), cols, rows, floor_value);
}

// The unit epilogue: out[i, j] = (f32(acc[i, j]) * sa[i]) * sb[j] (+ bias[j]).
template <class T>
T unit_epilogue(std::int32_t acc, T sa_i, T sb_j) {
  return (static_cast<T>(acc) * sa_i) * sb_j;
}

struct Int8LinearConfig {
  std::size_t rows = 0;  // N (tokens)
  std::size_t in = 0;    // K
  std::size_t out = 0;   // M
  bool bias = false;
  bool unit_backward = false;  // dx and dW through int8 products (the second canonical backward)
};

// Which axis each operand of the unit backward is quantized along: the
// canonical choice, and the wrong ones the tests plant (by_rows = one scale
// per row of the operand as stored: dy [N, M], W [M, K], x [N, K]).
struct UnitBackwardAxes {
  bool dx_dy_by_rows = true;   // dx: dy per row n (over m)
  bool dx_w_by_rows = false;   // dx: W per column k (over m)
  bool dw_dy_by_rows = false;  // dW: dy per column m (over n)
  bool dw_x_by_rows = false;   // dW: x per column k (over n)
};

struct Int8Linear {
  static constexpr std::string_view name = "int8_linear";
  using Config = Int8LinearConfig;
  static constexpr double kFloor = 1e-8;          // absmax floor of x and W
  static constexpr double kGradFloor = 0x1p-100;  // absmax floor of dy (unit backward)

  // nn.Linear's tensors (ops/linear.hpp): x [N, K], the latent (full-precision)
  // weights w [M, K], the bias b [M] (empty without bias); y [N, M].
  template <class T>
  using Inputs = Linear::Inputs<T>;
  template <class T>
  using Outputs = Linear::Outputs<T>;

  // Kernels (ops/kernel_args.hpp). b is null without a bias, and so is db.
  // The kernels keep nothing: the backward quantizes x and W again (the same
  // codes: a deterministic function of the same inputs).
  template <class T>
  struct FwdArgs {
    const T *x, *w, *b;
    T *y;
    // Activations with a spread of magnitudes per row; weights around the scale.
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("x", c.rows * c.in, Seed::uniform(-3, 3), c.in), a.x);
      f(ops::in("w", c.out * c.in, Seed::uniform(-0.1, 0.1), c.in), a.w);
      f(ops::in("b", c.bias ? c.out : 0, Seed::uniform(-1, 1)), a.b);
      f(ops::out("y", c.rows * c.out, c.out), a.y);
    }
  };
  template <class T>
  struct BwdArgs {
    const T *x, *w, *dy;
    T *dx, *dw, *db;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("x", c.rows * c.in, Seed::uniform(-3, 3), c.in), a.x);
      f(ops::in("w", c.out * c.in, Seed::uniform(-0.1, 0.1), c.in), a.w);
      f(ops::in("dy", c.rows * c.out, Seed::normal(1e-3), c.out), a.dy);
      f(ops::out("dx", c.rows * c.in, c.in), a.dx);
      f(ops::out("dw", c.out * c.in, c.in), a.dw);
      f(ops::out("db", c.bias ? c.out : 0), a.db);
    }
  };
  // Ragged shapes (K, M and N off every multiple of 4 the int8 kernels may
  // vectorize by, and on it), rows 1, a zero-free and a large shape, each with
  // and without bias and unit backward; the small ones swept over every
  // kernel variant.
  static std::vector<GateCase<Config>> gate_cases() {
    std::vector<std::array<std::size_t, 3>> small;
    for (std::size_t rows : {1, 37})
      for (std::size_t in : {1, 65, 256})
        for (std::size_t out : {3, 129}) small.push_back({rows, in, out});
    small.push_back({64, 68, 132});
    std::vector<GateCase<Config>> v;
    for (const auto& [rows, in, out] : small)
      for (bool bias : {false, true})
        for (bool unit : {false, true})
          v.push_back({{rows, in, out, bias, unit},
                       shape_text({{"rows", rows}, {"in", in}, {"out", out}}) + (bias ? " bias" : "") +
                           (unit ? " unit-backward" : ""),
                       {},
                       true});
    for (bool unit : {false, true})
      v.push_back({{512, 768, 2304, true, unit}, std::string("rows 512 in 768 out 2304 bias") +
                                                     (unit ? " unit-backward" : "")});
    return v;
  }

  // The int32 sums cannot overflow: |q·q| <= 127² < 2^14 and every
  // contraction is at most 131071 long (K; with the unit backward also M and N).
  static void validate(const Config& c) {
    auto refuse = [&](std::string_view axis, std::size_t n, std::string_view what) {
      throw std::invalid_argument(fmt::format(
          "int8_linear rows {} in {} out {}: {} = {} exceeds 131071, the longest int32-exact int8 product ({})",
          c.rows, c.in, c.out, axis, n, what));
    };
    if (c.in > kMaxQuantK) refuse("in", c.in, "the forward sums over in");
    if (c.unit_backward && c.out > kMaxQuantK) refuse("out", c.out, "the unit backward's dx sums over out");
    if (c.unit_backward && c.rows > kMaxQuantK) refuse("rows", c.rows, "the unit backward's dW sums over rows");
  }

  // The forward's codes of x (by rows) and W (by output rows), and x̂, Ŵ.
  template <class T>
  struct Quantized {
    RowCodes<T> x, w;
    Tensor<T> xhat, what;  // q * step
  };
  template <class T>
  static Tensor<T> dequantized(const RowCodes<T>& r, std::size_t rows, std::size_t cols) {
    Tensor<T> t({rows, cols});
    for (std::size_t n = 0; n < rows; ++n)
      for (std::size_t j = 0; j < cols; ++j) t[n * cols + j] = static_cast<T>(r.q[n * cols + j]) * r.step[n];
    return t;
  }
  template <class T>
  static Quantized<T> quantize(const Config& c, const Inputs<T>& in) {
    Quantized<T> z;
    z.x = quantize_rows(in.x.ptr(), c.rows, c.in, static_cast<T>(kFloor));
    z.w = quantize_rows(in.w.ptr(), c.out, c.in, static_cast<T>(kFloor));
    z.xhat = dequantized(z.x, c.rows, c.in);
    z.what = dequantized(z.w, c.out, c.in);
    return z;
  }

  template <class T>
  static void add_bias(const Config& c, const Tensor<T>& b, Tensor<T>& y) {
    if (!c.bias) return;
    for (std::size_t n = 0; n < c.rows; ++n)
      for (std::size_t m = 0; m < c.out; ++m) y[n * c.out + m] = y[n * c.out + m] + b[m];
  }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    validate(c);
    const Quantized<T> z = quantize(c, in);
    const auto acc = int8_matmul_nt(z.x.q, z.w.q, c.rows, c.out, c.in);
    Outputs<T> out{Tensor<T>({c.rows, c.out})};
    for (std::size_t n = 0; n < c.rows; ++n)
      for (std::size_t m = 0; m < c.out; ++m)
        out.y[n * c.out + m] = unit_epilogue(acc[n * c.out + m], z.x.step[n], z.w.step[m]);
    add_bias(c, in.b, out.y);
    return out;
  }

  // The unit backward's products with the given axes. The canonical axes
  // (UnitBackwardAxes{}) give the int8 expression of the header; any other
  // choice (the tests' planted bugs) is computed as dequantize-then-multiply,
  // since a scale that varies along the contraction does not factor out.
  template <class T>
  static Inputs<T> unit_backward(const Config& c, const Inputs<T>& in, const Tensor<T>& dy,
                                 const UnitBackwardAxes& axes = {}) {
    validate(c);
    const std::size_t N = c.rows, K = c.in, M = c.out;
    const auto gf = static_cast<T>(kGradFloor), vf = static_cast<T>(kFloor);
    Inputs<T> g{Tensor<T>({N, K}), Tensor<T>({M, K}), {}};
    const UnitBackwardAxes canonical{};
    if (axes.dx_dy_by_rows == canonical.dx_dy_by_rows && axes.dx_w_by_rows == canonical.dx_w_by_rows) {
      const RowCodes<T> a = quantize_rows(dy.ptr(), N, M, gf);     // [N, M]
      const RowCodes<T> gw = quantize_cols(in.w.ptr(), M, K, vf);  // [K, M]
      const auto acc = int8_matmul_nt(a.q, gw.q, N, K, M);
      for (std::size_t n = 0; n < N; ++n)
        for (std::size_t k = 0; k < K; ++k) g.x[n * K + k] = unit_epilogue(acc[n * K + k], a.step[n], gw.step[k]);
    } else {
      const Tensor<T> a = quantized_along(dy.ptr(), N, M, axes.dx_dy_by_rows, gf);
      const Tensor<T> w = quantized_along(in.w.ptr(), M, K, axes.dx_w_by_rows, vf);
      matmul_dyw(N, M, K, a.ptr(), w.ptr(), g.x.ptr());
    }
    if (axes.dw_dy_by_rows == canonical.dw_dy_by_rows && axes.dw_x_by_rows == canonical.dw_x_by_rows) {
      const RowCodes<T> cd = quantize_cols(dy.ptr(), N, M, gf);    // [M, N]
      const RowCodes<T> d = quantize_cols(in.x.ptr(), N, K, vf);   // [K, N]
      const auto acc = int8_matmul_nt(cd.q, d.q, M, K, N);
      for (std::size_t m = 0; m < M; ++m)
        for (std::size_t k = 0; k < K; ++k) g.w[m * K + k] = unit_epilogue(acc[m * K + k], cd.step[m], d.step[k]);
    } else {
      const Tensor<T> a = quantized_along(dy.ptr(), N, M, axes.dw_dy_by_rows, gf);
      const Tensor<T> x = quantized_along(in.x.ptr(), N, K, axes.dw_x_by_rows, vf);
      matmul_dytx(N, M, K, a.ptr(), x.ptr(), g.w.ptr());
    }
    if (c.bias) g.b = column_sums(dy.ptr(), N, M);
    return g;
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>& in, const Outputs<T>&, const Outputs<T>& dout) {
    if (c.unit_backward) return unit_backward(c, in, dout.y);
    validate(c);
    const Quantized<T> z = quantize(c, in);
    Inputs<T> g{Tensor<T>({c.rows, c.in}), Tensor<T>({c.out, c.in}), {}};
    matmul_dyw(c.rows, c.out, c.in, dout.y.ptr(), z.what.ptr(), g.x.ptr());
    matmul_dytx(c.rows, c.out, c.in, dout.y.ptr(), z.xhat.ptr(), g.w.ptr());
    if (c.bias) g.b = column_sums(dout.y.ptr(), c.rows, c.out);
    return g;
  }

  // x [rows, cols] dequantized from codes by rows or by columns, in x's layout.
  template <class T>
  static Tensor<T> quantized_along(const T* x, std::size_t rows, std::size_t cols, bool by_rows, T floor_value) {
    if (by_rows) return dequantized(quantize_rows(x, rows, cols, floor_value), rows, cols);
    const Tensor<T> t = dequantized(quantize_cols(x, rows, cols, floor_value), cols, rows);
    Tensor<T> out({rows, cols});
    for (std::size_t n = 0; n < rows; ++n)
      for (std::size_t j = 0; j < cols; ++j) out[n * cols + j] = t[j * rows + n];
    return out;
  }

  // The STE surrogate at `x` with the detached corrections taken at `at`: the
  // forward's quantizers (float backward) or the unit backward's (x and W by
  // columns).
  template <class T>
  static Outputs<T> surrogate(const Config& c, const Inputs<T>& at, const Inputs<T>& x) {
    validate(c);
    Tensor<T> xq, wq;
    if (c.unit_backward) {
      xq = quantized_along(at.x.ptr(), c.rows, c.in, false, static_cast<T>(kFloor));
      wq = quantized_along(at.w.ptr(), c.out, c.in, false, static_cast<T>(kFloor));
    } else {
      Quantized<T> z = quantize(c, at);
      xq = std::move(z.xhat);
      wq = std::move(z.what);
    }
    Tensor<T> xs(x.x.shape), ws(x.w.shape);
    for (std::size_t i = 0; i < xs.numel(); ++i) xs[i] = x.x[i] + (xq[i] - at.x[i]);
    for (std::size_t i = 0; i < ws.numel(); ++i) ws[i] = x.w[i] + (wq[i] - at.w[i]);
    Outputs<T> out{Tensor<T>({c.rows, c.out})};
    matmul_xwt(c.rows, c.out, c.in, xs.ptr(), ws.ptr(), out.y.ptr());
    add_bias(c, x.b, out.y);
    return out;
  }
  // The float backward's surrogate is the forward at the point; the unit
  // backward's uses other quantizers (within their bound of it).
  static bool surrogate_is_forward(const Config& c) { return !c.unit_backward; }

  // The cotangents the checker differentiates with: normal, or for the unit
  // backward on the int8 grid of both dy's rows and its columns (integers in
  // [-127, 127] times 2^-3, every row and every column holding a ±127), where
  // quantizing dy by rows or by columns is the identity.
  static Outputs<double> cotangent(const Config& c, const Outputs<double>& out, ad::Rng& rng) {
    if (!c.unit_backward) return {rng.normal(out.y.shape)};
    Outputs<double> d{Tensor<double>(out.y.shape)};
    const std::size_t N = c.rows, M = c.out;
    for (double& v : d.y.data) v = std::floor(rng.uniform(-127.0, 128.0));  // an integer in [-127, 127]
    for (std::size_t n = 0; n < N; ++n) d.y[n * M + n % M] = n % 2 ? -127.0 : 127.0;
    for (std::size_t m = 0; m < M; ++m) d.y[(m % N) * M + m] = m % 2 ? 127.0 : -127.0;
    for (double& v : d.y.data) v *= 0x1p-3;
    return d;
  }

  // --- verification -------------------------------------------------------
  static std::vector<Config> cases() {
    return {{4, 16, 5, false, false}, {3, 7, 7, true, false}, {4, 16, 5, true, true}, {5, 9, 6, false, true}};
  }
  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    Inputs<double> in{rng.normal({c.rows, c.in}), rng.normal({c.out, c.in}, 0.05), {}};
    if (c.bias) in.b = rng.normal({c.out});
    return in;
  }

  // The unit backward against the float STE backward on the cotangent dy:
  // the largest |unit - float| / bound over dx and over dW (<= 1: within the
  // bound). The bound, per element, from the quantizers' half steps (each
  // within (1 + 2^-13), check_row_codes):
  //   dx[n,k]: Σ_m ( s^a_n/2 · |W̃[m,k]| + |dy[n,m]| · (s^g_k + s^W_m)/2 )
  //            (dy's row error times the re-quantized W; dy times the distance
  //             between W̃ (by columns) and Ŵ (by rows), each within half a step of W)
  //   dW[m,k]: Σ_n ( s^c_m/2 · |x̃[n,k]| + |dy[n,m]| · (s^d_k + s^x_n)/2 )
  // times (1 + 2^-12), plus 2^-16 · Σ (|dy|·|Ŵ| + |d̃y|·|W̃|) for the float
  // roundings of both sides (the GEMM chains and the epilogues, far below it
  // at the checked sizes).
  struct Excess {
    double dx = 0.0, dw = 0.0;
  };
  // One product out[i,k] = Σ_j g(i,j) R[j,k] of the bound above: g = dy read at
  // g[i*gi + j*gj], gq its unit quantization (same layout) with steps sg[i];
  // the unit side's R re-quantized (rq [J,K], steps sr[k]), the float side's
  // (rf, steps sf[j]); the worst |got - want| / bound.
  static double product_excess(std::size_t I, std::size_t J, std::size_t K, const float* g, std::size_t gi,
                               std::size_t gj, const float* gq, const float* sg, const float* rq, const float* sr,
                               const float* rf, const float* sf, const float* got, const float* want) {
    auto f = [](float v) { return static_cast<double>(v); };
    double worst = 0.0;
    for (std::size_t i = 0; i < I; ++i)
      for (std::size_t k = 0; k < K; ++k) {
        double b = 0.0, r = 0.0;
        for (std::size_t j = 0; j < J; ++j) {
          const double gv = std::fabs(f(g[i * gi + j * gj]));
          b += f(sg[i]) / 2 * std::fabs(f(rq[j * K + k])) + gv * (f(sr[k]) + f(sf[j])) / 2;
          r += gv * std::fabs(f(rf[j * K + k])) + std::fabs(f(gq[i * gi + j * gj])) * std::fabs(f(rq[j * K + k]));
        }
        const double bound = b * (1.0 + 0x1p-12) + 0x1p-16 * r;
        const double err = std::fabs(f(got[i * K + k]) - f(want[i * K + k]));
        worst = std::max(worst, bound > 0.0 ? err / bound : (err > 0.0 ? HUGE_VAL : 0.0));
      }
    return worst;
  }
  static Excess unit_backward_excess(const Config& c, const Inputs<float>& in, const Tensor<float>& dy,
                                     const Inputs<float>& unit) {
    const std::size_t N = c.rows, K = c.in, M = c.out;
    Config fc = c;
    fc.unit_backward = false;
    const Outputs<float> d{dy};
    const Inputs<float> fl = backward<float>(fc, in, {}, d);
    const Quantized<float> z = quantize(fc, in);
    const auto gf = static_cast<float>(kGradFloor), vf = static_cast<float>(kFloor);
    const RowCodes<float> a = quantize_rows(dy.ptr(), N, M, gf), cc = quantize_cols(dy.ptr(), N, M, gf);
    const RowCodes<float> gw = quantize_cols(in.w.ptr(), M, K, vf), xc = quantize_cols(in.x.ptr(), N, K, vf);
    const Tensor<float> wt = quantized_along(in.w.ptr(), M, K, false, vf);
    const Tensor<float> xt = quantized_along(in.x.ptr(), N, K, false, vf);
    const Tensor<float> ar = quantized_along(dy.ptr(), N, M, true, gf);
    const Tensor<float> ac = quantized_along(dy.ptr(), N, M, false, gf);
    Excess e;
    e.dx = product_excess(N, M, K, dy.ptr(), M, 1, ar.ptr(), a.step.data(), wt.ptr(), gw.step.data(), z.what.ptr(),
                          z.w.step.data(), unit.x.ptr(), fl.x.ptr());
    e.dw = product_excess(M, N, K, dy.ptr(), 1, M, ac.ptr(), cc.step.data(), xt.ptr(), xc.step.data(), z.xhat.ptr(),
                          z.x.step.data(), unit.w.ptr(), fl.w.ptr());
    return e;
  }
  // A cotangent off the grid whose rows (or columns) differ in scale by up to
  // 2^12 (as one token's gradient differs from another's, or one output
  // feature's): where the axis of dy's quantization shows (by rows for dx, by
  // columns for dW: a row-quantized dy loses the small columns, a
  // column-quantized one the small rows).
  static Tensor<float> spread_cotangent(const Config& c, ad::Rng& rng, bool spread_columns) {
    Tensor<double> d = rng.normal({c.rows, c.out});
    for (std::size_t n = 0; n < c.rows; ++n)
      for (std::size_t m = 0; m < c.out; ++m)
        d[n * c.out + m] *= std::ldexp(1.0, -6 * static_cast<int>((spread_columns ? m : n) % 3));
    return d.cast<float>();
  }

  static void algebra(const Config& c, ad::Rng& rng, ad::Checks& k) {
    const auto in = cast_fields<Inputs, float>(sample(c, rng));
    const Quantized<float> z = quantize(c, in);
    check_row_codes("activation", in.x.ptr(), c.rows, c.in, z.x, z.xhat.ptr(), k);
    check_row_codes("weight", in.w.ptr(), c.out, c.in, z.w, z.what.ptr(), k);
    // The epilogue: y - b equals the exact integer product times the scales,
    // within its two roundings, and the bias add is one more (per element).
    const auto y = forward(c, in).y;
    double worst = 0.0;
    for (std::size_t n = 0; n < c.rows; ++n)
      for (std::size_t m = 0; m < c.out; ++m) {
        std::int64_t acc = 0;
        for (std::size_t kk = 0; kk < c.in; ++kk)
          acc += std::int64_t{z.x.q[n * c.in + kk]} * std::int64_t{z.w.q[m * c.in + kk]};
        const double prod = static_cast<double>(acc) * static_cast<double>(z.x.step[n]) *
                            static_cast<double>(z.w.step[m]);
        const double bias = c.bias ? static_cast<double>(in.b[m]) : 0.0;
        const double got = static_cast<double>(y[n * c.out + m]);
        const double scale = std::fabs(prod) + std::fabs(bias);
        const double rel = scale == 0.0 ? std::fabs(got) : std::fabs(got - (prod + bias)) / scale;
        worst = rel > worst ? rel : worst;
      }
    const double tol = c.bias ? 0x1p-23 + 0x1p-24 : 0x1p-23;
    k.add(c.bias ? "epilogue = exact int dot × scales + bias, 3 roundings (float)"
                 : "epilogue = exact int dot × scales, 2 roundings (float)",
          y.numel(), worst, worst, tol, worst <= tol, "epilogue error beyond its float roundings");
    if (!c.unit_backward) return;
    for (bool spread_columns : {false, true}) {
      const Tensor<float> dy = spread_cotangent(c, rng, spread_columns);
      const Excess e = unit_backward_excess(c, in, dy, backward<float>(c, in, {}, Outputs<float>{dy}));
      const double m = std::max(e.dx, e.dw);
      k.add("unit backward within its quantization bound of the float STE backward (float)",
            in.x.numel() + in.w.numel(), m, m, 1.0, m <= 1.0,
            fmt::format("|unit - float| / bound: dx {:.3g}, dW {:.3g}", e.dx, e.dw));
    }
  }
};

}  // namespace lockstep::ops
