// Quantized linear layers: BitLinear (BitNet b1.58) here, the int8 unit linear
// (Int8Linear) in ops/units.hpp on the same quantizers. Both compute y = x · Wᵀ on integer codes with exact int32 accumulation, and
// train through the straight-through estimator (STE).
//
// Quantizers (DESIGN.md §1; "/" is the correctly rounded division, floor and
// the clamps are exact, so every device produces the same codes):
//   activations, per row (token) r of x [N, K]:
//     m_r = max(max_k |x_rk|, floor);  inv_r = 127 / m_r
//     q_rk = clamp(floor(x_rk * inv_r + 0.5), -127, 127)       (int8)
//     step_r = m_r / 127                                       (dequantized: q * step)
//   BitLinear weights, per tensor (BitNet's absmean ternary):
//     m = max(sum_k |w_k| / numel, 1e-5);  inv = 1 / m          (sum: canonical)
//     q_k = clamp(floor(w_k * inv + 0.5), -1, 1)                (ternary)
//     scale = m                                                 (dequantized: q * m, exact)
//   int8 unit weights, per output row m of W [M, K]: the activation quantizer.
// floor(v + 0.5) rounds halves up where BitNet's reference uses torch.round
// (halves to even): they differ only on exact ties. The activation range is
// the symmetric [-127, 127] of DESIGN.md (the reference clamps at -128).
// The activation floor is BitNet's 1e-5 for BitLinear, 1e-8 for the int8 unit.
//
// Forward: acc_nm = Σ_k q^x_nk · q^w_mk in int32 (exact: K <= 131071), then the
// epilogue, in this order:
//   BitLinear:  y_nm = (f32(acc_nm) * step_n) * scale
//   Int8Linear: y_nm = ((f32(acc_nm) * step_n) * wstep_m) + b_m   (ops/units.hpp)
//
// Backward (STE). With x̂ = dequantized activations and Ŵ = dequantized
// weights, BitNet's reference writes x + (x̂ - x).detach(), w + (Ŵ - w).detach():
// the op is replaced, for differentiation, by the SURROGATE
//   y(x, W) = (x + c_x) · (W + c_W)ᵀ,   c_x = x̂₀ - x₀, c_W = Ŵ₀ - W₀ held constant,
// whose exact vector-Jacobian product at the point (x₀, W₀) is
//   dx = dy · Ŵ₀          dW = dyᵀ · x̂₀          (canonical GEMM chains)
// The checker differentiates `surrogate` by finite differences (quantization
// itself has zero derivative almost everywhere: FD cannot see through it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/ad/check.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/ops/kernel_args.hpp"
#include "lockstep/ops/op.hpp"

