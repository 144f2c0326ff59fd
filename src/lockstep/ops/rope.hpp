// Rotary position embedding on [B, T, H, Dh] (queries or keys), in both
// pairings used in the wild:
//   rotate_half  (Hugging Face LLaMA, GPT-NeoX): pairs (j, j + Dh/2)
//   interleaved  (GPT-J, Meta's original LLaMA): pairs (2j, 2j + 1)
//
// Canonical expression, for pair j (0 <= j < Dh/2) at position p = offset + t:
//   inv_freq_j = 1 / pow(base, (2j) / Dh)        (each op correctly rounded in T;
//                                                  pow is lockstep's own in float)
//   angle = T(p) * inv_freq_j;  c = cos(angle);  s = sin(angle)
//   y_a = a*c - b*s;  y_b = b*c + a*s             (a, b: the pair's two entries)
// which is Hugging Face's float32 `q*cos + rotate_half(q)*sin`, op for op.
// The backward is the rotation by -angle (R(θ) is orthogonal: Rᵀ = R(-θ)):
//   da = dy_a*c + dy_b*s;  db = dy_b*c - dy_a*s
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

enum class RopeLayout { rotate_half, interleaved };

struct Rope {
  static constexpr std::string_view name = "rope";
  struct Config {
    std::size_t batch = 0;
    std::size_t seq = 0;
    std::size_t heads = 0;
    std::size_t head_dim = 0;  // even
    double base = 10000.0;     // theta
    RopeLayout layout = RopeLayout::rotate_half;
    std::size_t offset = 0;  // position of the first token
  };
  template <class T>
  struct Inputs {
    Tensor<T> x;  // [B, T, H, Dh]
    static void fields(auto& s, auto&& f) { f("x", s.x, Arg::diff); }
  };
  template <class T>
  struct Outputs {
    Tensor<T> y;  // [B, T, H, Dh]
    static void fields(auto& s, auto&& f) { f("y", s.y, Arg::output); }
  };

  // Kernels (ops/kernel_args.hpp). y may alias x (in place). The kernels
  // cache the cos/sin table of the last Config: the gates call them twice.
  static constexpr int gate_calls = 2;
  template <class T>
  struct FwdArgs {
    const T *x;
    T *y;
    static void fields(auto& a, const Config& c, auto&& f) {
      const std::size_t n = c.batch * c.seq * c.heads * c.head_dim;
      f(ops::in("x", n, Seed::normal(1.0, 1e30f), c.head_dim), a.x);
      f(ops::out("y", n, c.head_dim, "x"), a.y);
    }
  };
  template <class T>
  struct BwdArgs {
    const T *dy;
    T *dx;
    static void fields(auto& a, const Config& c, auto&& f) {
      const std::size_t n = c.batch * c.seq * c.heads * c.head_dim;
      f(ops::in("dy", n, Seed::normal(1.0, 1e30f), c.head_dim), a.dy);
      f(ops::out("dx", n, c.head_dim, "dy"), a.dx);
    }
  };
  static std::vector<GateCase<Config>> gate_cases() {
    struct S {
      std::size_t B, T, H, Dh;
      double base;
      std::size_t offset;
    };
    std::vector<GateCase<Config>> v;
    for (const S& s : {S{1, 1, 1, 2, 10000.0, 0}, S{1, 5, 3, 6, 10000.0, 0}, S{2, 37, 3, 64, 10000.0, 0},
                       S{3, 33, 2, 10, 500000.0, 1000}, S{1, 130, 1, 128, 10000.0, 7}})
      for (auto layout : {RopeLayout::rotate_half, RopeLayout::interleaved})
        v.push_back({{s.B, s.T, s.H, s.Dh, s.base, layout, s.offset},
                     shape_text({{"batch", s.B}, {"seq", s.T}, {"heads", s.H}, {"head_dim", s.Dh},
                                 {"base", static_cast<std::size_t>(s.base)}, {"offset", s.offset}}) +
                         (layout == RopeLayout::interleaved ? " interleaved" : " rotate_half")});
    return v;
  }

  // cos/sin of every (position t, pair j), row-major [seq, Dh/2].
  template <class T>
  struct Table {
    std::vector<T> cos, sin;
  };
  template <class T>
  static Table<T> table(const Config& c) {
    using M = Math<T>;
    const std::size_t half = c.head_dim / 2;
    std::vector<T> inv_freq(half);
    for (std::size_t j = 0; j < half; ++j)
      inv_freq[j] = T(1) / M::pow(static_cast<T>(c.base),
                                  static_cast<T>(2 * j) / static_cast<T>(c.head_dim));
    Table<T> tab{std::vector<T>(c.seq * half), std::vector<T>(c.seq * half)};
    for (std::size_t t = 0; t < c.seq; ++t)
      for (std::size_t j = 0; j < half; ++j) {
        const T angle = static_cast<T>(c.offset + t) * inv_freq[j];
        tab.cos[t * half + j] = M::cos(angle);
        tab.sin[t * half + j] = M::sin(angle);
      }
    return tab;
  }

  // The two entries of pair j within one head vector.
  static std::size_t first(const Config& c, std::size_t j) {
    return c.layout == RopeLayout::rotate_half ? j : 2 * j;
  }
  static std::size_t second(const Config& c, std::size_t j) {
    return c.layout == RopeLayout::rotate_half ? j + c.head_dim / 2 : 2 * j + 1;
  }

