// The column quantizer's absmax fold split into contiguous segments and
// joined (col_fold.hpp), on the host: whatever the segments and whatever the
// grouping of the joins, the step is the CPU kernel's (cpu
// units::quantize_cols_i8, one column), on columns with NaN (many, few, in
// the last row, in the first), ±inf, -0, subnormals and zeros. The device
// kernels (col_quant.cu) run these same functions.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "lockstep/backend/cpu/units_quant.hpp"
#include "lockstep/backend/cuda/col_fold.hpp"
#include "lockstep/num/fp.hpp"

namespace {

namespace cf = lockstep::cuda::colfold;
namespace ln = lockstep::num;

std::vector<float> column(std::mt19937_64& rng, std::size_t len, int nan_per_mille) {
  std::normal_distribution<float> normal;
  std::vector<float> x(len);
  for (float& v : x) {
    const auto u = rng() % 1000;
    if (static_cast<int>(u) < nan_per_mille) v = ln::float_of(rng() % 2 == 0 ? 0x7FC00000u : 0xFFC00001u);
    else if (u < 995) v = normal(rng) * 3.0f;
    else if (u < 996) v = ln::float_of(0x7F800000u);
    else if (u < 997) v = -0.0f;
    else if (u < 998) v = ln::float_of(0x80000005u);
    else v = 0.0f;
  }
  if (rng() % 4 == 0) x.back() = ln::float_of(0x7FC00000u);
  if (rng() % 4 == 0) x.front() = ln::float_of(0x7FC00000u);
  return x;
}

// The step the CPU kernel gives the column.
float cpu_step(const std::vector<float>& x, float floor_x) {
  std::vector<std::int8_t> q(x.size());
  float step = 0;
  lockstep::cpu::units::quantize_cols_i8(x.data(), x.size(), 1, floor_x, q.data(), &step, 1);
  return step;
}

// The segments' summaries joined in a random grouping (adjacent pairs).
cf::Summary joined(std::mt19937_64& rng, std::vector<cf::Summary> s) {
  while (s.size() > 1) {
    const std::size_t i = rng() % (s.size() - 1);
    s[i] = cf::join(s[i], s[i + 1]);
    s.erase(s.begin() + static_cast<std::ptrdiff_t>(i) + 1);
  }
  return s.front();
}

TEST(ColFold, AnySegmentsInAnyGroupingGiveTheCpuStep) {
  std::mt19937_64 rng(5);
  int with_nan = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const std::size_t len = 1 + rng() % 700;
    const int nan_rate = trial % 3 == 0 ? 0 : trial % 3 == 1 ? 5 : 300;
    const std::vector<float> x = column(rng, len, nan_rate);
    std::vector<cf::Summary> segments;
    for (std::size_t n = 0; n < len;) {
      const std::size_t end = std::min(len, n + 1 + rng() % 80);
      cf::Summary s{0.0f, false};
      for (; n < end; ++n) cf::fold(s, x[n]);
      segments.push_back(s);
    }
    const cf::Summary all = joined(rng, segments);
    with_nan += all.nan ? 1 : 0;
    for (const float floor_x : {1e-8f, ln::float_of(0x0D800000u)}) {
      const float m = cf::max2(cf::from_zero(all), floor_x);
      const float step = m / 127.0f;
      ASSERT_EQ(ln::bits_of(step), ln::bits_of(cpu_step(x, floor_x)))
          << "trial " << trial << " len " << len << " segments " << segments.size();
    }
  }
  EXPECT_GT(with_nan, 1000);  // the NaN restarts were exercised
}

// The join is not commutative: the segments' order matters (a check that the
// test above can tell orders apart at all).
TEST(ColFold, TheOrderOfSegmentsMatters) {
  const cf::Summary big{5.0f, false}, after_nan{1.0f, true};
  EXPECT_EQ(cf::from_zero(cf::join(big, after_nan)), 1.0f);  // the NaN restarts the fold: 5 is forgotten
  EXPECT_EQ(cf::from_zero(cf::join(after_nan, big)), 5.0f);
}

}  // namespace
