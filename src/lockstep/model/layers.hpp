// The transformer's layers as typed op lists: completeness by construction.
//
// A layer is a TYPE: the list of its forward steps and the list of its
// backward steps. A step is one verified op (src/lockstep/ops/) applied at one
// named place of the layer:
//
//   using Ln1 = Step<"ln_1", ops::LayerNorm>;
//   using Block = Layer<Forward<Ln1, CAttn, ...>, Backward<..., CAttn, Ln1>>;
//
// What the compiler refuses (a compile error, never a runtime surprise):
//   * a step whose op is not an ad::VerifiedOp: no backward (in float or in
//     double), no forward, no verification cases: `Step` is constrained;
//   * a layer whose backward chain misses one of its forward steps, has a
//     step the forward does not, or runs them in another order than the exact
//     reverse of the forward: `Layer` requires BackwardChainCoversForward;
//   * a layer whose forward names a place twice.
// The families' lists are in model/families/ (gpt2.hpp, llama.hpp,
// bitnet.hpp). The engine (transformer.hpp) RUNS these lists: run_forward
// calls the layer implementation's handler for each forward step in list
// order and run_backward each backward step in list order, so a handler that
// is not listed never runs, and a listed step without a handler does not
// compile (no overload matches). tests/completeness/ proves the refusals with
// the compiler itself; tests/model/layers_test.cpp prints the lists.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "lockstep/ad/op_concepts.hpp"
#include "lockstep/ops/all.hpp"