namespace lockstep::ops {

// int32 accumulation cannot overflow: |q·q| <= 127² < 2^14, K·2^14 < 2^31.
inline constexpr std::size_t kMaxQuantK = 131071;

template <class T>
struct RowCodes {
  std::vector<std::int8_t> q;  // [rows, cols]
  std::vector<T> step;         // [rows]: the value of one code step
};

template <class T>
RowCodes<T> quantize_rows(const T* x, std::size_t rows, std::size_t cols, T floor_value) {
  using M = Math<T>;
  RowCodes<T> r{std::vector<std::int8_t>(rows * cols), std::vector<T>(rows)};
  std::vector<T> a(cols);
  for (std::size_t n = 0; n < rows; ++n) {
    const T* xr = x + n * cols;
    for (std::size_t k = 0; k < cols; ++k) a[k] = M::abs(xr[k]);
    const T m = max2(M::max(a.data(), cols), floor_value);
    const T inv = T(127) / m;
    for (std::size_t k = 0; k < cols; ++k) {
      const T v = min2(max2(M::floor(xr[k] * inv + T(0.5)), T(-127)), T(127));
      r.q[n * cols + k] = static_cast<std::int8_t>(v);
    }
    r.step[n] = m / T(127);
  }
  return r;
}

template <class T>
struct TernaryCodes {
  std::vector<std::int8_t> q;  // values in {-1, 0, 1}
  T scale = T(0);              // mean |w| (floored): one code step
};

// One ternary code: clamp(floor(w * inv + 0.5), -1, 1), inv = 1 / scale.
template <class T>
T ternary_code(T w, T inv) {
  return min2(max2(Math<T>::floor(w * inv + T(0.5)), T(-1)), T(1));
}

template <class T>
TernaryCodes<T> quantize_ternary(const T* w, std::size_t n) {
  using M = Math<T>;
  std::vector<T> a(n);
  for (std::size_t k = 0; k < n; ++k) a[k] = M::abs(w[k]);
  const T m = max2(M::sum(a.data(), n) / static_cast<T>(n), static_cast<T>(1e-5));
  const T inv = T(1) / m;
  TernaryCodes<T> r{std::vector<std::int8_t>(n), m};
  for (std::size_t k = 0; k < n; ++k)
    r.q[k] = static_cast<std::int8_t>(ternary_code(w[k], inv));
  return r;
}

// acc[n, m] = Σ_k a[n, k] · b[m, k], exact in int32.
inline std::vector<std::int32_t> int8_matmul_nt(const std::vector<std::int8_t>& a,
                                                const std::vector<std::int8_t>& b, std::size_t N,
                                                std::size_t M, std::size_t K) {
  std::vector<std::int32_t> acc(N * M);
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t m = 0; m < M; ++m) {
      std::int32_t s = 0;
      for (std::size_t k = 0; k < K; ++k)
        s += static_cast<std::int32_t>(a[n * K + k]) * static_cast<std::int32_t>(b[m * K + k]);
      acc[n * M + m] = s;
    }
  return acc;
}

// The quantizer's properties on one operand quantized by rows (`what` names it
// in the check rows): |q| <= 127, each row's absmax maps to exactly ±127, and
// every dequantized value x̂ = q·step lies within half a step of x, up to the
// four roundings (inv, x·inv, step, q·step) of 2^-24 on values of at most
// 127.5 steps: |x - x̂| <= step/2 · (1 + 1021·2^-24) < step/2 · (1 + 2^-13).
inline void check_row_codes(const std::string& what, const float* x, std::size_t rows, std::size_t cols,
                            const RowCodes<float>& z, const float* xhat, ad::Checks& k) {
  std::uint64_t bad_range = 0, bad_max = 0, far = 0;
  for (std::size_t n = 0; n < rows; ++n) {
    int top = 0;
    for (std::size_t j = 0; j < cols; ++j) {
      const int q = z.q[n * cols + j];
      bad_range += q < -127 || q > 127;
      top = std::abs(q) > top ? std::abs(q) : top;
      const double e = std::fabs(static_cast<double>(x[n * cols + j]) - static_cast<double>(xhat[n * cols + j]));
      far += e > 0.5 * static_cast<double>(z.step[n]) * (1.0 + 0x1p-13);
    }
    bad_max += top != 127;
  }
  const std::string a = what == "activation" ? "" : what + " ";
  k.expect(what + " codes in [-127,127] (float)", z.q.size(), bad_range, "code out of range");
  k.expect(a + "row absmax maps to ±127 (float)", rows, bad_max, "absmax code != 127");
  k.expect(what == "activation" ? std::string("|x - x̂| <= step/2 (float)") : "|" + what + " - dequantized| <= step/2 (float)",
           rows * cols, far, "dequantized too far");
}

struct QuantLinearConfig {
  std::size_t rows = 0;  // N
  std::size_t in = 0;    // K
  std::size_t out = 0;   // M
};

// The two quantized linears share everything but the weight quantizer
// (Derived::weight_codes) and the activation floor (Derived::kActFloor).
template <class Derived>
struct QuantLinear {
  using Config = QuantLinearConfig;
  template <class T>
  struct Inputs {
    Tensor<T> x;  // [N, K]
    Tensor<T> w;  // [M, K] latent (full-precision) weights
    static void fields(auto& s, auto&& f) {
      f("x", s.x, Arg::diff);
      f("w", s.w, Arg::diff);
    }
  };
  template <class T>
  struct Outputs {
    Tensor<T> y;  // [N, M]
    static void fields(auto& s, auto&& f) { f("y", s.y, Arg::output); }
  };

