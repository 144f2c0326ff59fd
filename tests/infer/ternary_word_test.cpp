// The decode GEMV's 2-bit code words (backend/cuda/ternary_word.hpp) on the
// CPU: packing then the dp4a dot equals the plain integer sum, and a row
// packed word by word (as ternary_pack lays it out, K off the 16-code words)
// gives ops::int8_matmul_nt's sums once Σx is taken off.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cuda/ternary_word.hpp"
#include "lockstep/ops/quant.hpp"

namespace {

using namespace lockstep;

TEST(TernaryWord, DotOfAPackedWordIsTheCodeSumPlusTheActivationSum) {
  ad::Rng rng(5);
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = static_cast<int>(rng.below(17));  // 0..16 codes in the word
    float codes[16] = {};
    std::int8_t x[16] = {};
    int want = 0, xsum = 0;
    for (int k = 0; k < 16; ++k) {
      x[k] = static_cast<std::int8_t>(static_cast<int>(rng.below(255)) - 127);
      if (k < n) codes[k] = static_cast<float>(static_cast<int>(rng.below(3)) - 1);
      want += static_cast<int>(codes[k]) * x[k];
      xsum += x[k];
    }
    int xw[4];
    std::memcpy(xw, x, sizeof xw);
    const std::uint32_t w = cuda::ternary_word(codes, n);
    ASSERT_EQ(cuda::ternary_word_dot(w, xw) - xsum, want) << "trial " << trial << ", " << n << " codes";
  }
}

TEST(TernaryWord, RowsPackedInWordsGiveTheIntegerProduct) {
  ad::Rng rng(9);
  for (std::size_t K : {1, 15, 16, 17, 63, 64, 65, 130}) {
    const std::size_t M = 5, words = 4 * ((K + 63) / 64);
    std::vector<std::int8_t> q(M * K), xq(K);
    std::vector<float> qf(M * K);
    for (std::size_t i = 0; i < q.size(); ++i) {
      q[i] = static_cast<std::int8_t>(static_cast<int>(rng.below(3)) - 1);
      qf[i] = q[i];
    }
    for (auto& v : xq) v = static_cast<std::int8_t>(static_cast<int>(rng.below(255)) - 127);
    std::vector<std::int8_t> xpad(words * 16, 0);  // the activation codes padded with zeros, as in shared memory
    std::memcpy(xpad.data(), xq.data(), K);
    int xsum = 0;
    for (auto v : xq) xsum += v;
    const std::vector<std::int32_t> want = ops::int8_matmul_nt(xq, q, 1, M, K);
    for (std::size_t m = 0; m < M; ++m) {
      int acc = 0;
      for (std::size_t g = 0; g < words; ++g) {
        const std::size_t k0 = 16 * g;
        const int n = k0 >= K ? 0 : static_cast<int>(std::min<std::size_t>(16, K - k0));
        const std::uint32_t w = cuda::ternary_word(qf.data() + m * K + (n > 0 ? k0 : 0), n);
        int xw[4];
        std::memcpy(xw, xpad.data() + k0, sizeof xw);
        acc += cuda::ternary_word_dot(w, xw);
      }
      EXPECT_EQ(acc - xsum, want[m]) << "K " << K << " row " << m;
    }
  }
}

}  // namespace
