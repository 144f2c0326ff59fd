// Counter-based RNG (src/lockstep/num/rng.hpp): Philox4x32-10 known answers,
// the derived samplers, and independence from how the work is split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "lockstep/num/hash.hpp"
#include "lockstep/num/rng.hpp"

namespace {

namespace num = lockstep::num;
namespace rng = lockstep::num::rng;
using num::bits_of;
using num::float_of;

#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t kSanitizerScale(std::size_t n) { return n / 10; }
#else
constexpr std::size_t kSanitizerScale(std::size_t n) { return n; }
#endif

TEST(Philox, Random123KnownAnswers) {
  // Random123 tests/kat_vectors (github.com/DEShawResearch/random123), the
  // three "philox4x32 10" lines: counter (4 words), key (2 words), output.
  struct Kat {
    rng::Block ctr;
    std::uint32_t k0, k1;
    rng::Block want;
  };
  const Kat kats[] = {
      {{{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}}, 0x00000000u, 0x00000000u,
       {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  int bad = 0;
  for (const Kat& k : kats) {
    const rng::Block got = rng::philox4x32_10(k.ctr, k.k0, k.k1);
    for (int w = 0; w < 4; ++w) {
      if (got.w[w] != k.want.w[w]) {
        ++bad;
        ADD_FAILURE() << "philox word " << w << ": got " << std::hex << got.w[w] << " want "
                      << k.want.w[w];
      }
    }
  }
  std::printf("Philox4x32-10 Random123 known answers: 3 vectors x 4 words, %d wrong\n", bad);
}

TEST(Philox, CounterAndKeyLayout) {
  // block(seed, stream, c): counter {lo c, hi c, lo stream, hi stream}, key {lo seed, hi seed}.
  const std::uint64_t seed = 0x299f31d0a4093822ull, stream = 0x0370734413198a2eull,
                      c = 0x85a308d3243f6a88ull;
  const rng::Block b = rng::block(seed, stream, c);
  EXPECT_EQ(b.w[0], 0xd16cfe09u);
  EXPECT_EQ(b.w[3], 0x24126ea1u);
  // bits32 walks the words of consecutive blocks.
  const std::uint64_t c2 = 0x123456789ull;
  for (std::uint64_t i = 0; i < 12; ++i)
    EXPECT_EQ(rng::bits32(seed, stream, 4 * c2 + i), rng::block(seed, stream, c2 + i / 4).w[i % 4]);
}

TEST(Philox, DerivedSamplersMatchPython) {
  // tests/reduce/golden.py (an independent Python Philox and sampler, written
  // from docs/NUMERICS.md): {seed, stream, index, bits32, uniform bits, uniform(-3, 0.5) bits}.
  struct Row {
    std::uint64_t seed, stream, index;
    std::uint32_t bits, u01, uab;
  };
  const Row rows[] = {
      {0x0ull, 0x0ull, 0x0ull, 0x6627e8d5u, 0x3ecc4fd0u, 0xbfcd3a2au},
      {0x1ull, 0x0ull, 0x5ull, 0xdfc5ccbeu, 0x3f5fc5ccu, 0x3d7344a0u},
      {0x123456789abcdefull, 0x7ull, 0xf4243ull, 0x36680786u, 0x3e59a01cu, 0xc01064fau},
      {0x2aull, 0xffffffffffffffffull, 0xffffffffffffffffull, 0x5f6939a9u, 0x3ebed272u, 0xbfd907dcu},
      {0x7e8ull, 0x3ull, 0x75bcd15ull, 0x1048f585u, 0x3d8247a8u, 0xc031c02au},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(rng::bits32(r.seed, r.stream, r.index), r.bits);
    EXPECT_EQ(bits_of(rng::uniform(r.seed, r.stream, r.index)), r.u01);
    EXPECT_EQ(bits_of(rng::uniform(r.seed, r.stream, r.index, -3.0f, 0.5f)), r.uab);
  }
}

TEST(Philox, UniformRangeAndExactness) {
  // [0,1): every value is k * 2^-24 exactly, never 1; the mean is near 1/2.
  const std::size_t n = 1'000'000;
  double mean = 0;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float u = rng::uniform(7, 1, i);
    const double k = static_cast<double>(u) * 16777216.0;
    bad += !(u >= 0.0f && u < 1.0f) || k != static_cast<double>(static_cast<std::uint32_t>(k));
    mean += static_cast<double>(u);
  }
  mean /= static_cast<double>(n);
  std::printf("uniform [0,1): %zu draws, %zu out of range or inexact, mean %.5f\n", n, bad, mean);
  EXPECT_EQ(bad, 0u);
  EXPECT_NEAR(mean, 0.5, 0.002);  // 3.5 standard deviations (sd = 0.2887 / 1000)
}

TEST(Philox, UniformABNeverReachesB) {
  // Intervals whose fma would round up to b for the top draws.
  EXPECT_EQ(bits_of(rng::next_below(1.0f)), 0x3F7FFFFFu);
  EXPECT_EQ(bits_of(rng::next_below(-1.0f)), 0xBF800001u);
  EXPECT_EQ(bits_of(rng::next_below(0.0f)), 0x80000001u);
  EXPECT_EQ(bits_of(rng::next_below(float_of(0x80000000u))), 0x80000001u);
  std::size_t n = 0, bad = 0;
  for (float a : {1.0f, -1.0f, 0.0f, 1e-30f, -3.0f, 100.0f})
    for (float b : {2.0f, 1.5f, 1e10f, 101.0f}) {
      if (!(a < b)) continue;
      for (std::size_t i = 0; i < 200000; ++i) {
        const float r = rng::uniform(3, 9, i, a, b);
        ++n;
        bad += !(r >= a && r < b);
      }
    }
  std::printf("uniform [a,b): %zu draws, %zu out of [a,b)\n", n, bad);
  EXPECT_EQ(bad, 0u);
  // The top draw u = 1 - 2^-24 on [1, 2): the fma rounds to 2 (a tie to
  // even), and to_range must return the float below 2 instead.
  const float top = 1.0f - 0x1p-24f;
  EXPECT_EQ(bits_of(num::fma_rn(1.0f, top, 1.0f)), bits_of(2.0f));
  EXPECT_EQ(bits_of(rng::to_range(top, 1.0f, 2.0f)), 0x3FFFFFFFu);
  EXPECT_EQ(bits_of(rng::to_range(top, -3.0f, 100.0f)), bits_of(rng::next_below(100.0f)));
  EXPECT_EQ(bits_of(rng::to_range(0.0f, -3.0f, 100.0f)), bits_of(-3.0f));
}

TEST(Philox, ResultDoesNotDependOnTheSplit) {
  // 10^6 values with 1, 2 and 7 threads, and in ragged pieces by hand.
  const std::size_t n = 1'000'000;
  std::vector<std::uint64_t> hashes;
  for (int threads : {1, 2, 7}) {
    std::vector<float> v(n);
    rng::fill_uniform(v.data(), n, 0xC0FFEEull, 5, 1000, -1.0f, 1.0f, threads);
    hashes.push_back(num::hash_bits(v.data(), n));
  }
  std::vector<float> pieces(n);
  for (std::size_t lo = 0, len = 1; lo < n; lo += len, len = len * 3 + 1)
    rng::fill_uniform(pieces.data() + lo, std::min(len, n - lo), 0xC0FFEEull, 5, 1000 + lo, -1.0f,
                      1.0f, 1);
  hashes.push_back(num::hash_bits(pieces.data(), n));
  std::printf("10^6 uniforms: hash %s (1 thread), %s (2), %s (7), %s (ragged pieces)\n",
              num::hash_hex(hashes[0]).c_str(), num::hash_hex(hashes[1]).c_str(),
              num::hash_hex(hashes[2]).c_str(), num::hash_hex(hashes[3]).c_str());
  for (std::uint64_t h : hashes) EXPECT_EQ(h, hashes[0]);
  // And the streams are distinct: another seed or stream gives another hash.
  std::vector<float> other(n);
  rng::fill_uniform(other.data(), n, 0xC0FFEEull, 6, 1000, -1.0f, 1.0f, 2);
  EXPECT_NE(num::hash_bits(other.data(), n), hashes[0]);
  rng::fill_uniform(other.data(), n, 0xC0FFEFull, 5, 1000, -1.0f, 1.0f, 2);
  EXPECT_NE(num::hash_bits(other.data(), n), hashes[0]);
}

// ---------------------------------------------------------------------------
// normal: Box–Muller over lockstep's log/sincos (num/elementary.hpp).
// ---------------------------------------------------------------------------
TEST(Normal, MatchesBoxMullerInDouble) {
  // The same words through libm in double: the float result is within a few
  // float ulps of the exact Box–Muller value (t = 2pi u2 rounded to float
  // moves cos/sin by <= 2.4e-7, times r <= 5.77). A wrong word, a swapped
  // sin/cos or a wrong pairing is off by O(1).
  const std::size_t n = 400'000;
  double worst = 0;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t p = i / 2;
    const double u1 = 1.0 - static_cast<double>(rng::bits32(11, 4, 2 * p) >> 8) * 0x1p-24;
    const double u2 = static_cast<double>(rng::bits32(11, 4, 2 * p + 1) >> 8) * 0x1p-24;
    const double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * 3.14159265358979323846 * u2;
    const double want = r * (i % 2 == 0 ? std::cos(t) : std::sin(t));
    const double err = std::fabs(static_cast<double>(rng::normal(11, 4, i)) - want);
    worst = std::max(worst, err);
    bad += err > 4e-6;
  }
  std::printf("normal vs double Box-Muller: %zu draws, max |error| %.3g, %zu over 4e-6\n", n,
              worst, bad);
  EXPECT_EQ(bad, 0u);
}

TEST(Normal, Moments) {
  const std::size_t n = 1'000'000;
  std::vector<float> z(n);
  rng::fill_normal(z.data(), n, 2024, 1, 0, 0.0f, 1.0f, 0);
  double mean = 0, var = 0, top = 0;
  std::size_t over1 = 0, over2 = 0, over3 = 0;
  for (float v : z) mean += static_cast<double>(v);
  mean /= static_cast<double>(n);
  for (float v : z) {
    const double d = static_cast<double>(v);
    var += (d - mean) * (d - mean);
    top = std::max(top, std::fabs(d));
    over1 += std::fabs(d) > 1, over2 += std::fabs(d) > 2, over3 += std::fabs(d) > 3;
  }
  var /= static_cast<double>(n - 1);
  const double f1 = static_cast<double>(over1) / static_cast<double>(n);
  const double f2 = static_cast<double>(over2) / static_cast<double>(n);
  const double f3 = static_cast<double>(over3) / static_cast<double>(n);
  std::printf("10^6 normals: mean %.5f, variance %.5f, max |z| %.3f, P(|z|>1) %.4f, >2 %.5f, "
              ">3 %.5f\n",
              mean, var, top, f1, f2, f3);
  // Bounds are 5 standard errors of each estimate (n = 10^6).
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(var, 1.0, 0.0071);
  EXPECT_NEAR(f1, 0.317311, 0.0024);
  EXPECT_NEAR(f2, 0.045500, 0.0011);
  EXPECT_NEAR(f3, 0.002700, 0.00026);
  EXPECT_LE(top, 5.7686);  // sqrt(-2 ln 2^-24)
}

TEST(Normal, FillMatchesElementwiseForAnySplit) {
  const std::size_t n = kSanitizerScale(200'000);
  std::vector<float> want(n);
  for (std::size_t k = 0; k < n; ++k)
    want[k] = num::fma_rn(0.02f, rng::normal(99, 3, 7 + k), 0.5f);
  const std::uint64_t h = num::hash_bits(want.data(), n);
  std::size_t runs = 0, bad = 0;
  for (int threads : {1, 2, 7}) {
    std::vector<float> got(n);
    rng::fill_normal(got.data(), n, 99, 3, 7, 0.5f, 0.02f, threads);
    ++runs;
    bad += num::hash_bits(got.data(), n) != h;
  }
  std::vector<float> pieces(n);  // odd-length pieces start on odd indices
  for (std::size_t lo = 0, len = 1; lo < n; lo += len, len = len * 2 + 1)
    rng::fill_normal(pieces.data() + lo, std::min(len, n - lo), 99, 3, 7 + lo, 0.5f, 0.02f, 1);
  ++runs;
  bad += num::hash_bits(pieces.data(), n) != h;
  std::printf("fill_normal vs elementwise normal: %zu splits (threads 1/2/7, ragged), %zu differ; "
              "hash %s\n",
              runs, bad, num::hash_hex(h).c_str());
  EXPECT_EQ(bad, 0u);
}

}  // namespace
