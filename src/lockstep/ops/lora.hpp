// LoRA linear: a frozen base linear plus a trainable low-rank update,
// as PEFT computes it:  y = (x·Wᵀ + b) + ((x·Aᵀ)·Bᵀ) * s,   s = alpha / r
// (A = lora_A [r, K], B = lora_B [M, r]; W [M, K] and b [M] are frozen).
//
// Canonical expression (GEMM chains as in op.hpp):
//   base = chain_k(x·W) (+ b);  h = chain_k(x·A) [N, r];  u = chain_j(h·B) [N, M]
//   y = base + u * s                                   (s = T(alpha / r), one rounding)
// backward:
//   du = dy * s;  dB = chain_n(du·h);  dh = chain_m(du·B);  dA = chain_n(dh·x)
//   dx = chain_m(dy·W) + chain_j(dh·A)
//   W and b receive NO gradient (frozen): the checker rejects a backward that
//   writes one — an optimizer would otherwise move the base model.
#pragma once

#include <string_view>
#include <vector>

#include "lockstep/ad/check.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/ops/linear.hpp"
#include "lockstep/ops/op.hpp"

namespace lockstep::ops {

struct LoraLinear {
  static constexpr std::string_view name = "lora_linear";
  struct Config {
    std::size_t rows = 0;  // N
    std::size_t in = 0;    // K
    std::size_t out = 0;   // M
    std::size_t rank = 0;  // r
    double alpha = 16.0;
    bool bias = false;  // the frozen base's bias
  };
  template <class T>
  struct Inputs {
    Tensor<T> x;       // [N, K]
    Tensor<T> w;       // [M, K] frozen
    Tensor<T> b;       // [M] frozen, empty without bias
    Tensor<T> lora_a;  // [r, K]
    Tensor<T> lora_b;  // [M, r]
    static void fields(auto& s, auto&& f) {
      f("x", s.x, Arg::diff);
      f("w", s.w, Arg::frozen);
      f("b", s.b, Arg::frozen);
      f("lora_a", s.lora_a, Arg::diff);
      f("lora_b", s.lora_b, Arg::diff);
    }
  };
  template <class T>
  struct Outputs {
    Tensor<T> y;  // [N, M]
    Tensor<T> h;  // [N, r] = x·Aᵀ, kept for dB
    static void fields(auto& s, auto&& f) {
      f("y", s.y, Arg::output);
      f("h", s.h, Arg::saved);
    }
  };

  template <class T>
  static T scaling(const Config& c) {
    return static_cast<T>(c.alpha / static_cast<double>(c.rank));
  }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    const std::size_t N = c.rows, K = c.in, M = c.out, r = c.rank;
    const auto base = Linear::forward(Linear::Config{N, K, M, c.bias},
                                      Linear::Inputs<T>{in.x, in.w, in.b});
    Outputs<T> out{Tensor<T>({N, M}), Tensor<T>({N, r})};
    matmul_xwt(N, r, K, in.x.ptr(), in.lora_a.ptr(), out.h.ptr());
    Tensor<T> u({N, M});
    matmul_xwt(N, M, r, out.h.ptr(), in.lora_b.ptr(), u.ptr());
    const T s = scaling<T>(c);
    for (std::size_t i = 0; i < N * M; ++i) out.y[i] = base.y[i] + u[i] * s;
    return out;
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>& in, const Outputs<T>& out,
                            const Outputs<T>& dout) {
    const std::size_t N = c.rows, K = c.in, M = c.out, r = c.rank;
    const T s = scaling<T>(c);
    Tensor<T> du({N, M}), dh({N, r}), dx_base({N, K}), dx_lora({N, K});
    for (std::size_t i = 0; i < N * M; ++i) du[i] = dout.y[i] * s;
    Inputs<T> g;
    g.lora_b = Tensor<T>({M, r});
    g.lora_a = Tensor<T>({r, K});
    g.x = Tensor<T>({N, K});
    matmul_dytx(N, M, r, du.ptr(), out.h.ptr(), g.lora_b.ptr());
    matmul_dyw(N, M, r, du.ptr(), in.lora_b.ptr(), dh.ptr());
    matmul_dytx(N, r, K, dh.ptr(), in.x.ptr(), g.lora_a.ptr());
    matmul_dyw(N, M, K, dout.y.ptr(), in.w.ptr(), dx_base.ptr());
    matmul_dyw(N, r, K, dh.ptr(), in.lora_a.ptr(), dx_lora.ptr());
    for (std::size_t i = 0; i < N * K; ++i) g.x[i] = dx_base[i] + dx_lora[i];
    return g;  // w and b: no gradient
  }

  // --- verification -------------------------------------------------------
  static std::vector<Config> cases() { return {{4, 9, 6, 2, 16.0, true}, {3, 5, 5, 3, 6.0, false}}; }
  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    Inputs<double> in{rng.normal({c.rows, c.in}), rng.normal({c.out, c.in}), {},
                      rng.normal({c.rank, c.in}, 0.3), rng.normal({c.out, c.rank}, 0.3)};
    if (c.bias) in.b = rng.normal({c.out});
    return in;
  }

  static void algebra(const Config& c, ad::Rng& rng, ad::Checks& k) {
    Inputs<double> in = sample(c, rng);
    // Unmerged = merged: y = linear(x, W + s·B·A, b) (exact in real arithmetic).
    Linear::Inputs<double> merged{in.x, in.w, in.b};
    const double s = scaling<double>(c);
    for (std::size_t m = 0; m < c.out; ++m)
      for (std::size_t kk = 0; kk < c.in; ++kk) {
        double ba = 0.0;
        for (std::size_t j = 0; j < c.rank; ++j)
          ba += in.lora_b[m * c.rank + j] * in.lora_a[j * c.in + kk];
        merged.w[m * c.in + kk] += s * ba;
      }
    const Linear::Config lc{c.rows, c.in, c.out, c.bias};
    k.close("unmerged = merged W + s·B·A (double)", forward(c, in).y,
            Linear::forward(lc, merged).y, kAlgebraTol);
    // PEFT's initialization B = 0 leaves the base output untouched, bit for bit.
    for (double& v : in.lora_b.data) v = 0.0;
    const auto inf = cast_fields<Inputs, float>(in);
    k.bitwise("B = 0 gives the base output (float)", forward(c, inf).y,
              Linear::forward(lc, Linear::Inputs<float>{inf.x, inf.w, inf.b}).y);
  }
};

}  // namespace lockstep::ops
