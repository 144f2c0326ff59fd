// Token embedding and learned positional embedding (GPT-2's wte and wpe).
//
//   Embedding:        y[n, :] = wte[ids[n], :]                 (a copy: exact)
//   LearnedPositions: y[b, t, :] = x[b, t, :] + wpe[offset + t, :]  (one add)
//
// GPT-2's `wte[id] + wpe[t]` is the two in sequence, with the same single
// rounding. LLaMA and BitNet use Embedding alone (positions come from RoPE).
//
// Backward (the scatter-add is a deterministic sequential chain, never an
// atomic): dwte[v, :] = +0 + dy[n1, :] + dy[n2, :] + ... over the tokens n with
// ids[n] == v in ascending n; dwpe[offset + t, :] = +0 + dy[0, t, :] + dy[1, t, :]
// + ... in ascending b; dx = dy.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/ad/check.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/ops/kernel_args.hpp"
#include "lockstep/ops/op.hpp"

namespace lockstep::ops {

struct Embedding {
  static constexpr std::string_view name = "embedding";
  struct Config {
    std::size_t tokens = 0;  // N = batch * sequence, flattened
    std::size_t vocab = 0;   // V
    std::size_t dim = 0;     // D
  };
  template <class T>
  struct Inputs {
    Tensor<Index> ids;  // [N], each in [0, V)
    Tensor<T> wte;      // [V, D]
    static void fields(auto& s, auto&& f) {
      f("ids", s.ids, Arg::index);
      f("wte", s.wte, Arg::diff);
    }
  };
  template <class T>
  struct Outputs {
    Tensor<T> y;  // [N, D]
    static void fields(auto& s, auto&& f) { f("y", s.y, Arg::output); }
  };

  // Kernels (ops/kernel_args.hpp).
  template <class T>
  struct FwdArgs {
    const Index *ids;
    const T *wte;
    T *y;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("ids", c.tokens, Seed::of(Seed::Kind::token_ids, c.vocab)), a.ids);
      f(ops::in("wte", c.vocab * c.dim, Seed::normal(1.0, 1e30f), c.dim), a.wte);
      f(ops::out("y", c.tokens * c.dim, c.dim), a.y);
    }
  };
  template <class T>
  struct BwdArgs {
    const Index *ids;
    const T *dy;
    T *dwte;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("ids", c.tokens, Seed::of(Seed::Kind::token_ids, c.vocab)), a.ids);
      f(ops::in("dy", c.tokens * c.dim, Seed::normal(1.0, 1e4f), c.dim), a.dy);
      f(ops::out("dwte", c.vocab * c.dim, c.dim), a.dwte);
    }
  };
  // Ragged shapes; ids repeated over 300 times (1029 tokens over 3 ids); a
  // GPT-2 vocabulary (16-bit sort keys) with a step's worth of tokens.
  static std::vector<GateCase<Config>> gate_cases() {
    std::vector<GateCase<Config>> v;
    for (auto [N, V, D] : std::initializer_list<std::array<std::size_t, 3>>{
             {1, 1, 1}, {3, 3, 5}, {37, 300, 33}, {130, 5003, 97}, {600, 7, 256}, {130, 300, 5000},
             {1029, 3, 33}, {16384, 50257, 8}, {4099, 50257, 97}})
      v.push_back({{N, V, D}, shape_text({{"tokens", N}, {"vocab", V}, {"dim", D}})});
    return v;
  }

  static std::size_t row_of(const Config& c, Index id) {
    if (id < 0 || static_cast<std::size_t>(id) >= c.vocab)
      throw std::out_of_range("embedding: token id " + std::to_string(id) + " outside [0, " +
                              std::to_string(c.vocab) + ")");
    return static_cast<std::size_t>(id);
  }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    Outputs<T> out{Tensor<T>({c.tokens, c.dim})};
    for (std::size_t n = 0; n < c.tokens; ++n) {
      const T* row = in.wte.ptr() + row_of(c, in.ids[n]) * c.dim;
      for (std::size_t d = 0; d < c.dim; ++d) out.y[n * c.dim + d] = row[d];
    }
    return out;
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>& in, const Outputs<T>&,
                            const Outputs<T>& dout) {
    Inputs<T> g;
    g.wte = Tensor<T>({c.vocab, c.dim});  // +0 everywhere: rows never used stay +0
    for (std::size_t n = 0; n < c.tokens; ++n) {
      T* row = g.wte.ptr() + row_of(c, in.ids[n]) * c.dim;
      for (std::size_t d = 0; d < c.dim; ++d) row[d] = row[d] + dout.y[n * c.dim + d];
    }
    return g;
  }

  // --- verification -------------------------------------------------------
  static std::vector<Config> cases() { return {{10, 7, 6}, {9, 3, 4}}; }  // repeated ids

  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    Inputs<double> in;
    in.ids = Tensor<Index>({c.tokens});
    for (Index& id : in.ids.data) id = static_cast<Index>(rng.below(c.vocab));
    in.wte = rng.normal({c.vocab, c.dim});
    return in;
  }

  static void algebra(const Config& c, ad::Rng& rng, ad::Checks& k) {
    // Rows are copies, bit for bit, in the canonical arithmetic.
    const auto in = cast_fields<Inputs, float>(sample(c, rng));
    const auto y = forward(c, in).y;
    std::uint64_t bad = 0;
    for (std::size_t n = 0; n < c.tokens; ++n)
      for (std::size_t d = 0; d < c.dim; ++d)
        bad += num::bits_of(y[n * c.dim + d]) !=
               num::bits_of(in.wte[static_cast<std::size_t>(in.ids[n]) * c.dim + d]);
    k.expect("rows are exact copies (float)", y.numel(), bad, "copied bits differ");
  }
};

