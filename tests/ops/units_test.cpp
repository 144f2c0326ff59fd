// The int8 unit linear's own claims (ops/units.hpp) beyond the gradient check:
// the unit backward stays within its quantization bound of the float STE
// backward, and that bound check catches dy quantized along the wrong axis —
// the one axis choice the checker's int8-grid cotangents cannot see (on the
// grid, quantizing dy by rows or by columns is the identity); the int32 bound
// is refused naming the shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "lockstep/ad/rng.hpp"
#include "lockstep/ops/units.hpp"

using namespace lockstep;
using ops::Int8Linear;

namespace {

struct Excesses {
  Int8Linear::Excess canonical, dx_dy_by_columns, dw_dy_by_rows;
};

Excesses measure(const ops::Int8LinearConfig& c, std::uint64_t seed) {
  ad::Rng rng(seed);
  const auto in = ops::cast_fields<Int8Linear::Inputs, float>(Int8Linear::sample(c, rng));
  // Rows of different scales for dx's dy axis, columns of different scales for dW's.
  const Tensor<float> rows = Int8Linear::spread_cotangent(c, rng, false);
  const Tensor<float> cols = Int8Linear::spread_cotangent(c, rng, true);
  auto excess = [&](const Tensor<float>& dy, const ops::UnitBackwardAxes& axes) {
    return Int8Linear::unit_backward_excess(c, in, dy, Int8Linear::unit_backward(c, in, dy, axes));
  };
  const Int8Linear::Excess a = excess(rows, {}), b = excess(cols, {});
  return {{std::max(a.dx, b.dx), std::max(a.dw, b.dw)}, excess(rows, {.dx_dy_by_rows = false}),
          excess(cols, {.dw_dy_by_rows = true})};
}

}  // namespace

TEST(Int8Units, UnitBackwardWithinItsBoundAndTheBoundSeesTheAxisOfDy) {
  const std::uint64_t seed = ad::seed_from_env();
  std::printf("seed %llu (LOCKSTEP_SEED reproduces)\n", static_cast<unsigned long long>(seed));
  for (const ops::Int8LinearConfig c : {ops::Int8LinearConfig{6, 16, 5, true, true}, {9, 33, 12, false, true},
                                        {24, 64, 40, true, true}}) {
    for (std::uint64_t t = 0; t < 4; ++t) {
      const Excesses e = measure(c, seed + t);
      std::printf("rows %zu in %zu out %zu: |unit - float| / bound: canonical dx %.3f dW %.3f; dy by columns in dx: "
                  "%.3g; dy by rows in dW: %.3g\n",
                  c.rows, c.in, c.out, e.canonical.dx, e.canonical.dw, e.dx_dy_by_columns.dx, e.dw_dy_by_rows.dw);
      EXPECT_LE(e.canonical.dx, 1.0);
      EXPECT_LE(e.canonical.dw, 1.0);
      EXPECT_GT(e.dx_dy_by_columns.dx, 1.0) << "dx with dy quantized by columns passed the bound check";
      EXPECT_GT(e.dw_dy_by_rows.dw, 1.0) << "dW with dy quantized by rows passed the bound check";
    }
  }
}

TEST(Int8Units, TheInt32BoundIsRefusedNamingTheShape) {
  auto message = [](const ops::Int8LinearConfig& c) {
    try {
      Int8Linear::validate(c);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(message({2, 131071, 3, false, true}), "(accepted)");
  EXPECT_NE(message({2, 131072, 3, false, false}).find("int8_linear rows 2 in 131072 out 3: in = 131072 exceeds 131071"),
            std::string::npos);
  EXPECT_EQ(message({131072, 8, 3, false, false}), "(accepted)");  // the float backward sums rows in float
  EXPECT_NE(message({131072, 8, 3, false, true}).find("rows = 131072 exceeds 131071"), std::string::npos);
  EXPECT_NE(message({2, 8, 131072, false, true}).find("out = 131072 exceeds 131071"), std::string::npos);
}
