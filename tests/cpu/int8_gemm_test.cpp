// The CPU int8 GEMM is exact: equal to the spec loop ops::int8_matmul_nt.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <vector>

#include "lockstep/backend/cpu/int8_gemm.hpp"
#include "lockstep/ops/quant.hpp"

namespace {

std::vector<std::int8_t> codes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(-127, 127);
  std::vector<std::int8_t> v(n);
  for (auto& x : v) x = static_cast<std::int8_t>(d(rng));
  return v;
}

}  // namespace

TEST(Int8Gemm, EqualsTheSpecOnRaggedShapes) {
  for (auto [n, m, k] : {std::array<std::size_t, 3>{1, 1, 1}, {17, 63, 65}, {5, 3, 1000}, {64, 17, 129}}) {
    const auto a = codes(n * k, n + 7 * m), b = codes(m * k, k + 3);
    std::vector<std::int32_t> c(n * m, 12345);
    lockstep::cpu::int8_gemm_nt(a.data(), b.data(), c.data(), n, m, k);
    EXPECT_EQ(c, lockstep::ops::int8_matmul_nt(a, b, n, m, k)) << n << "x" << m << "x" << k;
  }
}

TEST(Int8Gemm, RefusesKBeyondTheExactBoundNamingTheShape) {
  std::int8_t a = 1, b = 1;
  std::int32_t c = 0;
  try {
    lockstep::cpu::int8_gemm_nt(&a, &b, &c, 2, 3, 131072);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "int8 GEMM 2×3×131072: K = 131072 exceeds 131071, the bound for exact int32 accumulation");
  }
}
