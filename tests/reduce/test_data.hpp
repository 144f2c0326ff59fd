// Test inputs for the reduction, hashing and RNG tests: deterministic (a
// stateless splitmix64 of (seed, index)), so every failure reproduces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/num/fp.hpp"

namespace lockstep::test {

// splitmix64's output function: a good 64-bit mix of z.
inline std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The golden data (identical to tests/reduce/golden.py's data()): random
// sign, 16 binades [2^-8, 2^8), 23 random mantissa bits.
inline std::vector<float> golden_data(std::uint64_t seed, std::size_t n) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t h = mix64((seed << 32) | i);
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 1);
    const std::uint32_t exp = 127 - 8 + static_cast<std::uint32_t>((h >> 1) & 15);
    const std::uint32_t mant = static_cast<std::uint32_t>((h >> 8) & 0x7FFFFF);
    x[i] = num::float_of((sign << 31) | (exp << 23) | mant);
  }
  return x;
}

// Adversarial profiles: each case draws its elements from one of these.
enum class Profile {
  golden,        // 16 binades, random signs (rounding on every add)
  wide,          // any finite exponent: huge and tiny mixed, overflow to inf
  cancel,        // pairs +v, -v(1 + small): heavy cancellation, exact zeros
  subnormal,     // subnormals and the smallest normals
  zeros,         // +0 and -0 only
  neg_zeros,     // -0 only (sum of -0s is +0 by the convention)
  specials,      // mostly normal; 1/64 each ±inf, NaN (random payload and sign), ±0
  ties,          // values on a coarse grid: many equal values (max/min ties, ±0)
  count
};

inline const char* profile_name(Profile p) {
  switch (p) {
    case Profile::golden: return "golden";
    case Profile::wide: return "wide";
    case Profile::cancel: return "cancel";
    case Profile::subnormal: return "subnormal";
    case Profile::zeros: return "zeros";
    case Profile::neg_zeros: return "neg_zeros";
    case Profile::specials: return "specials";
    case Profile::ties: return "ties";
    case Profile::count: break;
  }
  return "?";
}

inline float draw(Profile p, std::uint64_t seed, std::size_t i) {
  const std::uint64_t h = mix64(mix64(seed) ^ (i * 0xD1B54A32D192ED03ull));
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 1) << 31;
  const std::uint32_t mant = static_cast<std::uint32_t>((h >> 8) & 0x7FFFFF);
  const std::uint32_t r = static_cast<std::uint32_t>(h >> 40);  // 24 random bits
  switch (p) {
    case Profile::golden:
      return num::float_of(sign | ((119u + ((h >> 1) & 15)) << 23) | mant);
    case Profile::wide:
      return num::float_of(sign | ((1u + r % 254u) << 23) | mant);
    case Profile::cancel: {
      // Element 2k is v, element 2k+1 is -v perturbed in its last bits (or exactly -v).
      const std::uint64_t g = mix64(mix64(seed + 1) ^ (i / 2));
      const std::uint32_t e = 100u + static_cast<std::uint32_t>(g % 50u);
      const std::uint32_t m = static_cast<std::uint32_t>((g >> 8) & 0x7FFFFF);
      const std::uint32_t s = static_cast<std::uint32_t>(g >> 63) << 31;
      if (i % 2 == 0) return num::float_of(s | (e << 23) | m);
      const std::uint32_t d = r % 4u;  // 0: exact cancellation
      return num::float_of((s ^ 0x80000000u) | (e << 23) | ((m + d) & 0x7FFFFF));
    }
    case Profile::subnormal:
      return num::float_of(sign | (r % 3u == 0 ? (1u << 23) : 0u) | (mant >> (r % 20u)));
    case Profile::zeros: return num::float_of(sign);
    case Profile::neg_zeros: return num::float_of(0x80000000u);
    case Profile::specials: {
      const std::uint32_t k = r % 64u;
      if (k == 0) return num::float_of(sign | 0x7F800000u);                  // ±inf
      if (k == 1) return num::float_of(sign | 0x7F800000u | (mant | 1u));   // NaN, any payload
      if (k == 2) return num::float_of(sign);                                // ±0
      return num::float_of(sign | ((110u + ((h >> 1) & 31)) << 23) | mant);
    }
    case Profile::ties:
      return num::float_of(r % 5u == 0 ? sign : sign | ((126u + (r % 3u)) << 23));
    case Profile::count: break;
  }
  return 0.0f;
}

inline std::vector<float> make(Profile p, std::uint64_t seed, std::size_t n) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = draw(p, seed, i);
  return x;
}

// A specials profile still contains NaN only when one was drawn; this one
// puts exactly one NaN (payload and sign from the seed) at index `at`.
inline void plant_nan(std::vector<float>& x, std::uint64_t seed, std::size_t at) {
  const std::uint64_t h = mix64(seed ^ 0xABCDEFull);
  x[at] = num::float_of((static_cast<std::uint32_t>(h & 1) << 31) | 0x7F800000u |
                        (static_cast<std::uint32_t>(h >> 9) & 0x7FFFFFu) | 1u);
}

inline std::string hex32(std::uint32_t u) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x00000000";
  for (int k = 0; k < 8; ++k) s[9 - static_cast<std::size_t>(k)] = digits[(u >> (4 * k)) & 15];
  return s;
}

}  // namespace lockstep::test
