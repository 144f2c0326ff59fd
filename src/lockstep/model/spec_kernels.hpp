// The specification kernels: every op of the model computed by its op
// specification (src/lockstep/ops/), templated on the scalar. The engine
// (transformer.hpp) runs the layer lists on a kernel set; with this one the
// model IS the composition of the op specs: each call copies its arguments
// into the op's Inputs, calls Op::forward / Op::backward, and copies the
// results out. Slow (copies, single thread) and obviously right: it is the
// reference the fast CPU kernels (backend/cpu/ops.hpp) must equal bit for bit
// in float, and what the whole-model gradient check differentiates in double.
//
// Kernel-set interface (shared with the fast sets): run(config, args) per op
// and direction, called by op type through ad::KeyedKernels
// (ad/kernel_set.hpp); the args are the op's FwdArgs/BwdArgs
// (ops/kernel_args.hpp: named row-major arrays with the shapes of the op's
// Inputs/Outputs, and the outputs that may alias an input); add_into. One
// generic run serves every op whose args carry the spec's tensors by name
// (x -> Inputs::x, y <- Outputs::y, dy -> the cotangent of y, dx <- the
// gradient of x): a new op needs nothing here. Attention (strided q/k/v rows)
// and BitLinear (the gradient check's surrogate modes) have their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "lockstep/ad/kernel_set.hpp"
#include "lockstep/model/kernel_aux.hpp"
#include "lockstep/ops/all.hpp"

namespace lockstep::model {

template <class T>
class SpecKernels : public ad::KeyedKernels<SpecKernels<T>, T> {
  // The op whose FwdArgs<T> or BwdArgs<T> A is (void: none of ops::ModelOps).
  template <class A, class List = ops::ModelOps>
  struct OpOf {
    using type = void;
  };
  template <class A, class Op, class... Rest>
  struct OpOf<A, ad::OpList<Op, Rest...>> {
    using type = std::conditional_t<std::is_same_v<A, ops::FwdArgsOf<Op, T>> || std::is_same_v<A, ops::BwdArgsOf<Op, T>>,
                                    Op, typename OpOf<A, ad::OpList<Rest...>>::type>;
  };
  template <class A>
  using OpOfArgs = typename OpOf<A>::type;

 public:
  using Index = ops::Index;
  using Aux = model::Aux;

  // BitLinear under the whole-model gradient check. Forward: the op.
  // Record: the op, and its inputs are kept (in call order). Surrogate: the
  // straight-through surrogate (ops/quant.hpp) with the detached corrections
  // taken at the recorded inputs of the same call site — the function whose
  // derivative the STE backward is, which finite differences can see.
  enum class Quant { Forward, Record, Surrogate };
  Quant quant = Quant::Forward;

  // Called by the engine at the start of every forward pass.
  void begin_forward() {
    next_point_ = 0;
    if (quant == Quant::Record) points_.clear();
  }

  // Every other op of ops::ModelOps, by the names of its args: each input
  // (and, in a backward, each saved value) goes into the spec's Inputs
  // (Outputs) field of the same name, a backward's cotangent of output `y`
  // is the args' `dy`; the spec's outputs go to the args' fields of the same
  // name, the gradient of input `x` to `dx`. A spec input the args do not
  // carry stays empty (a backward reads only the Config for its shape).
  template <class C, class A>
    requires(!std::is_void_v<OpOfArgs<A>>)
  void run(const C& c, const A& a) {
    using Op = OpOfArgs<A>;
    static_assert(std::is_same_v<C, typename Op::Config>);
    if constexpr (std::is_same_v<A, ops::FwdArgsOf<Op, T>>) {
      typename Op::template Inputs<T> in;
      ops::for_each_field(in, [&](std::string_view name, auto& t, ops::Arg) { load(a, c, name, t); });
      const auto out = Op::template forward<T>(c, in);
      ops::for_each_field(out, [&](std::string_view name, const auto& t, ops::Arg) { store(a, c, name, t); });
    } else {
      typename Op::template Inputs<T> in;
      typename Op::template Outputs<T> out, dout;
      ops::for_each_field(in, [&](std::string_view name, auto& t, ops::Arg) { load(a, c, name, t); });
      ops::for_each_field(out, [&](std::string_view name, auto& t, ops::Arg arg) {
        if (arg == ops::Arg::saved) load(a, c, name, t);
      });
      ops::for_each_field(dout, [&](std::string_view name, auto& t, ops::Arg arg) {
        if (arg == ops::Arg::output) load(a, c, "d" + std::string(name), t);
      });
      const auto g = Op::template backward<T>(c, in, out, dout);
      ops::for_each_field(g, [&](std::string_view name, const auto& t, ops::Arg arg) {
        if (arg == ops::Arg::diff) store(a, c, "d" + std::string(name), t);
      });
    }
  }
  template <class C, class A>
    requires(!std::is_void_v<OpOfArgs<A>>)
  void run(const C& c, const A& a, Aux&) {
    run(c, a);
  }

