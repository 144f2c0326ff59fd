// Element-wise activations and gated FFN products, plus the residual add.
//
//   Gelu (tanh form, GPT-2's gelu_new):
//     y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
//     float: x2 = x*x; x3 = x2*x; u = k0 * fma(k1, x3, x); t = tanh(u)
//            y = (0.5*x) * (1 + t)
//     dy/dx: dx = dy * fma((0.5*x) * fma(-t, t, 1), k0 * fma(3·k1, x2, 1), 0.5*(1 + t))
//   ReluSqMul (BitNet b1.58's FFN gate: relu(gate)² · up):
//     r = max(gate, 0); y = (r*r) * up
//     dgate = (dy*up) * (2*r);  dup = dy * (r*r)
//   SwiGLU (LLaMA's FFN gate: silu(gate) · up):
//     s = sigmoid(gate); a = gate*s; y = a * up
//     dgate = (dy*up) * (s * fma(gate, 1 - s, 1));  dup = dy * a
//   ResidualAdd: y = a + b;  da = dy, db = dy
// with k0 = √(2/π) and k1 = 0.044715 rounded to T once, 3·k1 = 0.134145.
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

struct ElementwiseConfig {
  std::size_t n = 0;  // elements (any shape, flattened)
};

// The gate shapes of the element-wise ops: ragged sizes, one of two 4096-cell
// chunks, and a [130, 97] activation.
inline std::vector<GateCase<ElementwiseConfig>> elementwise_gate_cases() {
  std::vector<GateCase<ElementwiseConfig>> v;
  for (std::size_t n : {1, 5, 33, 97, 256, 5000, 130 * 97}) v.push_back({{n}, shape_text({{"n", n}})});
  return v;
}

struct Gelu {
  static constexpr std::string_view name = "gelu";
  using Config = ElementwiseConfig;
  template <class T>
  struct Inputs {
    Tensor<T> x;
    static void fields(auto& s, auto&& f) { f("x", s.x, Arg::diff); }
  };
  template <class T>
  struct Outputs {
    Tensor<T> y;
    static void fields(auto& s, auto&& f) { f("y", s.y, Arg::output); }
  };

  // Kernels (ops/kernel_args.hpp). The kernels keep t = tanh(u) in the Aux.
  static constexpr bool kernel_keeps_aux = true;
  template <class T>
  struct FwdArgs {
    const T *x;
    T *y;
    // Forward inputs reach far into tanh saturation and overflow.
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("x", c.n, Seed::normal(3.0, 1e30f)), a.x);
      f(ops::out("y", c.n), a.y);
    }
  };
  template <class T>
  struct BwdArgs {
    const T *x, *dy;
    T *dx;
    // Backward inputs stay where no inf·0 makes a NaN (whose payload differs
    // between CPU and GPU by design, not by a kernel bug).
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("x", c.n, Seed::normal(3.0, 30.0f)), a.x);
      f(ops::in("dy", c.n, Seed::normal(1.0, 1e3f)), a.dy);
      f(ops::out("dx", c.n), a.dx);
    }
  };
  static std::vector<GateCase<Config>> gate_cases() { return elementwise_gate_cases(); }

  static constexpr double kSqrt2OverPi = 0.79788456080286535588;  // √(2/π)
  static constexpr double kCubic = 0.044715;
  static constexpr double kCubic3 = 0.134145;  // 3 · 0.044715

  // tanh's argument u(x); x2 is returned for the backward.
  template <class T>
  static T inner(T x, T& x2) {
    x2 = x * x;
    const T x3 = x2 * x;
    return static_cast<T>(kSqrt2OverPi) * Math<T>::fma(static_cast<T>(kCubic), x3, x);
  }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    Outputs<T> out{Tensor<T>(in.x.shape)};
    for (std::size_t i = 0; i < c.n; ++i) {
      const T x = in.x[i];
      T x2;
      const T t = Math<T>::tanh(inner(x, x2));
      out.y[i] = (T(0.5) * x) * (T(1) + t);
    }
    return out;
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>& in, const Outputs<T>&,
                            const Outputs<T>& dout) {
    using M = Math<T>;
    Inputs<T> g{Tensor<T>(in.x.shape)};
    for (std::size_t i = 0; i < c.n; ++i) {
      const T x = in.x[i];
      T x2;
      const T t = M::tanh(inner(x, x2));
      const T sech2 = M::fma(-t, t, T(1));                                      // 1 - t²
      const T du = static_cast<T>(kSqrt2OverPi) * M::fma(static_cast<T>(kCubic3), x2, T(1));
      const T dydx = M::fma((T(0.5) * x) * sech2, du, T(0.5) * (T(1) + t));
      g.x[i] = dout.y[i] * dydx;
    }
    return g;
  }

  static std::vector<Config> cases() { return {{37}, {8}}; }
  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    return {rng.normal({c.n}, 2.0)};
  }

  // tanh is odd, so gelu(x) - gelu(-x) = x exactly in real arithmetic.
  static void algebra(const Config& c, ad::Rng& rng, ad::Checks& k) {
    Inputs<double> in = sample(c, rng), neg = in;
    for (double& v : neg.x.data) v = -v;
    const auto y = forward(c, in).y, yn = forward(c, neg).y;
    std::vector<double> got(c.n);
    for (std::size_t i = 0; i < c.n; ++i) got[i] = y[i] - yn[i];
    k.close("gelu(x) - gelu(-x) = x (double)", got, in.x.data, kAlgebraTol);
  }
};

