// What the fused units tests share (tests/cpu/units_fused_test.cpp,
// tests/cuda/units_fused_cuda_test.cpp): seeded values whose rows and columns
// differ in scale (so every quantizer's axis matters), a bitwise comparison,
// and the shared-input shapes (N, K, the parts' outputs).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "lockstep/ad/rng.hpp"

namespace lockstep::test::units_fused {

inline std::mt19937_64& rng() {
  static std::mt19937_64 r(ad::seed_from_env());
  return r;
}
inline std::vector<float> values(std::size_t rows, std::size_t cols, float scale) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(rows * cols);
  for (std::size_t n = 0; n < rows; ++n)
    for (std::size_t j = 0; j < cols; ++j)
      v[n * cols + j] = scale * d(rng()) * std::ldexp(1.0f, -static_cast<int>((n + 2 * j) % 5));
  return v;
}
// Cells whose bits differ (the sizes differing: all of them).
inline std::size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return a.size() + b.size();
  std::size_t d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += std::memcmp(&a[i], &b[i], 4) != 0;
  return d;
}
struct Shape {
  std::size_t N, K;
  std::vector<std::size_t> outs;
};
// Ragged shapes: N, K and the parts' widths off and on the multiples the int8
// kernels vectorize by; `large` adds a GPT-2-sized group (the device tests).
inline std::vector<Shape> shapes(bool large = false) {
  std::vector<Shape> v = {{1, 1, {3}}, {7, 65, {17, 3, 3}}, {33, 130, {64, 16, 16}}, {64, 68, {132, 129}},
                          {5, 256, {1, 2, 3}}};
  if (large) v.push_back({300, 768, {768, 256, 256}});
  return v;
}

}  // namespace lockstep::test::units_fused
