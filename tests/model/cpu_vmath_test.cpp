// The array elementary functions (backend/cpu/vmath.hpp) equal num::exp,
// num::tanh and num::sigmoid bit for bit: on a sweep of every 61st 32-bit pattern (all signs,
// exponents, NaNs, subnormals), on the boundaries of each function's paths,
// on ragged lengths and in place.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "lockstep/backend/cpu/vmath.hpp"
#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"

namespace {

using lockstep::num::bits_of;
using lockstep::num::float_of;

#if defined(__SANITIZE_ADDRESS__)
constexpr std::uint64_t kStride = 4099;  // sanitizer builds: a thinner sweep
#else
constexpr std::uint64_t kStride = 61;
#endif

// Values around every boundary of the scalar code's paths.
std::vector<float> boundaries() {
  std::vector<float> v;
  const float inf = std::numeric_limits<float>::infinity();
  for (float b : {0.0f, 89.0f, 88.7228f, -87.3365f, -103.972f, -104.0f, 10.0f, 0x1p-13f, 0x1p-126f, 0x1p-149f, 1.0f,
                  0.34657f, 0.5f, 2.0f, 20.0f, 40.0f, inf, 1e-30f}) {
    for (float s : {1.0f, -1.0f}) {
      float x = s * b;
      v.push_back(x);
      float up = x, down = x;
      for (int i = 0; i < 40; ++i) {
        up = std::nextafter(up, inf);
        down = std::nextafter(down, -inf);
        v.push_back(up);
        v.push_back(down);
      }
    }
  }
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  v.push_back(-std::numeric_limits<float>::quiet_NaN());
  v.push_back(float_of(0x7F800001u));  // signalling NaN pattern
  return v;
}

template <class Ref, class Arr>
std::size_t compare(const std::vector<float>& x, Ref ref, Arr arr) {
  std::vector<float> y(x.size());
  arr(x.data(), y.data(), x.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) bad += bits_of(y[i]) != bits_of(ref(x[i]));
  return bad;
}

}  // namespace

TEST(CpuVmath, ExpTanhSigmoidEqualTheScalarFunctionsOnASweepOfAllFloats) {
  std::printf("lane-wise (AVX-512) versions compiled in: %s\n", lockstep::cpu::vmath_vectorized() ? "yes" : "no");
  std::size_t checked = 0, bad_exp = 0, bad_tanh = 0, bad_sig = 0;
  std::vector<float> x;
  x.reserve(1 << 16);
  auto flush = [&] {
    bad_exp += compare(x, [](float v) { return lockstep::num::exp(v); }, lockstep::cpu::exp_n);
    bad_tanh += compare(x, [](float v) { return lockstep::num::tanh(v); }, lockstep::cpu::tanh_n);
    bad_sig += compare(x, [](float v) { return lockstep::num::sigmoid(v); }, lockstep::cpu::sigmoid_n);
    checked += x.size();
    x.clear();
  };
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += kStride) {
    x.push_back(float_of(static_cast<std::uint32_t>(u)));
    if (x.size() == (1u << 16)) flush();
  }
  x = boundaries();
  flush();
  std::printf("%zu inputs each: exp %zu differ, tanh %zu differ, sigmoid %zu differ\n", checked, bad_exp, bad_tanh,
              bad_sig);
  EXPECT_EQ(bad_exp, 0u);
  EXPECT_EQ(bad_tanh, 0u);
  EXPECT_EQ(bad_sig, 0u);
}

TEST(CpuVmath, RaggedLengthsAndInPlace) {
  std::size_t bad = 0, n_checked = 0;
  for (std::size_t n : {0u, 1u, 15u, 16u, 17u, 33u, 100u}) {
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = -30.0f + 0.61f * static_cast<float>(i);
    if (n > 3) x[3] = -120.0f;  // a scalar lane inside a vector
    std::vector<float> e = x, t = x, g = x;
    lockstep::cpu::exp_n(e.data(), e.data(), n);
    lockstep::cpu::tanh_n(t.data(), t.data(), n);
    lockstep::cpu::sigmoid_n(g.data(), g.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      bad += bits_of(e[i]) != bits_of(lockstep::num::exp(x[i]));
      bad += bits_of(t[i]) != bits_of(lockstep::num::tanh(x[i]));
      bad += bits_of(g[i]) != bits_of(lockstep::num::sigmoid(x[i]));
      n_checked += 3;
    }
  }
  std::printf("%zu in-place values, %zu differ\n", n_checked, bad);
  EXPECT_EQ(bad, 0u);
}