  static void validate(const Config& c) {
    if (c.in > kMaxQuantK)
      throw std::invalid_argument("quantized linear: K > 131071 could overflow int32");
  }

  // Codes of both operands and their dequantized values.
  template <class T>
  struct Quantized {
    RowCodes<T> x;
    std::vector<std::int8_t> qw;
    std::vector<T> wstep;  // per output row (BitLinear: the one scale, repeated)
    Tensor<T> xhat, what;  // q * step
  };
  template <class T>
  static Quantized<T> quantize(const Config& c, const Inputs<T>& in) {
    Quantized<T> z;
    z.x = quantize_rows(in.x.ptr(), c.rows, c.in, static_cast<T>(Derived::kActFloor));
    Derived::weight_codes(c, in.w, z.qw, z.wstep);
    z.xhat = Tensor<T>({c.rows, c.in});
    z.what = Tensor<T>({c.out, c.in});
    for (std::size_t n = 0; n < c.rows; ++n)
      for (std::size_t k = 0; k < c.in; ++k)
        z.xhat[n * c.in + k] = static_cast<T>(z.x.q[n * c.in + k]) * z.x.step[n];
    for (std::size_t m = 0; m < c.out; ++m)
      for (std::size_t k = 0; k < c.in; ++k)
        z.what[m * c.in + k] = static_cast<T>(z.qw[m * c.in + k]) * z.wstep[m];
    return z;
  }

  // y_nm from the exact integer product acc_nm (the live audits use it too).
  template <class T>
  static T epilogue(std::int32_t acc, T step_n, T wstep_m) {
    return (static_cast<T>(acc) * step_n) * wstep_m;
  }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    validate(c);
    const Quantized<T> z = quantize(c, in);
    const auto acc = int8_matmul_nt(z.x.q, z.qw, c.rows, c.out, c.in);
    Outputs<T> out{Tensor<T>({c.rows, c.out})};
    for (std::size_t n = 0; n < c.rows; ++n)
      for (std::size_t m = 0; m < c.out; ++m)
        out.y[n * c.out + m] = epilogue(acc[n * c.out + m], z.x.step[n], z.wstep[m]);
    return out;
  }

  // The STE surrogate at `x` with the detached corrections taken at `at`.
  template <class T>
  static Outputs<T> surrogate(const Config& c, const Inputs<T>& at, const Inputs<T>& x) {
    validate(c);
    const Quantized<T> z = quantize(c, at);
    Tensor<T> xs(x.x.shape), ws(x.w.shape);
    for (std::size_t i = 0; i < xs.numel(); ++i) xs[i] = x.x[i] + (z.xhat[i] - at.x[i]);
    for (std::size_t i = 0; i < ws.numel(); ++i) ws[i] = x.w[i] + (z.what[i] - at.w[i]);
    Outputs<T> out{Tensor<T>({c.rows, c.out})};
    matmul_xwt(c.rows, c.out, c.in, xs.ptr(), ws.ptr(), out.y.ptr());
    return out;
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>& in, const Outputs<T>&,
                            const Outputs<T>& dout) {
    validate(c);
    const Quantized<T> z = quantize(c, in);
    Inputs<T> g{Tensor<T>({c.rows, c.in}), Tensor<T>({c.out, c.in})};
    matmul_dyw(c.rows, c.out, c.in, dout.y.ptr(), z.what.ptr(), g.x.ptr());
    matmul_dytx(c.rows, c.out, c.in, dout.y.ptr(), z.xhat.ptr(), g.w.ptr());
    return g;
  }

  // --- verification -------------------------------------------------------
  static std::vector<Config> cases() { return {{4, 16, 5}, {3, 7, 7}}; }
  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    Inputs<double> in{rng.normal({c.rows, c.in}), rng.normal({c.out, c.in}, 0.05)};
    return in;
  }

  static void algebra(const Config& c, ad::Rng& rng, ad::Checks& k) {
    const auto in = cast_fields<Inputs, float>(sample(c, rng));
    const Quantized<float> z = quantize(c, in);
    check_row_codes("activation", in.x.ptr(), c.rows, c.in, z.x, z.xhat.ptr(), k);
    Derived::weight_checks(c, in, z, k);
    // The epilogue: y equals the exact integer product times the scales,
    // within its two roundings (per element, relative).
    const auto y = forward(c, in).y;
    double worst = 0.0;
    for (std::size_t n = 0; n < c.rows; ++n)
      for (std::size_t m = 0; m < c.out; ++m) {
        std::int64_t acc = 0;
        for (std::size_t kk = 0; kk < c.in; ++kk)
          acc += std::int64_t{z.x.q[n * c.in + kk]} * std::int64_t{z.qw[m * c.in + kk]};
        const double exact = static_cast<double>(acc) * static_cast<double>(z.x.step[n]) *
                             static_cast<double>(z.wstep[m]);
        const double got = static_cast<double>(y[n * c.out + m]);
        const double rel = exact == 0.0 ? std::fabs(got) : std::fabs(got - exact) / std::fabs(exact);
        worst = rel > worst ? rel : worst;
      }
    k.add("epilogue = exact int dot × scales, 2 roundings (float)", y.numel(), worst, worst,
          0x1p-23, worst <= 0x1p-23, "epilogue error beyond two float roundings");
  }
};