struct LearnedPositions {
  static constexpr std::string_view name = "positions";
  struct Config {
    std::size_t batch = 0;    // B
    std::size_t seq = 0;      // T
    std::size_t dim = 0;      // D
    std::size_t max_seq = 0;  // rows of wpe (n_positions)
    std::size_t offset = 0;   // position of the first token (decode with a KV cache)
  };
  template <class T>
  struct Inputs {
    Tensor<T> x;    // [B, T, D]
    Tensor<T> wpe;  // [max_seq, D]
    static void fields(auto& s, auto&& f) {
      f("x", s.x, Arg::diff);
      f("wpe", s.wpe, Arg::diff);
    }
  };
  template <class T>
  struct Outputs {
    Tensor<T> y;  // [B, T, D]
    static void fields(auto& s, auto&& f) { f("y", s.y, Arg::output); }
  };

  // Kernels (ops/kernel_args.hpp). dx may alias dy.
  template <class T>
  struct FwdArgs {
    const T *x, *wpe;
    T *y;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("x", c.batch * c.seq * c.dim, Seed::normal(1.0, 1e30f), c.dim), a.x);
      f(ops::in("wpe", c.max_seq * c.dim, Seed::normal(1.0, 1e30f), c.dim), a.wpe);
      f(ops::out("y", c.batch * c.seq * c.dim, c.dim), a.y);
    }
  };
  template <class T>
  struct BwdArgs {
    const T *dy;
    T *dx, *dwpe;
    static void fields(auto& a, const Config& c, auto&& f) {
      f(ops::in("dy", c.batch * c.seq * c.dim, Seed::normal(1.0, 1e4f), c.dim), a.dy);
      f(ops::out("dx", c.batch * c.seq * c.dim, c.dim, "dy"), a.dx);
      f(ops::out("dwpe", c.max_seq * c.dim, c.dim), a.dwpe);
    }
  };
  static std::vector<GateCase<Config>> gate_cases() {
    std::vector<GateCase<Config>> v;
    for (auto [B, T, D, M, off] : std::initializer_list<std::array<std::size_t, 5>>{
             {1, 1, 1, 1, 0}, {1, 5, 33, 8, 2}, {3, 37, 97, 40, 3}, {2, 130, 256, 130, 0}, {4, 3, 5000, 9, 6}})
      v.push_back({{B, T, D, M, off},
                   shape_text({{"batch", B}, {"seq", T}, {"dim", D}, {"max_seq", M}, {"offset", off}})});
    return v;
  }

  static void validate(const Config& c) {
    if (c.offset + c.seq > c.max_seq)
      throw std::out_of_range("positions: offset + seq exceeds max_seq");
  }

  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    validate(c);
    Outputs<T> out{Tensor<T>({c.batch, c.seq, c.dim})};
    for (std::size_t b = 0; b < c.batch; ++b)
      for (std::size_t t = 0; t < c.seq; ++t)
        for (std::size_t d = 0; d < c.dim; ++d) {
          const std::size_t i = (b * c.seq + t) * c.dim + d;
          out.y[i] = in.x[i] + in.wpe[(c.offset + t) * c.dim + d];
        }
    return out;
  }

  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>&, const Outputs<T>&,
                            const Outputs<T>& dout) {
    validate(c);
    Inputs<T> g;
    g.x = dout.y;
    g.wpe = Tensor<T>({c.max_seq, c.dim});
    for (std::size_t b = 0; b < c.batch; ++b)  // ascending b: the canonical order
      for (std::size_t t = 0; t < c.seq; ++t)
        for (std::size_t d = 0; d < c.dim; ++d) {
          T& acc = g.wpe[(c.offset + t) * c.dim + d];
          acc = acc + dout.y[(b * c.seq + t) * c.dim + d];
        }
    return g;
  }

  static std::vector<Config> cases() { return {{2, 5, 4, 8, 0}, {3, 3, 5, 7, 2}}; }

  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    return {rng.normal({c.batch, c.seq, c.dim}), rng.normal({c.max_seq, c.dim})};
  }
};

}  // namespace lockstep::ops
