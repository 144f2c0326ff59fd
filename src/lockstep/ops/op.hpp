// What an op is, in lockstep: a TYPE (a struct with no state) that declares
//
//   static constexpr std::string_view name;      // "layernorm"
//   struct Config { ... };                        // shapes and hyperparameters
//   template <class T> struct Inputs  { ...; static void fields(auto& s, auto&& f); };
//   template <class T> struct Outputs { ...; static void fields(auto& s, auto&& f); };
//   template <class T> static Outputs<T> forward(const Config&, const Inputs<T>&);
//   template <class T> static Inputs<T>  backward(const Config&, const Inputs<T>& in,
//                                                 const Outputs<T>& out,
//                                                 const Outputs<T>& dout);
//   // its verification:
//   static std::vector<Config> cases();                       // shapes to check
//   static Inputs<double> sample(const Config&, ad::Rng&);    // a random valid input
//   (optional) static void algebra(const Config&, ad::Rng&, ad::Checks&);
//   (optional, quantized ops) template <class T> static Outputs<T>
//              surrogate(const Config&, const Inputs<T>& at, const Inputs<T>& x);
//   // its kernels (ops the models run; ops/kernel_args.hpp):
//   template <class T> struct FwdArgs, BwdArgs;  static gate_cases();
//
// `fields` lists the struct's tensors in a fixed order with their role (Arg):
// this is how the generic gradient checker and the float/double casts walk an
// op's arguments without knowing the op. An op the models run also declares
// its kernels' arguments (FwdArgs/BwdArgs, with their own `fields`) and its
// gate shapes: ops/kernel_args.hpp; the GPU gates and the CPU-kernel bit tests
// walk those.
//
// The backward receives the cotangents in an Outputs<T> whose `output` fields
// are filled (its `saved` fields are empty) and returns the gradients in an
// Inputs<T> whose `diff` fields are filled with the shapes of the inputs; its
// `frozen` and `index` fields stay EMPTY (a frozen tensor receives no gradient:
// the checker rejects a backward that writes one).
//
// src/lockstep/ad/op_concepts.hpp states this contract as C++20 concepts;
// src/lockstep/ops/all.hpp lists every op in one typed OpList.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

#include "lockstep/ops/scalar.hpp"
#include "lockstep/tensor/tensor.hpp"

namespace lockstep::ops {

// The role of a tensor field.
enum class Arg {
  diff,    // input the op is differentiated with respect to
  frozen,  // float input that must receive no gradient (LoRA's base weight)
  index,   // integer input (token ids, targets): not differentiable
  output,  // primary output: the backward receives its cotangent
  saved,   // output kept for the backward only (row statistics): no cotangent
};

using Index = std::int32_t;

// The tolerance of the algebraic identities checked in double: some 900
// roundings of 2^-53 (measured errors are ~1e-16 to 1e-15; the planted bugs
// that these checks must catch move them by 1e-6 and more).
inline constexpr double kAlgebraTol = 1e-13;

template <class T>
inline constexpr bool is_float_tensor_v = false;
template <class T>
inline constexpr bool is_float_tensor_v<Tensor<T>> = std::is_floating_point_v<T>;

// Calls f(name, tensor, arg) for every field of s (an Inputs<T> or Outputs<T>).
template <class S, class F>
void for_each_field(S& s, F&& f) {
  std::remove_const_t<S>::fields(s, f);
}

// Converts Inputs<From>/Outputs<From> to the same struct over To: float
// fields element-wise (double -> float rounds to nearest), index fields copied.
template <template <class> class S, class To, class From>
S<To> cast_fields(const S<From>& src) {
  std::vector<const Tensor<From>*> floats;
  std::vector<const Tensor<Index>*> ints;
  for_each_field(src, [&](std::string_view, const auto& t, Arg) {
    if constexpr (std::is_same_v<std::decay_t<decltype(t)>, Tensor<From>>)
      floats.push_back(&t);
    else
      ints.push_back(&t);
  });
  S<To> dst;
  std::size_t a = 0, b = 0;
  for_each_field(dst, [&](std::string_view, auto& t, Arg) {
    if constexpr (std::is_same_v<std::decay_t<decltype(t)>, Tensor<To>>)
      t = floats[a++]->template cast<To>();
    else
      t = *ints[b++];
  });
  return dst;
}

// ---------------------------------------------------------------------------
// The canonical matrix product, used by every op that multiplies matrices:
//   C[i*ldc + j] = dot_seq over k = 0..K-1 of A(i,k) * B(k,j)
//   A(i,k) = A[i*sai + k*sak],  B(k,j) = B[k*sbk + j*sbj]
// i.e. per output cell acc = +0, acc = fma(A(i,k), B(k,j), acc), k ascending.
// The strides express the transposes (X·Wᵀ, dY·W, dYᵀ·X) without copies.
// ---------------------------------------------------------------------------
template <class T>
void matmul(std::size_t I, std::size_t J, std::size_t K, const T* A, std::size_t sai,
            std::size_t sak, const T* B, std::size_t sbk, std::size_t sbj, T* C,
            std::size_t ldc) {
  const auto sak_ = static_cast<std::ptrdiff_t>(sak);
  const auto sbk_ = static_cast<std::ptrdiff_t>(sbk);
  for (std::size_t i = 0; i < I; ++i)
    for (std::size_t j = 0; j < J; ++j)
      C[i * ldc + j] = Math<T>::dot_seq(A + i * sai, sak_, B + j * sbj, sbk_, K);
}

// Y[n,m] = Σ_k X[n,k] W[m,k]            (X: [N,K], W: [M,K] as in nn.Linear)
template <class T>
void matmul_xwt(std::size_t N, std::size_t M, std::size_t K, const T* X, const T* W, T* Y) {
  matmul(N, M, K, X, K, 1, W, 1, K, Y, M);
}
// dX[n,k] = Σ_m dY[n,m] W[m,k]          (dY: [N,M], W: [M,K])
template <class T>
void matmul_dyw(std::size_t N, std::size_t M, std::size_t K, const T* dY, const T* W, T* dX) {
  matmul(N, K, M, dY, M, 1, W, K, 1, dX, K);
}
// dW[m,k] = Σ_n dY[n,m] X[n,k]          (sum over the rows n ascending)
template <class T>
void matmul_dytx(std::size_t N, std::size_t M, std::size_t K, const T* dY, const T* X, T* dW) {
  matmul(M, K, N, dY, 1, M, X, K, 1, dW, K);
}

}  // namespace lockstep::ops
