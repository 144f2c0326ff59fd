// cpu::panel_gemm (weights in column panels, f32 or f16 where f16 holds them
// exactly) is the f32 GEMM's chains bit for bit: against cpu::gemm_xwt (=
// ops::matmul, the reference; tests/cpu/gemm_test.cpp) on ragged shapes (M off
// the 64-column panel, K from 0, 1..9 rows past the 4-row pass), with Inf,
// NaN, signed zeros and f16 subnormals among the weights, at 1, 2 and 5
// threads; weights f16 cannot hold are refused (the caller keeps f32).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/gemm.hpp"
#include "lockstep/backend/cpu/panel_gemm.hpp"

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

}  // namespace
