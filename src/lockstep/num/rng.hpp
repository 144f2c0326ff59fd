// Counter-based random numbers: Philox4x32-10 (Salmon, Moraes, Dror, Shaw,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11; the Random123
// library). Every value is a pure function of (seed, stream, index): no
// state, so initialization, dropout and shuffling give the same bits on every
// device, for every thread count and every way of splitting the work.
//
//   block(seed, stream, c) = philox4x32_10(counter = {lo32(c), hi32(c),
//                                                      lo32(stream), hi32(stream)},
//                                           key     = {lo32(seed), hi32(seed)})
//   bits32(seed, stream, i) = word (i mod 4) of block(seed, stream, i / 4)
//   uniform(seed, stream, i) = (bits32(...) >> 8) * 2^-24     in [0, 1), exact
//   normal(seed, stream, i)  = Box–Muller on words 2(i/2), 2(i/2)+1 (below)
//
// Header-only and LOCKSTEP_HD: CUDA kernels include it and get the same bits.
// Known answers (Random123's kat_vectors) are in tests/reduce/rng_test.cpp
// and docs/NUMERICS.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/num/elementary.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::num::rng {

struct Block {
  std::uint32_t w[4];
};

// The Philox4x32 bijection with 10 rounds, exactly as Random123's
// philox4x32_R(10, ctr, key): round r uses the key bumped r times by the
// Weyl constants.
LOCKSTEP_HD inline Block philox4x32_10(Block c, std::uint32_t k0, std::uint32_t k1) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // multipliers
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // key schedule
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * c.w[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * c.w[2];
    const auto hi = [](std::uint64_t p) { return static_cast<std::uint32_t>(p >> 32); };
    const auto lo = [](std::uint64_t p) { return static_cast<std::uint32_t>(p); };
    c = Block{{hi(p1) ^ c.w[1] ^ k0, lo(p1), hi(p0) ^ c.w[3] ^ k1, lo(p0)}};
  }
  return c;
}

// Block `counter` of stream `stream` under `seed` (layout above).
LOCKSTEP_HD inline Block block(std::uint64_t seed, std::uint64_t stream, std::uint64_t counter) {
  const auto lo = [](std::uint64_t v) { return static_cast<std::uint32_t>(v); };
  const auto hi = [](std::uint64_t v) { return static_cast<std::uint32_t>(v >> 32); };
  return philox4x32_10(Block{{lo(counter), hi(counter), lo(stream), hi(stream)}}, lo(seed),
                       hi(seed));
}

// The i-th 32-bit word of the stream: word i % 4 of block i / 4.
LOCKSTEP_HD inline std::uint32_t bits32(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  return block(seed, stream, i / 4).w[i % 4];
}

// Uniform in [0, 1): the top 24 bits of word i, times 2^-24. Every value is
// k * 2^-24 for an integer k < 2^24, each with probability 2^-24; the
// conversion and the scaling are exact.
LOCKSTEP_HD inline float uniform_from_bits(std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * 0x1p-24f;
}
LOCKSTEP_HD inline float uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  return uniform_from_bits(bits32(seed, stream, i));
}

// The largest float below b (b finite).
LOCKSTEP_HD inline float next_below(float b) {
  const std::uint32_t u = bits_of(b);
  if ((u & 0x7FFFFFFFu) == 0) return float_of(0x80000001u);  // below ±0: -denorm_min
  return float_of(static_cast<std::int32_t>(u) > 0 ? u - 1 : u + 1);
}

// u in [0, 1) mapped to [a, b) (finite a < b, b - a finite): fma(b - a, u, a),
// one rounding; a result rounded up to b becomes the largest float below b.
LOCKSTEP_HD inline float to_range(float u, float a, float b) {
  const float r = fma_rn(b - a, u, a);
  return r < b ? r : next_below(b);
}

