// The fast CPU GEMM computes the canonical matrix product bit for bit: equal
// to the reference ops::matmul (the per-cell sequential fma chain) on ragged
// shapes in all three linear-layer layouts, with special values, for any
// thread count; and a product in another order is told apart.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "lockstep/backend/cpu/gemm.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/ieee.hpp"
#include "lockstep/ops/op.hpp"

namespace {

std::vector<float> random(std::size_t n, std::uint64_t seed, bool specials = false) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  if (specials && n > 8) {
    v[1] = -0.0f;
    v[3] = 1e-40f;  // subnormal
    v[5] = std::numeric_limits<float>::infinity();
    v[7] = std::numeric_limits<float>::quiet_NaN();
  }
  return v;
}

long diff_cells(const std::vector<float>& a, const std::vector<float>& b) {
  long d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += lockstep::num::bits_of(a[i]) != lockstep::num::bits_of(b[i]);
  return d;
}

// The same, up to NaN sign and payload, which are not part of the numeric
// contract (docs/NUMERICS.md: every NaN is one value): x86's vaddps returns
// its first source's NaN, and which source the compiler puts first in the
// reference's plain y + b is its choice, not ours. -0, the infinities and
// every finite bit pattern are still compared exactly.
long diff_values(const std::vector<float>& a, const std::vector<float>& b) {
  long d = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    d += !lockstep::num::ieee::same_value(lockstep::num::bits_of(a[i]), lockstep::num::bits_of(b[i]));
  return d;
}

struct Shape {
  std::size_t n, m, k;
};
// Off every tile multiple (4 and 6 rows, 64 columns, 128- and 256-deep k
// blocks, 96-row blocks), and on them; 203 x 131 x 385 spans several row
// blocks per thread, column panels with an edge and k blocks with a tail.
const Shape kShapes[] = {{1, 1, 1},     {3, 5, 7},      {4, 64, 256}, {5, 65, 257}, {17, 130, 513},
                         {64, 3, 1000}, {2, 300, 33},   {33, 1, 600}, {0, 4, 4},    {3, 4, 0},
                         {6, 64, 128},  {203, 131, 385}, {192, 128, 129}};

}  // namespace

TEST(CpuGemm, EqualsTheReferenceBitForBitInEveryLayout) {
  long cells = 0, mismatches = 0;
  std::uint64_t seed = 1;
  for (const auto& s : kShapes) {
    for (bool specials : {false, true}) {
      const auto X = random(s.n * s.k, seed++, specials), W = random(s.m * s.k, seed++, specials),
                 dY = random(s.n * s.m, seed++, specials);
      std::vector<float> y_ref(s.n * s.m), y(s.n * s.m, 123.0f);
      lockstep::ops::matmul_xwt(s.n, s.m, s.k, X.data(), W.data(), y_ref.data());
      lockstep::cpu::gemm_xwt(s.n, s.m, s.k, X.data(), W.data(), y.data(), 2);
      std::vector<float> dx_ref(s.n * s.k), dx(s.n * s.k, 123.0f);
      lockstep::ops::matmul_dyw(s.n, s.m, s.k, dY.data(), W.data(), dx_ref.data());
      lockstep::cpu::gemm_dyw(s.n, s.m, s.k, dY.data(), W.data(), dx.data(), 2);
      std::vector<float> dw_ref(s.m * s.k), dw(s.m * s.k, 123.0f);
      lockstep::ops::matmul_dytx(s.n, s.m, s.k, dY.data(), X.data(), dw_ref.data());
      lockstep::cpu::gemm_dytx(s.n, s.m, s.k, dY.data(), X.data(), dw.data(), 2);
      const long d = diff_cells(y, y_ref) + diff_cells(dx, dx_ref) + diff_cells(dw, dw_ref);
      EXPECT_EQ(d, 0) << "shape n=" << s.n << " m=" << s.m << " k=" << s.k << " specials=" << specials;
      mismatches += d;
      cells += static_cast<long>(y.size() + dx.size() + dw.size());
    }
  }
  std::printf("cpu gemm vs reference: %ld cells, %ld mismatches\n", cells, mismatches);
}

