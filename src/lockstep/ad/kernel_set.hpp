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

// The float kernel set's declarations, one run() per op and direction, written
// once for every kernel set whose kernels are defined out of line (cpu::OpKernels,
// cuda::OpKernels): its class body says LOCKSTEP_FLOAT_OP_KERNELS(Aux) with its
// own kept-for-backward type. An op added to the model's list gets its two
// lines here; the KernelSet concepts (model/kernel_set.hpp) check every set.
// One op's two declarations, forward and backward; the trailing arguments are
// `, AUX& aux` (written `, , AUX& aux`) for a kernel that keeps values for its backward.
#define LOCKSTEP_OP_KERNEL_PAIR(CONFIG, OP, ...)                        \
  void run(const CONFIG& c, const ops::OP::FwdArgs<float>& a __VA_ARGS__); \
  void run(const CONFIG& c, const ops::OP::BwdArgs<float>& a __VA_ARGS__);
#define LOCKSTEP_FLOAT_OP_KERNELS(AUX) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::Embedding::Config, Embedding) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::LearnedPositions::Config, LearnedPositions) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::Linear::Config, Linear) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::QuantLinearConfig, BitLinear, , AUX& aux) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::Int8LinearConfig, Int8Linear) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::NormConfig, LayerNorm) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::NormConfig, RmsNorm) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::ElementwiseConfig, Gelu, , AUX& aux) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::ElementwiseConfig, SwiGlu, , AUX& aux) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::ElementwiseConfig, ReluSqMul) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::ElementwiseConfig, ResidualAdd) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::Rope::Config, Rope) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::Attention::Config, Attention) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::UnitAttention::Config, UnitAttention) \
  LOCKSTEP_OP_KERNEL_PAIR(ops::CrossEntropy::Config, CrossEntropy)