namespace lockstep::model {

// A string usable as a template argument (the step's place in the layer).
template <std::size_t N>
struct Name {
  char s[N]{};
  constexpr Name(const char (&v)[N]) { std::copy_n(v, N, s); }  // NOLINT: implicit by design
  constexpr std::string_view view() const { return {s, N - 1}; }
};

// One op applied at one place of a layer. Only verified ops (forward and
// backward in float and double, cases and sample for the gradient checker)
// can be steps.
template <Name Place, class Op>
  requires ad::VerifiedOp<Op>
struct Step {
  using op = Op;
  static constexpr std::string_view place = Place.view();
  static constexpr std::string_view op_name = Op::name;
  // The same place with another op (BitNet's projections at LLaMA's places).
  template <class OtherOp>
  using with_op = Step<Place, OtherOp>;
};

template <class... Steps>
struct Forward {
  static constexpr std::size_t size = sizeof...(Steps);
};
template <class... Steps>
struct Backward {
  static constexpr std::size_t size = sizeof...(Steps);
};

namespace detail {

template <class S, class... Ts>
inline constexpr bool contains = (std::is_same_v<S, Ts> || ...);

template <class... Ts>
struct TypeList {};

// Reversal of a type list.
template <class Acc, class... Ts>
struct Reverse;
template <class... Acc>
struct Reverse<TypeList<Acc...>> {
  using type = TypeList<Acc...>;
};
template <class... Acc, class T, class... Ts>
struct Reverse<TypeList<Acc...>, T, Ts...> {
  using type = typename Reverse<TypeList<T, Acc...>, Ts...>::type;
};

template <class Fwd, class Bwd>
struct Chain {
  static constexpr bool forward_is_a_list = false;
  static constexpr bool backward_is_a_list = false;
  static constexpr bool no_forward_step_missing_from_backward = false;
  static constexpr bool no_backward_step_missing_from_forward = false;
  static constexpr bool backward_is_the_reverse_of_forward = false;
  static constexpr bool forward_places_are_unique = false;
};
template <class... Fs, class... Bs>
struct Chain<Forward<Fs...>, Backward<Bs...>> {
  static constexpr bool forward_is_a_list = true;
  static constexpr bool backward_is_a_list = true;
  static constexpr bool no_forward_step_missing_from_backward = (contains<Fs, Bs...> && ...);
  static constexpr bool no_backward_step_missing_from_forward = (contains<Bs, Fs...> && ...);
  static constexpr bool backward_is_the_reverse_of_forward =
      std::is_same_v<TypeList<Bs...>, typename Reverse<TypeList<>, Fs...>::type>;
  static constexpr bool forward_places_are_unique = [] {
    const std::string_view p[] = {std::string_view{}, Fs::place...};
    for (std::size_t i = 1; i < std::size(p); ++i)
      for (std::size_t j = i + 1; j < std::size(p); ++j)
        if (p[i] == p[j]) return false;
    return true;
  }();
  // How many forward steps have no backward step (0 for every valid layer).
  static constexpr std::size_t missing = (std::size_t{0} + ... + (contains<Fs, Bs...> ? 0 : 1));
};

}  // namespace detail

// The backward chain of a layer runs the backward of every forward step,
// exactly once, in the reverse order (each conjunct names one way to fail in
// the compiler's diagnostic).
template <class Fwd, class Bwd>
concept BackwardChainCoversForward =
    detail::Chain<Fwd, Bwd>::forward_is_a_list && detail::Chain<Fwd, Bwd>::backward_is_a_list &&
    detail::Chain<Fwd, Bwd>::no_forward_step_missing_from_backward &&
    detail::Chain<Fwd, Bwd>::no_backward_step_missing_from_forward &&
    detail::Chain<Fwd, Bwd>::backward_is_the_reverse_of_forward &&
    detail::Chain<Fwd, Bwd>::forward_places_are_unique;

template <class Fwd, class Bwd>
  requires BackwardChainCoversForward<Fwd, Bwd>
struct Layer {
  using forward_steps = Fwd;
  using backward_steps = Bwd;
  static constexpr std::size_t missing = detail::Chain<Fwd, Bwd>::missing;  // always 0 here
};

// Runs impl.forward(S{}) for every forward step S, in list order (and
// on_step(place, op) first, when given: the tests record the trace).
template <class L, class Impl, class OnStep>
void run_forward(Impl& impl, OnStep&& on_step) {
  [&]<class... S>(Forward<S...>) {
    ((on_step(S::place, S::op_name), impl.forward(S{})), ...);
  }(typename L::forward_steps{});
}
template <class L, class Impl, class OnStep>
void run_backward(Impl& impl, OnStep&& on_step) {
  [&]<class... S>(Backward<S...>) {
    ((on_step(S::place, S::op_name), impl.backward(S{})), ...);
  }(typename L::backward_steps{});
}

// The step of layer L's forward list at the place of step Like (a compile
// error when L has no step there): a handler written for one family's layer
// serves another's with the same places (BitNet's block runs LLaMA's handlers
// for the places they share, with BitNet's ops).
namespace detail {
template <class Fwd, class Like>
struct StepAtPlaceOf;
template <class... S, class Like>
struct StepAtPlaceOf<Forward<S...>, Like> {
  static constexpr std::size_t index = [] {
    const std::string_view places[] = {S::place...};
    std::size_t i = 0;
    while (i < sizeof...(S) && places[i] != Like::place) ++i;
    return i;
  }();
  static_assert(index < sizeof...(S), "the layer has no step at this place");
  using type = std::tuple_element_t<index, std::tuple<S...>>;
};
}  // namespace detail
template <class L, class Like>
using StepLike = typename detail::StepAtPlaceOf<typename L::forward_steps, Like>::type;

// "place:op" of every step, in list order (printing and tests).
template <class L>
std::vector<std::string> forward_step_names() {
  return []<class... S>(Forward<S...>) {
    return std::vector<std::string>{(std::string(S::place) + ":" + std::string(S::op_name))...};
  }(typename L::forward_steps{});
}
template <class L>
std::vector<std::string> backward_step_names() {
  return []<class... S>(Backward<S...>) {
    return std::vector<std::string>{(std::string(S::place) + ":" + std::string(S::op_name))...};
  }(typename L::backward_steps{});
}

}  // namespace lockstep::model
