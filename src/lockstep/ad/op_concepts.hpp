// The op contract of src/lockstep/ops/op.hpp as C++20 concepts, and the typed
// op list. An op is a type; a list of op types is a type; a missing forward or
// backward (in either arithmetic) or a missing verification is a compile
// error, never a runtime surprise:
//
//   using MyLayer = ad::OpList<ops::RmsNorm, ops::Linear, ops::Rope, ...>;
//   static_assert(ad::DifferentiableOp<ops::Linear>);
#pragma once

#include <concepts>
#include <cstddef>
#include <string_view>
#include <vector>

#include "lockstep/ad/check.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/ops/op.hpp"

namespace lockstep::ad {

template <class Op, class T>
using InputsOf = typename Op::template Inputs<T>;
template <class Op, class T>
using OutputsOf = typename Op::template Outputs<T>;
template <class Op>
using ConfigOf = typename Op::Config;

template <class Op, class T>
concept HasForward = requires(const ConfigOf<Op>& c, const InputsOf<Op, T>& in) {
  { Op::template forward<T>(c, in) } -> std::same_as<OutputsOf<Op, T>>;
};

// backward(config, inputs, outputs, output cotangents) -> input gradients.
template <class Op, class T>
concept HasBackward = requires(const ConfigOf<Op>& c, const InputsOf<Op, T>& in,
                               const OutputsOf<Op, T>& out) {
  { Op::template backward<T>(c, in, out, out) } -> std::same_as<InputsOf<Op, T>>;
};

// A forward and its backward, in the checking (double) and the canonical
// (float) arithmetic.
template <class Op>
concept DifferentiableOp = requires {
  { Op::name } -> std::convertible_to<std::string_view>;
  typename Op::Config;
} && HasForward<Op, double> && HasForward<Op, float> && HasBackward<Op, double> &&
                           HasBackward<Op, float>;

// ... that also declares how it is verified: the shapes to check and a
// generator of valid random inputs.
template <class Op>
concept VerifiedOp = DifferentiableOp<Op> && requires(const ConfigOf<Op>& c, Rng& rng) {
  { Op::cases() } -> std::same_as<std::vector<ConfigOf<Op>>>;
  { Op::sample(c, rng) } -> std::same_as<InputsOf<Op, double>>;
};

// Quantized ops: the straight-through surrogate that the backward is the
// exact VJP of (see ops/quant.hpp).
template <class Op>
concept HasSurrogate = requires(const ConfigOf<Op>& c, const InputsOf<Op, double>& in) {
  { Op::template surrogate<double>(c, in, in) } -> std::same_as<OutputsOf<Op, double>>;
};

// Algebraic identities the op states about itself.
template <class Op>
concept HasAlgebra = requires(const ConfigOf<Op>& c, Rng& rng, Checks& k) {
  Op::algebra(c, rng, k);
};

// A typed list of verified ops.
template <VerifiedOp... Ops>
struct OpList {
  static constexpr std::size_t size = sizeof...(Ops);
};

}  // namespace lockstep::ad
