// The kernel side of an op: besides its specification (Inputs/Outputs over
// tensors, op.hpp), an op that the models run declares
//
//   template <class T> struct FwdArgs { const T* x; ...; T* y; ...;
//                                       static void fields(auto& a, const Config& c, auto&& f); };
//   template <class T> struct BwdArgs { ... };        // the same, for its backward
//   static constexpr bool kernel_keeps_aux = true;     // (optional) the kernels take an Aux&
//   static std::vector<GateCase<Config>> gate_cases(); // the shapes the GPU gates run
//
// A kernel set (model::SpecKernels, cpu::OpKernels, cuda::OpKernels) is called
// by op type: `k.template forward<ops::LayerNorm>(c, {.x = ..., .y = ...})`
// (ad/kernel_set.hpp). The args are plain pointers (host or device) with the
// names of the spec's fields; `fields` reports each with its Field: role,
// element count as a function of the Config (and of the args' strides),
// how the gates seed it, and which input an output may alias. Generic code
// walks them without knowing the op: the GPU gate driver (backend/cuda/
// gate_driver.cpp) allocates, seeds, uploads and compares every argument, and
// the CPU-kernel bit tests (tests/model/cpu_kernels_test.cpp) do the same on
// the host.
//
// Conventions: a BwdArgs input with the name of a FwdArgs input is the same
// tensor (the gates seed it once and run the forward on it); a BwdArgs field
// of role `saved` is the forward's output of the same name.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/ops/op.hpp"

namespace lockstep::ops {

// What a kernel does with one of its arguments.
enum class Role {
  in,     // read
  out,    // written: every cell of it is the kernel's result
  saved,  // FwdArgs: written and kept for the backward; BwdArgs: read, the forward's output of that name
};

// How the gates draw an input, deterministically from the case's seed.
struct Seed {
  enum class Kind {
    normal,      // scale·N(0,1); 1 in 48 cells -0, 1 in 48 +0, 1 in 24 ±large (large > 0)
    uniform,     // U(lo, hi)
    norm_rows,   // normals in rows of `row` cells of very different scales (1e15, 1e-20, constant, mean 100)
    logit_rows,  // normals ×3 in rows of `row` cells: huge (1e30), spread (×30) and far-negative rows
    token_ids,   // ids in [0, row): few distinct ones, so rows repeat, the last id included
    targets,     // targets in [0, row), 1 in 8 ignored (-1), the first and last classes often, -100 at row 1
  };
  Kind kind = Kind::normal;
  double scale = 1.0;
  float large = 0.0f;
  double lo = -1.0, hi = 1.0;
  std::size_t row = 0;          // row length (norm_rows, logit_rows) or vocabulary (token_ids, targets)
  std::size_t neg_zero_every = 0;  // normal: also every such cell -0 (0: none); two inputs with the same
                                   // period have their -0 in the same cells (-0 + -0 = -0)

  static Seed normal(double scale = 1.0, float large = 0.0f, std::size_t neg_zero_every = 0) {
    Seed s;
    s.scale = scale;
    s.large = large;
    s.neg_zero_every = neg_zero_every;
    return s;
  }
  static Seed uniform(double lo, double hi) {
    Seed s;
    s.kind = Kind::uniform;
    s.lo = lo;
    s.hi = hi;
    return s;
  }
  static Seed of(Kind k, std::size_t row) {
    Seed s;
    s.kind = k;
    s.row = row;
    return s;
  }
};

// One argument as `fields` reports it.
struct Field {
  std::string_view name;
  Role role = Role::in;
  std::size_t count = 0;        // elements the array holds (strided: rows·ld); 0: absent (a null pointer)
  Seed seed{};                  // inputs
  std::size_t row = 0;          // row length, for the gates' messages (0: none)
  std::string_view may_alias{};  // out: may be the same array as this input (the engine passes one array)
  std::size_t lead = 0;         // cells before the array's first one that belong to other tensors (a
                                // strided tensor inside a wider row): the gates allocate lead + count
};

inline Field in(std::string_view name, std::size_t count, Seed seed = {}, std::size_t row = 0) {
  return {name, Role::in, count, seed, row, {}, 0};
}
inline Field out(std::string_view name, std::size_t count, std::size_t row = 0, std::string_view may_alias = {}) {
  return {name, Role::out, count, {}, row, may_alias, 0};
}
inline Field saved(std::string_view name, std::size_t count, std::size_t row = 0) {
  return {name, Role::saved, count, {}, row, {}, 0};
}

template <class Op, class T>
using FwdArgsOf = typename Op::template FwdArgs<T>;
template <class Op, class T>
using BwdArgsOf = typename Op::template BwdArgs<T>;

// Whether an op's kernels take the call site's Aux (what a forward keeps for
// its backward: GELU's tanh, BitLinear's dequantized operands).
template <class Op>
inline constexpr bool keeps_aux_v = requires { requires Op::kernel_keeps_aux; };

// Calls f(field, pointer) for every argument of a (an Op::FwdArgs/BwdArgs).
template <class Args, class Config, class F>
void for_each_arg(Args& a, const Config& c, F&& f) {
  std::remove_const_t<Args>::fields(a, c, f);
}

// One shape of an op's GPU gate. `layout` places strided arguments (the
// op's gate_arrange sets the args' strides from it); `sweep`: the backend
// runs the case once per kernel variant it may choose for the op (the CUDA
// GEMM's block tiles, attention's backward paths), not only the one its rule
// picks for this shape.
struct NoLayout {};
template <class Config, class Layout = NoLayout>
struct GateCase {
  Config config;
  std::string shape;  // "rows 37 in 65 out 129 bias"
  Layout layout{};
  bool sweep = false;
};

// "key v key v ..." for gate case labels.
inline std::string shape_text(std::initializer_list<std::pair<std::string_view, std::size_t>> kv) {
  std::string s;
  for (const auto& [k, v] : kv) {
    if (!s.empty()) s += ' ';
    s += k;
    s += ' ';
    s += std::to_string(v);
  }
  return s;
}

}  // namespace lockstep::ops