  void run(const ops::QuantLinearConfig& c, const ops::BitLinear::FwdArgs<T>& a, Aux&) {
    ops::BitLinear::Inputs<T> in{ten({c.rows, c.in}, a.x), ten({c.out, c.in}, a.w)};
    if (quant == Quant::Surrogate) {
      if (next_point_ >= points_.size()) throw std::logic_error("spec kernels: no recorded BitLinear point");
      put(ops::BitLinear::surrogate<T>(c, points_[next_point_++], in).y, a.y);
      return;
    }
    if (quant == Quant::Record) points_.push_back(in);
    put(ops::BitLinear::forward<T>(c, in).y, a.y);
  }
  void run(const ops::QuantLinearConfig& c, const ops::BitLinear::BwdArgs<T>& a, Aux&) {
    ops::BitLinear::Inputs<T> in{ten({c.rows, c.in}, a.x), ten({c.out, c.in}, a.w)};
    ops::BitLinear::Outputs<T> d{ten({c.rows, c.out}, a.dy)};
    const auto g = ops::BitLinear::backward<T>(c, in, {}, d);
    put(g.x, a.dx);
    if (a.dw != nullptr) put(g.w, a.dw);  // nullptr: a frozen weight
  }

  void run(const ops::Attention::Config& c, const ops::Attention::FwdArgs<T>& a) {
    const auto in = gather_qkv(c, a.q, a.ldq, a.k, a.v, a.ldkv);
    const auto out = ops::Attention::forward<T>(c, in);
    put(out.o, a.o);
    put(out.lse, a.lse);
  }
  void run(const ops::Attention::Config& c, const ops::Attention::BwdArgs<T>& a) {
    const auto in = gather_qkv(c, a.q, a.ldq, a.k, a.v, a.ldkv);
    const Shape oshape{c.batch, c.seq, c.q_heads, c.head_dim};
    ops::Attention::Outputs<T> out{ten(oshape, a.o), ten({c.batch, c.q_heads, c.seq}, a.lse)};
    ops::Attention::Outputs<T> d{ten(oshape, a.dout), {}};
    const auto g = ops::Attention::backward<T>(c, in, out, d);
    scatter_rows(g.q, c.q_heads * c.head_dim, a.dq, a.ldq);
    scatter_rows(g.k, c.kv_heads * c.head_dim, a.dk, a.ldkv);
    scatter_rows(g.v, c.kv_heads * c.head_dim, a.dv, a.ldkv);
  }
  // Attention through int8 units (ops/unit_attention.hpp): the same arguments.
  void run(const ops::UnitAttention::Config& c, const ops::UnitAttention::FwdArgs<T>& a) {
    const auto out = ops::UnitAttention::forward<T>(c, gather_qkv(c, a.q, a.ldq, a.k, a.v, a.ldkv));
    put(out.o, a.o);
    put(out.lse, a.lse);
  }
  void run(const ops::UnitAttention::Config& c, const ops::UnitAttention::BwdArgs<T>& a) {
    const auto in = gather_qkv(c, a.q, a.ldq, a.k, a.v, a.ldkv);
    const Shape oshape{c.batch, c.seq, c.q_heads, c.head_dim};
    ops::Attention::Outputs<T> out{ten(oshape, a.o), ten({c.batch, c.q_heads, c.seq}, a.lse)};
    ops::Attention::Outputs<T> d{ten(oshape, a.dout), {}};
    const auto g = ops::UnitAttention::backward<T>(c, in, out, d);
    scatter_rows(g.q, c.q_heads * c.head_dim, a.dq, a.ldq);
    scatter_rows(g.k, c.kv_heads * c.head_dim, a.dk, a.ldkv);
    scatter_rows(g.v, c.kv_heads * c.head_dim, a.dv, a.ldkv);
  }

