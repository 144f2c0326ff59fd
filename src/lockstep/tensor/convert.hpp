// Conversions between binary32 and the 16-bit float types, on bit patterns,
// in integer arithmetic only (so host and device compile one source and no
// rounding mode or flush-to-zero setting of the hardware can change a bit).
//
// The rules (docs/NUMERICS.md, "Typed storage conversions"):
//   f32 -> bf16, f32 -> f16: round to nearest, ties to even, once.
//     Subnormal results are produced (no flush to zero) and subnormal inputs
//     rounded like any other; a magnitude at or above the type's overflow
//     threshold (the largest finite value plus half its ulp, a tie that rounds
//     to the even neighbour beyond the type: 65520 for f16, the binary32
//     pattern 0x7f7f8000 for bf16) gives ±Inf; ±Inf stays ±Inf, ±0 stays ±0.
//   bf16 -> f32, f16 -> f32: exact (every value is a binary32 value).
//   NaN: any NaN, of either sign and any payload, signalling or quiet, gives
//     the ONE canonical quiet NaN of the result type: f32 0x7fc00000,
//     bf16 0x7fc0, f16 0x7e00 (the project's NaN rule, num/ieee.hpp: hardware
//     disagrees on NaN bits, CUDA's __float2bfloat16_rn gives 0x7fff, x86 keeps
//     the payload, so a NaN's sign and payload are not carried).
// tests/tensor/ checks every one of the 65536 patterns of each 16-bit type
// both ways and 10^6 random binary32 values against independent conversions
// (the compiler's _Float16, numpy's float16, ml_dtypes' bfloat16).
#pragma once

#include <cstdint>

#include "lockstep/num/fp.hpp"

namespace lockstep::tensor {

inline constexpr std::uint32_t kF32CanonicalNaN = 0x7fc00000u;
inline constexpr std::uint16_t kBf16CanonicalNaN = 0x7fc0u;
inline constexpr std::uint16_t kF16CanonicalNaN = 0x7e00u;

// --- bfloat16 ------------------------------------------------------------------

LOCKSTEP_HD constexpr std::uint16_t bf16_from_f32_bits(std::uint32_t x) {
  if ((x & 0x7fffffffu) > 0x7f800000u) return kBf16CanonicalNaN;
  // bf16 is binary32's upper half: round the lower 16 bits away. Adding
  // 0x7fff plus the kept part's lowest bit carries into the kept part exactly
  // when the dropped part is above half, or is half and the kept part odd
  // (ties to even). A carry out of the fraction increments the exponent, which
  // is the correct next value (up to Inf: 0x7f7f8000 and above round to
  // 0x7f80). No sum overflows 32 bits: the largest non-NaN pattern is 0xff800000.
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

LOCKSTEP_HD constexpr std::uint32_t f32_bits_from_bf16(std::uint16_t h) {
  if ((h & 0x7fffu) > 0x7f80u) return kF32CanonicalNaN;
  return static_cast<std::uint32_t>(h) << 16;
}

// --- binary16 --------------------------------------------------------------------

LOCKSTEP_HD constexpr std::uint16_t f16_from_f32_bits(std::uint32_t x) {
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return kF16CanonicalNaN;
  // 65520 = 65504 (the largest f16) + half its ulp: a tie that rounds to the
  // even neighbour 2^16, which is beyond f16: Inf. Infinities land here too.
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (a >= 0x38800000u) {
    // A normal f16 (|x| >= 2^-14): rebias the exponent (127 -> 15, i.e.
    // subtract 112 << 23) and round the 13 dropped fraction bits to nearest
    // even as bf16 does with 16; a carry into the exponent is the next binade.
    const std::uint32_t m = a - 0x38000000u;
    return static_cast<std::uint16_t>(sign | ((m + 0xfffu + ((m >> 13) & 1u)) >> 13));
  }
  // A subnormal f16 or zero: the result counts units of 2^-24. With the
  // binary32 significand s (implicit bit set) and biased exponent e, |x| =
  // s * 2^(e-150) = (s >> (126 - e)) units plus a remainder. Below 2^-25
  // (e < 102) the value is less than half a unit: it rounds to ±0 (2^-25 itself,
  // the tie, also gives 0, which is even). Binary32 subnormals are far below.
  const std::uint32_t e = a >> 23;
  if (e < 102) return static_cast<std::uint16_t>(sign);
  const std::uint32_t s = (a & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126 - e;  // 14 .. 24
  std::uint32_t q = s >> shift;
  const std::uint32_t rem = s & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;  // may reach 0x400: the smallest normal, correctly
  return static_cast<std::uint16_t>(sign | q);
}

LOCKSTEP_HD constexpr std::uint32_t f32_bits_from_f16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu;
  std::uint32_t m = h & 0x3ffu;
  if (e == 31) return m != 0 ? kF32CanonicalNaN : (sign | 0x7f800000u);
  if (e != 0) return sign | ((e + 112u) << 23) | (m << 13);
  if (m == 0) return sign;
  // Subnormal: m * 2^-24. Shift the leading one up to bit 10 (the implicit
  // bit's place), lowering the exponent once per shift from 2^-14's 113.
  std::uint32_t be = 113;
  while ((m & 0x400u) == 0) {
    m <<= 1;
    --be;
  }
  return sign | (be << 23) | ((m & 0x3ffu) << 13);
}

// --- on float values ---------------------------------------------------------------

LOCKSTEP_HD inline std::uint16_t f32_to_bf16(float x) { return bf16_from_f32_bits(num::bits_of(x)); }
LOCKSTEP_HD inline float bf16_to_f32(std::uint16_t h) { return num::float_of(f32_bits_from_bf16(h)); }
LOCKSTEP_HD inline std::uint16_t f32_to_f16(float x) { return f16_from_f32_bits(num::bits_of(x)); }
LOCKSTEP_HD inline float f16_to_f32(std::uint16_t h) { return num::float_of(f32_bits_from_f16(h)); }

}  // namespace lockstep::tensor