  // y = R(sign · angle) x for every head vector: sign +1 is the forward,
  // -1 the inverse rotation (the backward). Negating s is exact.
  template <class T>
  static Tensor<T> rotate(const Config& c, const Tensor<T>& x, int sign) {
    const Table<T> tab = table<T>(c);
    const std::size_t half = c.head_dim / 2;
    Tensor<T> y(x.shape);
    for (std::size_t b = 0; b < c.batch; ++b)
      for (std::size_t t = 0; t < c.seq; ++t)
        for (std::size_t h = 0; h < c.heads; ++h) {
          const std::size_t base = ((b * c.seq + t) * c.heads + h) * c.head_dim;
          for (std::size_t j = 0; j < half; ++j) {
            const std::size_t ia = base + first(c, j), ib = base + second(c, j);
            const T cs = tab.cos[t * half + j];
            const T sn = sign > 0 ? tab.sin[t * half + j] : -tab.sin[t * half + j];
            const T a = x[ia], bb = x[ib];
            y[ia] = a * cs - bb * sn;
            y[ib] = bb * cs + a * sn;
          }
        }
    return y;
  }

  static void validate(const Config& c) {
    if (c.head_dim % 2 != 0) throw std::invalid_argument("rope: head_dim must be even");
  }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    validate(c);
    return {rotate(c, in.x, +1)};
  }
  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>&, const Outputs<T>&,
                            const Outputs<T>& dout) {
    validate(c);
    return {rotate(c, dout.y, -1)};
  }

  // --- verification -------------------------------------------------------
  static std::vector<Config> cases() {
    return {{1, 5, 2, 8, 10000.0, RopeLayout::rotate_half, 0},
            {2, 4, 1, 6, 10000.0, RopeLayout::interleaved, 0},
            {1, 3, 2, 4, 500000.0, RopeLayout::rotate_half, 1000}};
  }
  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    return {rng.normal({c.batch, c.seq, c.heads, c.head_dim})};
  }

  static void algebra(const Config& c, ad::Rng& rng, ad::Checks& k) {
    const Inputs<double> in = sample(c, rng);
    const auto inf = cast_fields<Inputs, float>(in);
    // R(-θ) R(θ) = I: exact in real arithmetic. In float each rotation costs
    // ~3 roundings of 2^-24 per entry and the tables' cos² + sin² misses 1 by
    // their ulp errors: well under 2^-19 (32 roundings) of the input's scale.
    const auto back_d = rotate(c, rotate(c, in.x, +1), -1);
    const auto back_f = rotate(c, rotate(c, inf.x, +1), -1);
    k.close("R(-θ)·R(θ) = identity (double)", back_d, in.x, kAlgebraTol);
    k.close("R(-θ)·R(θ) = identity (float)", back_f, inf.x, 0x1p-19);
    // Rotations preserve each pair's length.
    const auto yd = rotate(c, in.x, +1);
    const auto yf = rotate(c, inf.x, +1);
    std::vector<double> nd, nd0, nf, nf0;
    for (std::size_t v = 0; v < in.x.numel() / c.head_dim; ++v)
      for (std::size_t j = 0; j < c.head_dim / 2; ++j) {
        const std::size_t ia = v * c.head_dim + first(c, j), ib = v * c.head_dim + second(c, j);
        nd.push_back(std::hypot(yd[ia], yd[ib]));
        nd0.push_back(std::hypot(in.x[ia], in.x[ib]));
        nf.push_back(std::hypot(static_cast<double>(yf[ia]), static_cast<double>(yf[ib])));
        nf0.push_back(std::hypot(static_cast<double>(inf.x[ia]), static_cast<double>(inf.x[ib])));
      }
    k.close("pair norms preserved (double)", nd, nd0, kAlgebraTol);
    k.close("pair norms preserved (float)", nf, nf0, 0x1p-20);
    // The two layouts are the same rotation under the pairing permutation
    // P (interleaved index 2j <-> rotate-half index j, 2j+1 <-> j + Dh/2):
    // interleaved(x) = P⁻¹ rotate_half(P x), bit for bit.
    Config other = c;
    other.layout = c.layout == RopeLayout::rotate_half ? RopeLayout::interleaved
                                                       : RopeLayout::rotate_half;
    Tensor<float> xp(inf.x.shape);
    const std::size_t half = c.head_dim / 2;
    for (std::size_t v = 0; v < inf.x.numel() / c.head_dim; ++v)
      for (std::size_t j = 0; j < half; ++j) {
        xp[v * c.head_dim + first(other, j)] = inf.x[v * c.head_dim + first(c, j)];
        xp[v * c.head_dim + second(other, j)] = inf.x[v * c.head_dim + second(c, j)];
      }
    const auto yp = rotate(other, xp, +1);
    Tensor<float> back(yf.shape);
    for (std::size_t v = 0; v < inf.x.numel() / c.head_dim; ++v)
      for (std::size_t j = 0; j < half; ++j) {
        back[v * c.head_dim + first(c, j)] = yp[v * c.head_dim + first(other, j)];
        back[v * c.head_dim + second(c, j)] = yp[v * c.head_dim + second(other, j)];
      }
    k.bitwise("layouts agree under the pair permutation (float)", back, yf);
    // Position 0 is the identity (cos 0 = 1, sin 0 = 0 exactly).
    if (c.offset == 0) {
      const std::size_t row = c.heads * c.head_dim;
      std::uint64_t bad = 0, n = 0;
      for (std::size_t b = 0; b < c.batch; ++b)
        for (std::size_t i = 0; i < row; ++i, ++n)
          bad += num::bits_of(yf[b * c.seq * row + i]) != num::bits_of(inf.x[b * c.seq * row + i]);
      k.expect("position 0 is the identity (float)", n, bad, "rotated at position 0");
    }
  }
};

}  // namespace lockstep::ops