  // The gradient of a tensor read by several ops: acc = acc + x, element-wise.
  void add_into(std::size_t n, T* acc, const T* x) {
    for (std::size_t i = 0; i < n; ++i) acc[i] = acc[i] + x[i];
  }

 private:
  // Tensor t <- the args' array `name` (left empty if the args have none, or it is absent).
  template <class A, class C, class E>
  static void load(const A& a, const C& c, std::string_view name, Tensor<E>& t) {
    A args = a;
    ops::for_each_arg(args, c, [&](const ops::Field& f, auto& p) {
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(*p)>, E>)
        if (f.name == name && f.count > 0 && p != nullptr) {
          t = Tensor<E>({f.count});
          for (std::size_t i = 0; i < f.count; ++i) t[i] = p[i];
        }
    });
  }
  // The args' output `name` <- tensor t (nothing if the args have none, or it is absent).
  template <class A, class C, class E>
  static void store(const A& a, const C& c, std::string_view name, const Tensor<E>& t) {
    A args = a;
    ops::for_each_arg(args, c, [&](const ops::Field& f, auto& p) {
      using P = std::remove_reference_t<decltype(p)>;
      if constexpr (std::is_same_v<P, E*>)
        if (f.name == name && f.role != ops::Role::in && f.count > 0 && p != nullptr) {
          if (t.numel() != f.count)
            throw std::logic_error("spec kernels: " + std::string(name) + " has " + std::to_string(t.numel()) +
                                   " cells, its argument " + std::to_string(f.count));
          for (std::size_t i = 0; i < f.count; ++i) p[i] = t[i];
        }
    });
  }
  static Tensor<T> ten(Shape s, const T* p) {
    Tensor<T> t(std::move(s));
    for (std::size_t i = 0; i < t.numel(); ++i) t[i] = p[i];
    return t;
  }
  static void put(const Tensor<T>& t, T* dst) {
    for (std::size_t i = 0; i < t.numel(); ++i) dst[i] = t[i];
  }
  static Tensor<T> gather_rows(Shape s, const T* p, std::size_t width, std::size_t ld) {
    Tensor<T> t(std::move(s));
    const std::size_t rows = t.numel() / width;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t e = 0; e < width; ++e) t[r * width + e] = p[r * ld + e];
    return t;
  }
  static void scatter_rows(const Tensor<T>& t, std::size_t width, T* p, std::size_t ld) {
    const std::size_t rows = t.numel() / width;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t e = 0; e < width; ++e) p[r * ld + e] = t[r * width + e];
  }
  static ops::Attention::Inputs<T> gather_qkv(const ops::Attention::Config& c, const T* q, std::size_t ldq,
                                              const T* k, const T* v, std::size_t ldkv) {
    return {gather_rows({c.batch, c.seq, c.q_heads, c.head_dim}, q, c.q_heads * c.head_dim, ldq),
            gather_rows({c.batch, c.seq, c.kv_heads, c.head_dim}, k, c.kv_heads * c.head_dim, ldkv),
            gather_rows({c.batch, c.seq, c.kv_heads, c.head_dim}, v, c.kv_heads * c.head_dim, ldkv)};
  }

  std::vector<ops::BitLinear::Inputs<T>> points_;
  std::size_t next_point_ = 0;
};

}  // namespace lockstep::model
