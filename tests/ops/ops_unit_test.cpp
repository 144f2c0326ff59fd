// Known answers and edge cases of the op specifications that the generic
// gradient/algebra checks do not pin: the quantizers' rounding rule, zero
// rows, ignored targets, Hugging Face's RoPE arrangement, the attention key
// block being part of the float expression, and argument validation.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "lockstep/ops/all.hpp"

namespace {

using namespace lockstep;
using namespace lockstep::ops;

std::uint32_t bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// DESIGN.md §1: inv = 127/absmax, q = clamp(floor(x·inv + 0.5), -127, 127).
// Halves round UP: -63.5 -> -63 (torch.round would give -64, half to even).
TEST(Quantize, RowsKnownAnswer) {
  const std::vector<float> x = {2.0f, -1.0f, 0.5f, 0.0f, 1.0f / 127.0f, -2.0f};
  const auto r = quantize_rows(x.data(), 1, x.size(), 1e-5f);
  const std::vector<int> want = {127, -63, 32, 0, 1, -127};
  // 2·63.5 = 127; -1·63.5 + 0.5 = -63; 0.5·63.5 + 0.5 = 32.25; (1/127)·63.5 = 0.5 -> 1.
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(int{r.q[i]}, want[i]) << "element " << i;
  EXPECT_EQ(bits(r.step[0]), bits(2.0f / 127.0f));
}

TEST(Quantize, ZeroRowUsesTheFloorAndGivesZeroCodes) {
  const std::vector<float> x(8, 0.0f);
  const auto r = quantize_rows(x.data(), 1, x.size(), 1e-5f);
  for (auto q : r.q) EXPECT_EQ(int{q}, 0);
  EXPECT_EQ(bits(r.step[0]), bits(1e-5f / 127.0f));
  // And the layer's output is exactly zero (no 0·inf NaN).
  const BitLinear::Config c{1, 8, 3};
  BitLinear::Inputs<float> in{Tensor<float>({1, 8}), Tensor<float>({3, 8}, std::vector<float>(24, 0.25f))};
  for (float y : BitLinear::forward(c, in).y.data) EXPECT_EQ(bits(y), 0u);
}

// BitNet b1.58's absmean ternary: m = mean|w| = 0.2125, inv = 1/m.
TEST(Quantize, TernaryKnownAnswer) {
  const std::vector<float> w = {0.3f, -0.05f, 0.1f, -0.4f};
  const auto t = quantize_ternary(w.data(), w.size());
  // 0.3·inv = 1.41 -> 1; -0.05·inv = -0.24 -> 0; 0.1·inv = 0.47 -> 0; -0.4·inv = -1.88 -> -2 -> -1.
  const std::vector<int> want = {1, 0, 0, -1};
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_EQ(int{t.q[i]}, want[i]) << "element " << i;
  // The canonical sum of 4 (num/reduce.hpp): lanes 0..3 hold the values, the
  // pairwise tree adds lane j + 2 to lane j, then lane 1 to lane 0.
  const float sum = (0.3f + 0.1f) + (0.05f + 0.4f);
  EXPECT_EQ(bits(t.scale), bits(sum / 4.0f));
}

TEST(Quantize, RefusesKThatCouldOverflowInt32) {
  const BitLinear::Config c{1, kMaxQuantK + 1, 1};
  BitLinear::Inputs<float> in{Tensor<float>({1, c.in}), Tensor<float>({1, c.in})};
  EXPECT_THROW(BitLinear::forward(c, in), std::invalid_argument);
}

TEST(CrossEntropy, IgnoredRowsHaveZeroLossAndGradient) {
  const CrossEntropy::Config c{2, 5};
  CrossEntropy::Inputs<float> in{
      Tensor<float>({2, 5}, {0.1f, 2.0f, -1.0f, 0.5f, 0.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f}),
      Tensor<Index>({2}, {-1, 3})};
  const auto out = CrossEntropy::forward(c, in);
  EXPECT_EQ(bits(out.loss[0]), 0u);
  // Uniform logits: loss = log(5), to the float ulps of log and exp.
  EXPECT_NEAR(static_cast<double>(out.loss[1]), std::log(5.0), 1e-6);
  CrossEntropy::Outputs<float> d{Tensor<float>({2}, {1.0f, 1.0f}), {}};
  const auto g = CrossEntropy::backward(c, in, out, d);
  for (std::size_t j = 0; j < 5; ++j) EXPECT_EQ(bits(g.logits[j]), 0u);
  EXPECT_NEAR(static_cast<double>(g.logits[5 + 3]), 0.2 - 1.0, 1e-6);
}

// Hugging Face LLaMA: q·cos + rotate_half(q)·sin with emb = cat(freqs, freqs)
// and rotate_half(q) = cat(-q2, q1), in float, element for element.
TEST(Rope, RotateHalfIsHuggingFacesExpression) {
  const Rope::Config c{1, 7, 2, 8, 10000.0, RopeLayout::rotate_half, 3};
  Rope::Inputs<float> in{Tensor<float>({1, 7, 2, 8})};
  for (std::size_t i = 0; i < in.x.numel(); ++i) in.x[i] = std::sin(static_cast<float>(i) * 0.7f);
  const auto y = Rope::forward(c, in).y;
  const auto tab = Rope::table<float>(c);
  const std::size_t half = 4;
  for (std::size_t t = 0; t < 7; ++t)
    for (std::size_t h = 0; h < 2; ++h) {
      const float* q = in.x.ptr() + (t * 2 + h) * 8;
      for (std::size_t d = 0; d < 8; ++d) {
        const float cs = tab.cos[t * half + d % half], sn = tab.sin[t * half + d % half];
        const float rot = d < half ? -q[d + half] : q[d - half];
        const float hf = q[d] * cs + rot * sn;
        EXPECT_EQ(bits(y[(t * 2 + h) * 8 + d]), bits(hf)) << "t " << t << " h " << h << " d " << d;
      }
    }
}

// The key block size is part of the canonical float expression: the same
// attention with blocks of 64 keys and of 8 keys agrees to rounding but not in
// every bit (so a kernel must use the canonical 64).
TEST(Attention, KeyBlockIsPartOfTheFloatExpression) {
  ad::Rng rng(2024);
  Attention::Config c{1, 70, 2, 1, 8, 0.0, 64};
  const auto in = cast_fields<Attention::Inputs, float>(Attention::sample(c, rng));
  const auto a = Attention::forward(c, in).o;
  c.key_block = 8;
  const auto b = Attention::forward(c, in).o;
  std::size_t differ = 0;
  double worst = 0.0;
  for (std::size_t i = 0; i < a.numel(); ++i) {
    differ += bits(a[i]) != bits(b[i]);
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  std::printf("key block 64 vs 8: %zu of %zu outputs differ in their bits, max |diff| %.3g\n",
              differ, a.numel(), worst);
  EXPECT_GT(differ, 0u);
  EXPECT_LT(worst, 1e-5);
  // Rows 0..7 see a single block either way: identical bits.
  for (std::size_t i = 0; i < 8 * 2 * 8; ++i) ASSERT_EQ(bits(a[i]), bits(b[i])) << i;
}

TEST(Validation, BadArgumentsThrow) {
  {
    Embedding::Inputs<float> in{Tensor<Index>({1}, {7}), Tensor<float>({7, 2})};
    EXPECT_THROW(Embedding::forward(Embedding::Config{1, 7, 2}, in), std::out_of_range);
  }
  {
    CrossEntropy::Inputs<float> in{Tensor<float>({1, 3}), Tensor<Index>({1}, {3})};
    EXPECT_THROW(CrossEntropy::forward(CrossEntropy::Config{1, 3}, in), std::out_of_range);
  }
  {
    Rope::Inputs<float> in{Tensor<float>({1, 1, 1, 3})};
    EXPECT_THROW(Rope::forward(Rope::Config{1, 1, 1, 3}, in), std::invalid_argument);
  }
  {
    Attention::Inputs<float> in{Tensor<float>({1, 2, 3, 4}), Tensor<float>({1, 2, 2, 4}),
                                Tensor<float>({1, 2, 2, 4})};
    EXPECT_THROW(Attention::forward(Attention::Config{1, 2, 3, 2, 4}, in), std::invalid_argument);
  }
  {
    LearnedPositions::Inputs<float> in{Tensor<float>({1, 4, 2}), Tensor<float>({4, 2})};
    EXPECT_THROW(LearnedPositions::forward(LearnedPositions::Config{1, 4, 2, 4, 1}, in),
                 std::out_of_range);
  }
}

}  // namespace
