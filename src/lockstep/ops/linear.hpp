// Linear layer with optional bias, in nn.Linear's layout (W is [out, in]).
//
// Canonical expression (every matrix-product cell is the GEMM order of
// op.hpp: acc = +0, acc = fma(a_k, b_k, acc) for k ascending):
//   y[n,m]  = chain_k(x[n,k] * W[m,k])  (+ b[m], one add after the chain)
//   dx[n,k] = chain_m(dy[n,m] * W[m,k])
//   dW[m,k] = chain_n(dy[n,m] * x[n,k])          (rows n ascending)
//   db[m]   = +0 + dy[0,m] + dy[1,m] + ...        (rows n ascending)
#pragma once

#include <string_view>
#include <vector>

#include "lockstep/ad/check.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/ops/kernel_args.hpp"
#include "lockstep/ops/op.hpp"

namespace lockstep::ops {

// Column sums of an [N, M] matrix as sequential chains over the rows.
template <class T>
Tensor<T> column_sums(const T* a, std::size_t rows, std::size_t cols) {
  Tensor<T> s({cols});
  for (std::size_t n = 0; n < rows; ++n)
    for (std::size_t m = 0; m < cols; ++m) s[m] = s[m] + a[n * cols + m];
  return s;
}

struct Linear {
  static constexpr std::string_view name = "linear";
  struct Config {
    std::size_t rows = 0;  // N (tokens)
    std::size_t in = 0;    // K
    std::size_t out = 0;   // M
    bool bias = true;
  };
  template <class T>
  struct Inputs {
    Tensor<T> x;  // [N, K]
    Tensor<T> w;  // [M, K]
    Tensor<T> b;  // [M], empty without bias
    static void fields(auto& s, auto&& f) {
      f("x", s.x, Arg::diff);
      f("w", s.w, Arg::diff);
      f("b", s.b, Arg::diff);
    }
  };
  template <class T>
  struct Outputs {
    Tensor<T> y;  // [N, M]
    static void fields(auto& s, auto&& f) { f("y", s.y, Arg::output); }
  };

  // Kernels (ops/kernel_args.hpp). b is null without a bias (c.bias false),
  // and so is db.
  template <class T>
  struct FwdArgs {
    const T *x, *w, *b;
    T *y;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("x", c.rows * c.in, Seed::uniform(-1, 1), c.in), a.x);
      f(ops::in("w", c.out * c.in, Seed::uniform(-1, 1), c.in), a.w);
      f(ops::in("b", c.bias ? c.out : 0, Seed::uniform(-1, 1)), a.b);
      f(ops::out("y", c.rows * c.out, c.out), a.y);
    }
  };
  template <class T>
  struct BwdArgs {
    const T *x, *w, *dy;
    T *dx, *dw, *db;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("x", c.rows * c.in, Seed::uniform(-1, 1), c.in), a.x);
      f(ops::in("w", c.out * c.in, Seed::uniform(-1, 1), c.in), a.w);
      f(ops::in("dy", c.rows * c.out, Seed::uniform(-1, 1), c.out), a.dy);
      f(ops::out("dx", c.rows * c.in, c.in), a.dx);
      f(ops::out("dw", c.out * c.in, c.in), a.dw);
      f(ops::out("db", c.bias ? c.out : 0), a.db);
    }
  };
  // Ragged: every size off the GEMM's 128-row/column tiles, its 8- and 16-deep
  // k tiles and the 4-wide vectors (scalar-load paths), rows 1 and batches of
  // rows; in, out multiples of 4 but not of the tiles (16-byte-load paths
  // with ragged edges), and in a multiple of 4 with out not (mixed loads).
  // These small shapes are swept over every block tile.
  // Then a large shape (several k tiles, full tiles, a big grid), the same
  // size class with every extent ragged (k included: the rule sends it to the
  // tiled kernels), and 2053 rows (the bias column sums' ring of row tiles
  // wraps six times).
  static std::vector<GateCase<Config>> gate_cases() {
    std::vector<std::array<std::size_t, 3>> small, large;
    for (std::size_t rows : {1, 37, 129})
      for (std::size_t in : {1, 65, 257})
        for (std::size_t out : {3, 129, 200}) small.push_back({rows, in, out});
    small.push_back({37, 256, 200});
    small.push_back({129, 68, 132});
    small.push_back({300, 132, 260});
    // in a multiple of 4, out not: the backward's dy takes 4-byte loads, w and
    // x 16-byte ones (GPT-2's LM head, out = 50257).
    small.push_back({37, 256, 129});
    small.push_back({129, 68, 3});
    large.push_back({512, 768, 2304});
    large.push_back({516, 772, 2300});
    large.push_back({2053, 68, 132});
    std::vector<GateCase<Config>> v;
    for (const auto* list : {&small, &large})
      for (const auto& [rows, in, out] : *list)
        for (bool bias : {false, true})
          v.push_back({{rows, in, out, bias},
                       shape_text({{"rows", rows}, {"in", in}, {"out", out}}) + (bias ? " bias" : ""),
                       {},
                       list == &small});
    return v;
  }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    Outputs<T> out{Tensor<T>({c.rows, c.out})};
    matmul_xwt(c.rows, c.out, c.in, in.x.ptr(), in.w.ptr(), out.y.ptr());
    if (c.bias)
      for (std::size_t n = 0; n < c.rows; ++n)
        for (std::size_t m = 0; m < c.out; ++m) out.y[n * c.out + m] += in.b[m];
    return out;
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>& in, const Outputs<T>&,
                            const Outputs<T>& dout) {
    Inputs<T> g{Tensor<T>({c.rows, c.in}), Tensor<T>({c.out, c.in}), {}};
    matmul_dyw(c.rows, c.out, c.in, dout.y.ptr(), in.w.ptr(), g.x.ptr());
    matmul_dytx(c.rows, c.out, c.in, dout.y.ptr(), in.x.ptr(), g.w.ptr());
    if (c.bias) g.b = column_sums(dout.y.ptr(), c.rows, c.out);
    return g;
  }

  // --- verification -------------------------------------------------------
  static std::vector<Config> cases() {
    return {{5, 7, 4, true}, {3, 6, 6, false}, {1, 17, 9, true}};
  }

  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    Inputs<double> in{rng.normal({c.rows, c.in}), rng.normal({c.out, c.in}), {}};
    if (c.bias) in.b = rng.normal({c.out});
    return in;
  }
};

}  // namespace lockstep::ops
