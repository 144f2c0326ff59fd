// cpu::panel_gemm (weights in column panels, f32 or f16 where f16 holds them
// exactly) is the f32 GEMM's chains bit for bit: against cpu::gemm_xwt (=
// ops::matmul, the reference; tests/cpu/gemm_test.cpp) on ragged shapes (M off
// the 64-column panel, K from 0, 1..9 rows past the 4-row pass), with Inf,
// NaN, signed zeros and f16 subnormals among the weights, at 1, 2 and 5
// threads; weights f16 cannot hold are refused (the caller keeps f32). The
// same for Q8 panels (int8 codes × one f16 scale per 32 weights along k): the
// chains bit for bit on blocks of every kind (codes to ±127, a -128, small
// codes only, subnormal scales, all zero), 1..9 rows (in registers up to 4,
// widened panels past 4); weights that are no codes × scale are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/gemm.hpp"
#include "lockstep/backend/cpu/panel_gemm.hpp"
#include "lockstep/tensor/convert.hpp"

namespace {

using namespace lockstep;

std::size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return a.size() + b.size();
  std::size_t d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return d;
}

// Weights on f16 grids of several scales (k / 1024, and k · 2^-24: f16
// subnormals), or (f32) the same plus an odd f32 fraction f16 cannot hold.
std::vector<float> weights(std::size_t n, ad::Rng& rng, bool f16) {
  std::vector<float> w(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto k = static_cast<float>(static_cast<int>(rng.below(4001)) - 2000);
    w[i] = i % 7 == 3 ? k * 0x1p-24f : k / 1024.0f;
    if (!f16) w[i] += static_cast<float>(rng.uniform(-1e-3, 1e-3));
  }
  return w;
}

TEST(PanelGemm, TheF32ChainsBitForBitOnRaggedShapesAtAnyThreadCount) {
  ad::Rng rng(3);
  std::size_t cases = 0;
  for (bool f16 : {true, false})
    for (std::size_t M : {1, 63, 64, 65, 130, 200})
      for (std::size_t K : {0, 1, 17, 64, 300})
        for (std::size_t N : {1, 2, 3, 4, 5, 9}) {
          std::vector<float> w = weights(M * K, rng, f16), x(N * K);
          for (auto& v : x) v = static_cast<float>(rng.uniform(-2.0, 2.0));
          if (M * K > 8) {  // the specials: Inf, NaN, -0 among the weights; a huge x to overflow a chain
            w[1] = std::numeric_limits<float>::infinity();
            w[5] = std::numeric_limits<float>::quiet_NaN();
            w[7] = -0.0f;
            if (!x.empty()) x[0] = 3e38f;
          }
          std::vector<float> want(N * M);
          cpu::gemm_xwt(N, M, K, x.data(), w.data(), want.data(), 1);
          cpu::HalfPanels h;
          cpu::FloatPanels f;
          if (f16)
            ASSERT_TRUE(cpu::pack_half(w.data(), M, K, h, 2)) << "M " << M << " K " << K;
          else
            f = cpu::pack_panels(w.data(), M, K, 2);
          for (int threads : {1, 2, 5}) {
            std::vector<float> y(N * M, -7.0f);
            if (f16)
              cpu::panel_gemm(h, x.data(), N, y.data(), threads);
            else
              cpu::panel_gemm(f, x.data(), N, y.data(), threads);
            ASSERT_EQ(differing(y, want), 0u)
                << (f16 ? "f16" : "f32") << " N " << N << " M " << M << " K " << K << ", " << threads << " threads";
            ++cases;
          }
        }
  EXPECT_GT(cases, 1000u);
}

TEST(PanelGemm, WeightsF16CannotHoldAreRefused) {
  ad::Rng rng(4);
  for (float bad : {1.0f / 3.0f, 1e-9f, 70000.0f, 1.0f + 0x1p-12f}) {
    std::vector<float> w = weights(70 * 9, rng, true);
    w[69 * 9 + 8] = bad;  // the very last weight
    cpu::HalfPanels h;
    EXPECT_FALSE(cpu::pack_half(w.data(), 70, 9, h, 2)) << bad;
    EXPECT_EQ(h.rows, 0u);
    EXPECT_TRUE(h.w.empty());
  }
}

