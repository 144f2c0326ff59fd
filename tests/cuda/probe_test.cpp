// The first kernel honours the numeric contract: the device's fma_rn equals the
// host's std::fma bit for bit, subnormals and signed zeros included.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "lockstep/backend/cuda/probe.hpp"
#include "lockstep/num/fp.hpp"

namespace ln = lockstep::num;

TEST(CudaProbe, FmaMatchesHostBitForBit) {
  std::string why;
  if (!lockstep::cuda::available(&why)) GTEST_SKIP() << why;
  std::mt19937 rng(12345);
  const int n = 1 << 20;
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    // Raw bit patterns (finite and not) so subnormals, ±0, inf and NaN occur.
    a[i] = ln::float_of(rng());
    b[i] = ln::float_of(rng());
    c[i] = ln::float_of(rng());
  }
  a[0] = -0.0f; b[0] = 1.0f; c[0] = -0.0f;  // must stay -0
  const auto out = lockstep::cuda::fma_on_device(a, b, c);
  long mismatches = 0;
  for (int i = 0; i < n; ++i) {
    const float want = ln::fma_rn(a[i], b[i], c[i]);
    const bool both_nan = want != want && out[i] != out[i];
    if (!both_nan && ln::bits_of(want) != ln::bits_of(out[i])) ++mismatches;
  }
  std::printf("cuda fma_rn vs host std::fma: %d cases, %ld mismatches\n", n, mismatches);
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(ln::bits_of(out[0]), 0x80000000u);
}
