// The kernel-set contract checked against the layers (model/layers.hpp): a
// kernel set K serves a layer when it has, for every op of the layer's steps
// (and every op such a step may run as: RunsAs, the units linear mode),
// the forward and the backward by op type (ad::HasKernels: the op's FwdArgs/
// BwdArgs over scalars T, with K::Aux where the op keeps one). Every op of a
// layer must also be in ops::ModelOps, the list the GPU gates and the CPU-kernel
// bit tests iterate: an op a model runs cannot miss its gates.
//
//   static_assert(model::KernelSetForFamily<cpu::OpKernels, float, Gpt2Family>);
//
// The engine (transformer.hpp) requires it of its kernel set for its family;
// model/kernel_set.cpp states it for the spec kernels (float and double) and
// the fast CPU kernels for every family, backend/cuda/gate_driver.cpp for the
// CUDA kernels over ops::ModelOps.
#pragma once

#include <type_traits>

#include "lockstep/ad/kernel_set.hpp"
#include "lockstep/model/layers.hpp"
#include "lockstep/ops/all.hpp"

namespace lockstep::model {

namespace detail {
template <class Op, class List>
inline constexpr bool in_list = false;
template <class Op, class... Ops>
inline constexpr bool in_list<Op, ad::OpList<Ops...>> = (std::is_same_v<Op, Ops> || ...);

// The ops a step of Op may run, by the model config: a linear step runs as
// ops::Linear or, with ModelConfig::linear = units, as ops::Int8Linear
// (transformer.hpp's linear_fwd / linear_bwd).
template <class Op>
struct RunsAs {
  using type = ad::OpList<Op>;
};
template <>
struct RunsAs<ops::Linear> {
  using type = ad::OpList<ops::Linear, ops::Int8Linear>;
};
// ... and an attention step as ops::UnitAttention with ModelConfig::attention = units.
template <>
struct RunsAs<ops::Attention> {
  using type = ad::OpList<ops::Attention, ops::UnitAttention>;
};
template <class K, class T, class List>
inline constexpr bool list_has_kernels = false;
template <class K, class T, class... Ops>
inline constexpr bool list_has_kernels<K, T, ad::OpList<Ops...>> = (ad::HasKernels<K, Ops, T> && ...);
template <class List>
inline constexpr bool list_in_model_ops = false;
template <class... Ops>
inline constexpr bool list_in_model_ops<ad::OpList<Ops...>> = (in_list<Ops, ops::ModelOps> && ...);

template <class K, class T, class Steps>
inline constexpr bool steps_have_kernels = false;
template <class K, class T, class... S>
inline constexpr bool steps_have_kernels<K, T, Forward<S...>> =
    (list_has_kernels<K, T, typename RunsAs<typename S::op>::type> && ...);

template <class Steps>
inline constexpr bool steps_in_model_ops = false;
template <class... S>
inline constexpr bool steps_in_model_ops<Forward<S...>> = (list_in_model_ops<typename RunsAs<typename S::op>::type> && ...);
}  // namespace detail

// Every op of layer L is one of ops::ModelOps (gated, bit-tested).
template <class L>
concept LayerOpsAreModelOps = detail::steps_in_model_ops<typename L::forward_steps>;

// K runs every op of layer L, forward and backward, on scalars T.
template <class K, class T, class L>
concept KernelSet = LayerOpsAreModelOps<L> && detail::steps_have_kernels<K, T, typename L::forward_steps>;

// ... every layer of family Fam (model/families/: Stem, Block, Head).
template <class K, class T, class Fam>
concept KernelSetForFamily = KernelSet<K, T, typename Fam::Stem> && KernelSet<K, T, typename Fam::Block> &&
                             KernelSet<K, T, typename Fam::Head>;

}  // namespace lockstep::model