struct ReluSqMul {
  static constexpr std::string_view name = "relu2_mul";
  using Config = ElementwiseConfig;
  template <class T>
  struct Inputs {
    Tensor<T> gate, up;
    static void fields(auto& s, auto&& f) {
      f("gate", s.gate, Arg::diff);
      f("up", s.up, Arg::diff);
    }
  };
  template <class T>
  struct Outputs {
    Tensor<T> y;
    static void fields(auto& s, auto&& f) { f("y", s.y, Arg::output); }
  };

  // Kernels (ops/kernel_args.hpp).
  template <class T>
  struct FwdArgs {
    const T *gate, *up;
    T *y;
    // r² may overflow to inf, but never meets a zero `up` as inf·0 (a NaN).
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("gate", c.n, Seed::normal(2.0, 1e15f)), a.gate);
      f(ops::in("up", c.n, Seed::normal(1.0, 1e10f)), a.up);
      f(ops::out("y", c.n), a.y);
    }
  };
  template <class T>
  struct BwdArgs {
    const T *gate, *up, *dy;
    T *dgate, *dup;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("gate", c.n, Seed::normal(2.0, 1e6f)), a.gate);
      f(ops::in("up", c.n, Seed::normal(1.0, 1e6f)), a.up);
      f(ops::in("dy", c.n, Seed::normal(1.0, 1e3f)), a.dy);
      f(ops::out("dgate", c.n), a.dgate);
      f(ops::out("dup", c.n), a.dup);
    }
  };
  static std::vector<GateCase<Config>> gate_cases() { return elementwise_gate_cases(); }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    Outputs<T> out{Tensor<T>(in.gate.shape)};
    for (std::size_t i = 0; i < c.n; ++i) {
      const T r = max2(in.gate[i], T(0));
      out.y[i] = (r * r) * in.up[i];
    }
    return out;
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>& in, const Outputs<T>&,
                            const Outputs<T>& dout) {
    Inputs<T> g{Tensor<T>(in.gate.shape), Tensor<T>(in.up.shape)};
    for (std::size_t i = 0; i < c.n; ++i) {
      const T r = max2(in.gate[i], T(0));
      g.gate[i] = (dout.y[i] * in.up[i]) * (T(2) * r);
      g.up[i] = dout.y[i] * (r * r);
    }
    return g;
  }

  static std::vector<Config> cases() { return {{41}, {6}}; }
  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    // relu² is only C¹ at 0: a central difference straddling the kink is off
    // by up to |dy·up|·h/2, so gates are kept at least 1e-3 away from it.
    Inputs<double> in{rng.normal({c.n}), rng.normal({c.n})};
    for (double& g : in.gate.data) g = std::copysign(std::fabs(g) + 1e-3, g);
    return in;
  }
};

struct SwiGlu {
  static constexpr std::string_view name = "swiglu";
  using Config = ElementwiseConfig;
  template <class T>
  struct Inputs {
    Tensor<T> gate, up;
    static void fields(auto& s, auto&& f) {
      f("gate", s.gate, Arg::diff);
      f("up", s.up, Arg::diff);
    }
  };
  template <class T>
  struct Outputs {
    Tensor<T> y;
    static void fields(auto& s, auto&& f) { f("y", s.y, Arg::output); }
  };

