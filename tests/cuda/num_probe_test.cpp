// The header-only numeric functions give the GPU the CPU's bits: each
// elementary function on 2^22 inputs (raw bit patterns over the whole domain
// plus dense ramps where the functions bend), pow on pairs, and Philox words.
// NaN outputs are compared as a class: a NaN's payload and sign are not part
// of the contract (docs/NUMERICS.md).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "lockstep/backend/cuda/num_probe.hpp"
#include "lockstep/backend/cuda/probe.hpp"
#include "lockstep/num/elementary.hpp"
#include "lockstep/num/rng.hpp"

namespace ln = lockstep::num;

namespace {

std::vector<float> inputs(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> ramp(-100.0f, 100.0f), small(-4.0f, 4.0f);
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (i % 3) {
      case 0: x[i] = ln::float_of(rng()); break;  // everything, NaN and inf included
      case 1: x[i] = ramp(rng); break;
      default: x[i] = small(rng); break;
    }
  }
  return x;
}

bool same(float a, float b) {
  const bool na = a != a, nb = b != b;
  return (na && nb) || (!na && !nb && ln::bits_of(a) == ln::bits_of(b));
}

float host(const std::string& fn, float x) {
  if (fn == "exp") return ln::exp(x);
  if (fn == "exp2") return ln::exp2(x);
  if (fn == "expm1") return ln::expm1(x);
  if (fn == "log") return ln::log(x);
  if (fn == "log2") return ln::log2(x);
  if (fn == "log1p") return ln::log1p(x);
  if (fn == "tanh") return ln::tanh(x);
  if (fn == "sigmoid") return ln::sigmoid(x);
  if (fn == "sin") return ln::sin(x);
  if (fn == "cos") return ln::cos(x);
  return ln::rsqrt(x);
}

}  // namespace

TEST(CudaNum, ElementaryFunctionsMatchTheCpuBitForBit) {
  std::string why;
  if (!lockstep::cuda::available(&why)) GTEST_SKIP() << why;
  const std::size_t n = std::size_t{1} << 22;
  long total = 0;
  for (const std::string fn :
       {"exp", "exp2", "expm1", "log", "log2", "log1p", "tanh", "sigmoid", "sin", "cos", "rsqrt"}) {
    const auto x = inputs(n, 7);
    const auto dev = lockstep::cuda::elementary_on_device(fn, x);
    long mismatches = 0;
    std::size_t first = n;
    for (std::size_t i = 0; i < n; ++i)
      if (!same(host(fn, x[i]), dev[i]) && mismatches++ == 0) first = i;
    std::printf("cuda %-8s %zu inputs, %ld mismatches\n", fn.c_str(), n, mismatches);
    EXPECT_EQ(mismatches, 0) << fn << ": first at x = " << x[first] << " (bits 0x" << std::hex
                             << ln::bits_of(x[first]) << ")";
    total += mismatches;
  }
  const auto x = inputs(n, 8), y = inputs(n, 9);
  const auto dev = lockstep::cuda::pow_on_device(x, y);
  long mismatches = 0;
  for (std::size_t i = 0; i < n; ++i) mismatches += !same(ln::pow(x[i], y[i]), dev[i]);
  std::printf("cuda %-8s %zu inputs, %ld mismatches\n", "pow", n, mismatches);
  EXPECT_EQ(mismatches, 0);
}

TEST(CudaNum, PhiloxMatchesTheCpu) {
  std::string why;
  if (!lockstep::cuda::available(&why)) GTEST_SKIP() << why;
  const std::size_t n = 1 << 20;
  const auto dev = lockstep::cuda::philox_on_device(0x1234567890abcdefull, 77, (1ull << 40) - 5, n);
  long mismatches = 0;
  for (std::size_t i = 0; i < n; ++i)
    mismatches += dev[i] != ln::rng::bits32(0x1234567890abcdefull, 77, (1ull << 40) - 5 + i);
  std::printf("cuda philox %zu words, %ld mismatches\n", n, mismatches);
  EXPECT_EQ(mismatches, 0);
}