struct BitLinear : QuantLinear<BitLinear> {
  static constexpr std::string_view name = "bitlinear";
  static constexpr double kActFloor = 1e-5;

  // Kernels (ops/kernel_args.hpp). The kernels keep x̂ (Aux a), Ŵ (b) and the
  // weight scale (s) for the backward; a backward without them recomputes them.
  static constexpr bool kernel_keeps_aux = true;
  template <class T>
  struct FwdArgs {
    const T *x, *w;
    T *y;
    // Activations with a spread of magnitudes per row; weights around the scale.
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("x", c.rows * c.in, Seed::uniform(-3, 3), c.in), a.x);
      f(ops::in("w", c.out * c.in, Seed::uniform(-0.1, 0.1), c.in), a.w);
      f(ops::out("y", c.rows * c.out, c.out), a.y);
    }
  };
  template <class T>
  struct BwdArgs {
    const T *x, *w, *dy;
    T *dx, *dw;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("x", c.rows * c.in, Seed::uniform(-3, 3), c.in), a.x);
      f(ops::in("w", c.out * c.in, Seed::uniform(-0.1, 0.1), c.in), a.w);
      f(ops::in("dy", c.rows * c.out, Seed::uniform(-1, 1), c.out), a.dy);
      f(ops::out("dx", c.rows * c.in, c.in), a.dx);
      f(ops::out("dw", c.out * c.in, c.in), a.dw);
    }
  };
  // Ragged shapes (swept over every GEMM block tile), a large one whose
  // weight sum runs over 433 chunks (two levels), and more than 4096² weights
  // (the canonical sum's third level).
  static std::vector<GateCase<Config>> gate_cases() {
    std::vector<std::array<std::size_t, 3>> small;
    for (std::size_t rows : {1, 37})
      for (std::size_t in : {65, 257})
        for (std::size_t out : {3, 129}) small.push_back({rows, in, out});
    small.push_back({37, 256, 200});
    std::vector<GateCase<Config>> v;
    for (const auto& [rows, in, out] : small)
      v.push_back({{rows, in, out}, shape_text({{"rows", rows}, {"in", in}, {"out", out}}), {}, true});
    v.push_back({{512, 768, 2304}, "rows 512 in 768 out 2304"});
    v.push_back({{2, 4100, 4097}, "rows 2 in 4100 out 4097 (3-level weight sum)"});
    return v;
  }

  template <class T>
  static void weight_codes(const Config& c, const Tensor<T>& w, std::vector<std::int8_t>& q,
                           std::vector<T>& step) {
    TernaryCodes<T> t = quantize_ternary(w.ptr(), c.out * c.in);
    q = std::move(t.q);
    step.assign(c.out, t.scale);
  }
  static void weight_checks(const Config&, const Inputs<float>&, const Quantized<float>& z,
                            ad::Checks& k) {
    std::uint64_t bad = 0;
    for (std::int8_t q : z.qw) bad += q < -1 || q > 1;
    k.expect("weights ternary {-1,0,1} (float)", z.qw.size(), bad, "non-ternary weight code");
  }
};

}  // namespace lockstep::ops