// Uniform in [a, b): to_range(uniform(seed, stream, i), a, b).
LOCKSTEP_HD inline float uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t i, float a,
                                 float b) {
  return to_range(uniform(seed, stream, i), a, b);
}

// Standard normal by Box–Muller. Element i belongs to pair p = i / 2, which
// uses stream words 2p and 2p+1 (both in block p / 2):
//   u1 = 1 - uniform_from_bits(word 2p)     in (0, 1], exact
//   u2 = uniform_from_bits(word 2p + 1)     in [0, 1)
//   r  = sqrt(-2 * log(u1))                 lockstep's log; sqrt correctly rounded
//   t  = 2pi * u2                           2pi rounded to float, one rounding
//   normal(2p) = r * cos(t),  normal(2p + 1) = r * sin(t)
// log/sin/cos are lockstep's own (num/elementary.hpp), so the bits are the
// same on every device. |normal| <= sqrt(2 * 24 * ln 2) ~ 5.77. (u1 = 1, one
// pair in 2^24, gives r = sqrt(-0) = -0 and so a signed zero.)
struct NormalPair {
  float even, odd;  // normal(2p), normal(2p + 1)
};
LOCKSTEP_HD inline NormalPair normal_pair(std::uint32_t w0, std::uint32_t w1) {
  constexpr float kTwoPi = 6.28318530717958647692f;
  const float u1 = 1.0f - uniform_from_bits(w0);
  const float u2 = uniform_from_bits(w1);
  const float r = HwArith::sqrt(-2.0f * num::log(u1));
  const SinCos sc = num::sincos(kTwoPi * u2);
  return {r * sc.cos, r * sc.sin};
}
LOCKSTEP_HD inline float normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  const std::uint64_t p = i / 2;
  const Block blk = block(seed, stream, p / 2);
  const std::uint32_t w = static_cast<std::uint32_t>(2 * (p % 2));
  const NormalPair z = normal_pair(blk.w[w], blk.w[w + 1]);
  return i % 2 == 0 ? z.even : z.odd;
}

// Host: out[k] = uniform(seed, stream, first + k, a, b) for k < n, across
// `threads` threads (0: all). The bits never depend on `threads`.
inline void fill_uniform(float* out, std::size_t n, std::uint64_t seed, std::uint64_t stream,
                         std::uint64_t first, float a, float b, int threads) {
  util::parallel_for(n, threads, std::size_t{1} << 14, [&](std::size_t lo, std::size_t hi) {
    // Same values as uniform(seed, stream, first + k, a, b), one Philox
    // block per four outputs instead of one per output.
    for (std::size_t k = lo; k < hi;) {
      const std::uint64_t i = first + k;
      const Block blk = block(seed, stream, i / 4);
      for (std::uint64_t w = i % 4; w < 4 && k < hi; ++w, ++k)
        out[k] = to_range(uniform_from_bits(blk.w[w]), a, b);
    }
  });
}

// Host: out[k] = fma(stddev, normal(seed, stream, first + k), mean), across
// `threads` threads (0: all). The bits never depend on `threads`.
inline void fill_normal(float* out, std::size_t n, std::uint64_t seed, std::uint64_t stream,
                        std::uint64_t first, float mean, float stddev, int threads) {
  util::parallel_for(n, threads, std::size_t{1} << 12, [&](std::size_t lo, std::size_t hi) {
    // Same values as normal(seed, stream, first + k), one log and one sincos
    // per pair instead of per element.
    for (std::size_t k = lo; k < hi;) {
      const std::uint64_t i = first + k, p = i / 2;
      const Block blk = block(seed, stream, p / 2);
      const std::uint32_t w = static_cast<std::uint32_t>(2 * (p % 2));
      const NormalPair z = normal_pair(blk.w[w], blk.w[w + 1]);
      if (i % 2 == 0) out[k++] = fma_rn(stddev, z.even, mean);
      if (k < hi) out[k++] = fma_rn(stddev, z.odd, mean);
    }
  });
}

}  // namespace lockstep::num::rng