// The Linear's bias added in the product's epilogue = the product's value,
// then y + b[m] (the separate pass it replaces), on every shape, with
// special biases: -0, an infinity, a NaN with a payload (a NaN either way;
// which payload survives the add is the compiler's operand order, outside
// the contract, so NaN cells compare as values).
TEST(CpuGemm, BiasInTheEpilogueEqualsTheProductThenTheAdd) {
  std::uint64_t seed = 500;
  long mismatches = 0;
  for (const auto& s : kShapes) {
    for (bool specials : {false, true}) {
      const auto X = random(s.n * s.k, seed++, specials), W = random(s.m * s.k, seed++, specials);
      auto b = random(s.m, seed++);
      if (specials && s.m > 3) {
        b[0] = -0.0f;
        b[1] = std::numeric_limits<float>::infinity();
        b[2] = lockstep::num::float_of(0x7FC0BEEFu);
      }
      std::vector<float> y_ref(s.n * s.m), y(s.n * s.m, 123.0f);
      lockstep::ops::matmul_xwt(s.n, s.m, s.k, X.data(), W.data(), y_ref.data());
      for (std::size_t i = 0; i < s.n; ++i)
        for (std::size_t j = 0; j < s.m; ++j) y_ref[i * s.m + j] = y_ref[i * s.m + j] + b[j];
      lockstep::cpu::gemm_xwt(s.n, s.m, s.k, X.data(), W.data(), y.data(), 2, b.data());
      const long d = diff_values(y, y_ref);
      EXPECT_EQ(d, 0) << "shape n=" << s.n << " m=" << s.m << " k=" << s.k << " specials=" << specials;
      mismatches += d;
    }
  }
  std::printf("cpu gemm + bias vs reference then add: %ld mismatches\n", mismatches);
}

TEST(CpuGemm, SameBitsForAnyThreadCount) {
  const std::size_t n = 37, m = 200, k = 700;
  const auto X = random(n * k, 11), W = random(m * k, 12);
  std::vector<float> y1(n * m), y(n * m);
  lockstep::cpu::gemm_xwt(n, m, k, X.data(), W.data(), y1.data(), 1);
  for (int t : {2, 7}) {
    lockstep::cpu::gemm_xwt(n, m, k, X.data(), W.data(), y.data(), t);
    EXPECT_EQ(diff_cells(y, y1), 0) << t << " threads";
  }
}

TEST(CpuGemm, ADifferentOrderIsToldApart) {
  // Teeth: the same product summed k-descending differs on most cells, so
  // the equality above is not vacuous.
  const std::size_t n = 8, m = 8, k = 500;
  const auto X = random(n * k, 21), W = random(m * k, 22);
  std::vector<float> y(n * m), rev(n * m);
  lockstep::cpu::gemm_xwt(n, m, k, X.data(), W.data(), y.data(), 1);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < m; ++j) {
      float acc = 0.0f;
      for (std::size_t p = k; p-- > 0;) acc = lockstep::num::fma_rn(X[i * k + p], W[j * k + p], acc);
      rev[i * m + j] = acc;
    }
  const long d = diff_cells(y, rev);
  std::printf("k-descending order differs on %ld of %zu cells\n", d, y.size());
  EXPECT_GT(d, static_cast<long>(y.size() / 2));
}

// The decode mode's product on a weight packed once (cpu::pack_b +
// cpu::gemm_packed, split over column tiles) = the reference, for 1, 2 and 5
// threads and repeated use of one packing.
TEST(CpuGemm, PackedWeightsGiveTheReferenceBitsOnAnyThreadCount) {
  std::uint64_t seed = 100;
  for (const auto& s : kShapes) {
    if (s.n == 0 || s.m == 0) continue;
    const auto W = random(s.m * s.k, seed++, true);
    std::vector<float> Wp(s.k * lockstep::cpu::packed_ld(s.m), 7.0f);
    lockstep::cpu::pack_b(s.m, s.k, W.data(), 1, s.k, Wp.data(), 2);
    for (int threads : {1, 2, 5}) {
      const auto X = random(s.n * s.k, seed++, true);
      std::vector<float> y_ref(s.n * s.m), y(s.n * s.m, 123.0f);
      lockstep::ops::matmul_xwt(s.n, s.m, s.k, X.data(), W.data(), y_ref.data());
      lockstep::cpu::gemm_packed(s.n, s.m, s.k, X.data(), s.k, 1, Wp.data(), lockstep::cpu::packed_ld(s.m), y.data(),
                                 s.m, threads);
      EXPECT_EQ(diff_cells(y, y_ref), 0) << "shape n=" << s.n << " m=" << s.m << " k=" << s.k << " threads "
                                         << threads;
    }
  }
}