// w [M, K] on Q8 grids: each block of 32 along k is codes × an f16 scale; the
// block kinds rotate: random codes with one at ±127 (ggml's quantizer), one
// at -128, small codes only (|code| <= 5), a subnormal f16 scale, all zero.
std::vector<float> q8_weights(std::size_t M, std::size_t K, ad::Rng& rng) {
  std::vector<float> w(M * K);
  std::size_t kind = 0;
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t b = 0; b < K / 32; ++b, ++kind) {
      const std::uint16_t h = kind % 5 == 3 ? static_cast<std::uint16_t>(1 + rng.below(1023))  // subnormal
                                            : tensor::f32_to_f16(static_cast<float>(rng.uniform(1e-4, 0.05)));
      const float scale = tensor::f16_to_f32(h);
      const int span = kind % 5 == 2 ? 5 : 127;
      for (std::size_t i = 0; i < 32; ++i) {
        int code = static_cast<int>(rng.below(2 * span + 1)) - span;
        if (i == 11 && span == 127) code = kind % 2 ? 127 : -127;
        if (i == 17 && kind % 5 == 1) code = -128;
        w[m * K + b * 32 + i] = kind % 5 == 4 ? 0.0f : static_cast<float>(code) * scale;
      }
    }
  return w;
}

TEST(PanelGemm, Q8PanelsTheF32ChainsBitForBitOnRaggedShapesAtAnyThreadCount) {
  ad::Rng rng(5);
  std::size_t cases = 0;
  for (std::size_t M : {1, 63, 64, 65, 130, 200})
    for (std::size_t K : {0, 32, 96, 320})
      for (std::size_t N : {1, 2, 3, 4, 5, 9}) {
        const std::vector<float> w = q8_weights(M, K, rng);
        std::vector<float> x(N * K);
        for (auto& v : x) v = static_cast<float>(rng.uniform(-2.0, 2.0));
        if (x.size() > 40) {  // a huge x to overflow a chain, a NaN in another row's input
          x[0] = 3e38f;
          x[x.size() - 33] = std::numeric_limits<float>::quiet_NaN();
        }
        std::vector<float> want(N * M);
        cpu::gemm_xwt(N, M, K, x.data(), w.data(), want.data(), 1);
        cpu::Q8Panels q;
        ASSERT_TRUE(cpu::pack_q8(w.data(), M, K, q, 2)) << "M " << M << " K " << K;
        ASSERT_EQ(q.bytes(), (M + 63) / 64 * 64 * K * 17 / 16);
        for (int threads : {1, 2, 5}) {
          std::vector<float> y(N * M, -7.0f);
          cpu::panel_gemm(q, x.data(), N, y.data(), threads);
          ASSERT_EQ(differing(y, want), 0u) << "q8 N " << N << " M " << M << " K " << K << ", " << threads << " threads";
          ++cases;
        }
      }
  EXPECT_GT(cases, 400u);
}

TEST(PanelGemm, Q8PanelsHoldTheWeightsThemselves) {
  ad::Rng rng(6);
  const std::vector<float> w = q8_weights(70, 96, rng);
  cpu::Q8Panels q;
  ASSERT_TRUE(cpu::pack_q8(w.data(), 70, 96, q, 2));
  for (std::size_t m = 0; m < 70; ++m)
    for (std::size_t k = 0; k < 96; ++k) {
      const float v = q.at(m, k);
      ASSERT_EQ(std::memcmp(&v, &w[m * 96 + k], sizeof(float)), 0) << m << ", " << k;
    }
}

TEST(PanelGemm, WeightsThatAreNoQ8CodesTimesAScaleAreRefused) {
  ad::Rng rng(7);
  const std::vector<float> good = q8_weights(70, 64, rng);
  auto refused = [](const std::vector<float>& w, std::size_t M, std::size_t K) {
    cpu::Q8Panels q;
    const bool ok = cpu::pack_q8(w.data(), M, K, q, 2);
    return !ok && q.rows == 0 && q.codes.empty() && q.scales.empty();
  };
  EXPECT_FALSE(refused(good, 70, 64));
  EXPECT_FALSE(refused(good, 140, 32)) << "the same weights as [140, 32]: the same blocks";
  EXPECT_TRUE(refused(std::vector<float>(good.begin(), good.begin() + 70 * 48), 70, 48)) << "K not whole blocks";
  // The last weight of the last row's blocks: the first of codes × a subnormal
  // scale, the second all zero (q8_weights' block kinds 3 and 4).
  for (std::size_t at : {69 * 64 + 31, 69 * 64 + 63})
    for (float bad : {-0.0f, 1.0f / 3.0f, std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN(), 1e30f}) {
      std::vector<float> w = good;
      w[at] = bad;
      EXPECT_TRUE(refused(w, 70, 64)) << bad << " at " << at;
    }
  {  // a code of 129 steps: past int8 (the block's scale is its largest weight / 127 or / 128)
    std::vector<float> w(32, 0.0f);
    w[0] = 129.0f;
    w[1] = 1.0f;
    EXPECT_TRUE(refused(w, 1, 32));
  }
  {  // a -0 in an otherwise zero block
    std::vector<float> w(32, 0.0f);
    w[31] = -0.0f;
    EXPECT_TRUE(refused(w, 1, 32));
  }
}

}  // namespace