  // Kernels (ops/kernel_args.hpp). The kernels keep σ(gate) in the Aux.
  static constexpr bool kernel_keeps_aux = true;
  template <class T>
  struct FwdArgs {
    const T *gate, *up;
    T *y;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("gate", c.n, Seed::normal(4.0, 200.0f)), a.gate);
      f(ops::in("up", c.n, Seed::normal(1.0, 1e30f)), a.up);
      f(ops::out("y", c.n), a.y);
    }
  };
  template <class T>
  struct BwdArgs {
    const T *gate, *up, *dy;
    T *dgate, *dup;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("gate", c.n, Seed::normal(4.0, 200.0f)), a.gate);
      f(ops::in("up", c.n, Seed::normal(1.0, 1e4f)), a.up);
      f(ops::in("dy", c.n, Seed::normal(1.0, 1e3f)), a.dy);
      f(ops::out("dgate", c.n), a.dgate);
      f(ops::out("dup", c.n), a.dup);
    }
  };
  static std::vector<GateCase<Config>> gate_cases() { return elementwise_gate_cases(); }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    Outputs<T> out{Tensor<T>(in.gate.shape)};
    for (std::size_t i = 0; i < c.n; ++i) {
      const T a = in.gate[i] * Math<T>::sigmoid(in.gate[i]);
      out.y[i] = a * in.up[i];
    }
    return out;
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>& in, const Outputs<T>&,
                            const Outputs<T>& dout) {
    using M = Math<T>;
    Inputs<T> g{Tensor<T>(in.gate.shape), Tensor<T>(in.up.shape)};
    for (std::size_t i = 0; i < c.n; ++i) {
      const T x = in.gate[i];
      const T s = M::sigmoid(x);
      const T dsilu = s * M::fma(x, T(1) - s, T(1));  // σ(x)·(1 + x·(1 - σ(x)))
      g.gate[i] = (dout.y[i] * in.up[i]) * dsilu;
      g.up[i] = dout.y[i] * (x * s);
    }
    return g;
  }

  static std::vector<Config> cases() { return {{39}, {7}}; }
  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    return {rng.normal({c.n}, 2.0), rng.normal({c.n})};
  }

  // σ(x) + σ(-x) = 1, so silu(x) - silu(-x) = x exactly in real arithmetic.
  static void algebra(const Config& c, ad::Rng& rng, ad::Checks& k) {
    Inputs<double> in = sample(c, rng);
    for (double& v : in.up.data) v = 1.0;
    Inputs<double> neg = in;
    for (double& v : neg.gate.data) v = -v;
    const auto y = forward(c, in).y, yn = forward(c, neg).y;
    std::vector<double> got(c.n);
    for (std::size_t i = 0; i < c.n; ++i) got[i] = y[i] - yn[i];
    k.close("silu(x) - silu(-x) = x (double)", got, in.gate.data, kAlgebraTol);
  }
};

struct ResidualAdd {
  static constexpr std::string_view name = "residual";
  using Config = ElementwiseConfig;
  template <class T>
  struct Inputs {
    Tensor<T> a, b;
    static void fields(auto& s, auto&& f) {
      f("a", s.a, Arg::diff);
      f("b", s.b, Arg::diff);
    }
  };
  template <class T>
  struct Outputs {
    Tensor<T> y;
    static void fields(auto& s, auto&& f) { f("y", s.y, Arg::output); }
  };

  // Kernels (ops/kernel_args.hpp). da and db may alias dy (the engine routes
  // the gradient without a copy).
  template <class T>
  struct FwdArgs {
    const T *a, *b;
    T *y;
    // -0 + -0 = -0 in every third cell: the sums a kernel that loses the sign
    // of zero gets wrong; sums past FLT_MAX overflow.
    static void fields(auto& s, const Config& c, auto&& f) {
      f(ops::in("a", c.n, Seed::normal(1.0, 3e38f, 3)), s.a);
      f(ops::in("b", c.n, Seed::normal(1.0, 3e38f, 3)), s.b);
      f(ops::out("y", c.n), s.y);
    }
  };
  template <class T>
  struct BwdArgs {
    const T *dy;
    T *da, *db;
    static void fields(auto& s, const Config& c, auto&& f) {
      f(ops::in("dy", c.n, Seed::normal(1.0, 1e30f)), s.dy);
      f(ops::out("da", c.n, 0, "dy"), s.da);
      f(ops::out("db", c.n, 0, "dy"), s.db);
    }
  };
  static std::vector<GateCase<Config>> gate_cases() { return elementwise_gate_cases(); }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    Outputs<T> out{Tensor<T>(in.a.shape)};
    for (std::size_t i = 0; i < c.n; ++i) out.y[i] = in.a[i] + in.b[i];
    return out;
  }
  template <class T>
  static Inputs<T> backward(const Config&, const Inputs<T>&, const Outputs<T>&,
                            const Outputs<T>& dout) {
    return {dout.y, dout.y};
  }

  static std::vector<Config> cases() { return {{23}}; }
  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    return {rng.normal({c.n}), rng.normal({c.n})};
  }
};

}  // namespace lockstep::ops
