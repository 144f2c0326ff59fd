// Kernel sets keyed by op (ops/kernel_args.hpp). A kernel set implements, for
// every op it runs, two overloads found by the type of the args:
//
//   void run(const ops::NormConfig&, const ops::LayerNorm::FwdArgs<T>&);
//   void run(const ops::NormConfig&, const ops::LayerNorm::BwdArgs<T>&);
//   (ops with kernel_keeps_aux take a trailing `Aux&`, the call site's storage)
//
// and derives from KeyedKernels, which gives the calls by op type:
//
//   k.template forward<ops::LayerNorm>(c, {.x = x, .gamma = g, .beta = b, .y = y, .mean = m, .rstd = r});
//   k.template backward<ops::Gelu>(c, {.x = x, .dy = dy, .dx = dx}, aux);
//
// HasKernels / KernelSetFor state the contract as concepts: a kernel set that
// lacks an op of a list (either direction, with or without its Aux) does not
// compile where the list is checked (model/kernel_set.hpp checks every layer
// of every family against each kernel set).
#pragma once

#include <concepts>
#include <cstddef>

#include "lockstep/ad/op_concepts.hpp"
#include "lockstep/ops/kernel_args.hpp"

namespace lockstep::ad {

// K runs Op's forward and backward on scalars T (with K::Aux where the op
// keeps one).
template <class K, class Op, class T>
concept HasKernels =
    requires(K& k, const ConfigOf<Op>& c, const ops::FwdArgsOf<Op, T>& fa, const ops::BwdArgsOf<Op, T>& ba) {
      requires ops::keeps_aux_v<Op> || requires {
        k.run(c, fa);
        k.run(c, ba);
      };
      requires !ops::keeps_aux_v<Op> || requires(typename K::Aux& aux) {
        k.run(c, fa, aux);
        k.run(c, ba, aux);
      };
    };

namespace detail {
template <class K, class T, class List>
inline constexpr bool all_have_kernels = false;
template <class K, class T, class... Ops>
inline constexpr bool all_have_kernels<K, T, OpList<Ops...>> = (HasKernels<K, Ops, T> && ...);
}  // namespace detail

// K has the kernels of every op of an OpList.
template <class K, class T, class List>
concept KernelSetFor = detail::all_have_kernels<K, T, List>;

// The calls by op type, for a kernel set Derived over scalars T: `aux` is the
// call site's Aux for an op that keeps one (kernel_keeps_aux), nothing else.
template <class Derived, class T>
class KeyedKernels {
 public:
  template <class Op, class... Aux>
  void forward(const ConfigOf<Op>& c, const ops::FwdArgsOf<Op, T>& a, Aux&... aux) {
    static_assert(sizeof...(Aux) == (ops::keeps_aux_v<Op> ? 1 : 0), "an Aux exactly where the op keeps one");
    static_cast<Derived&>(*this).run(c, a, aux...);
  }
  template <class Op, class... Aux>
  void backward(const ConfigOf<Op>& c, const ops::BwdArgsOf<Op, T>& a, Aux&... aux) {
    static_assert(sizeof...(Aux) == (ops::keeps_aux_v<Op> ? 1 : 0), "an Aux exactly where the op keeps one");
    static_cast<Derived&>(*this).run(c, a, aux...);
  }
};

}  // namespace lockstep::ad
