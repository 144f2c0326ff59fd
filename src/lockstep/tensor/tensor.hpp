// A minimal host tensor: a shape and a dense row-major array, templated on the
// element type. The op specifications (src/lockstep/ops/) are written against
// it in double (for checking) and in float (the canonical execution type).
// It is deliberately small: no strides, no views, no device storage; the CPU
// and CUDA backends grow their own storage later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace lockstep {

using Shape = std::vector<std::size_t>;

inline std::size_t numel_of(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::size_t{1}, std::multiplies<>());
}

inline std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s.append(",");
    s.append(std::to_string(shape[i]));
  }
  return s.append("]");
}

template <class T>
struct Tensor {
  Shape shape;         // empty shape and empty data: "no tensor" (e.g. an absent bias)
  std::vector<T> data;  // row-major, numel_of(shape) elements

  Tensor() = default;
  // A zero-filled tensor (T{} is +0 for floating point).
  explicit Tensor(Shape s) : shape(std::move(s)), data(numel_of(shape)) {}
  Tensor(Shape s, std::vector<T> d) : shape(std::move(s)), data(std::move(d)) {
    if (data.size() != numel_of(shape))
      throw std::invalid_argument("Tensor: data size does not match shape " + shape_str(shape));
  }

  std::size_t numel() const { return data.size(); }
  bool empty() const { return data.empty(); }
  T* ptr() { return data.data(); }
  const T* ptr() const { return data.data(); }
  T& operator[](std::size_t i) { return data[i]; }
  const T& operator[](std::size_t i) const { return data[i]; }

  // Element-wise conversion (double -> float rounds to nearest even).
  template <class U>
  Tensor<U> cast() const {
    Tensor<U> r;
    r.shape = shape;
    r.data.reserve(data.size());
    for (const T& v : data) r.data.push_back(static_cast<U>(v));
    return r;
  }
};

}  // namespace lockstep
