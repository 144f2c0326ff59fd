// The exact IEEE-754 binary32 oracle.
//
// Every primitive of the numeric contract (DESIGN.md §1), computed from the
// operands' bit patterns with INTEGER arithmetic only: no float or double
// operation happens anywhere in ieee.cpp. This is the reference that the CPU's
// arithmetic, the CUDA kernels and every mirror are proven against, so it is
// written to be read: each operation forms the exact result as an integer
// significand times a power of two, and one function (round_pack in ieee.cpp)
// rounds it to binary32.
//
// Conventions (docs/NUMERICS.md, "The IEEE-754 binary32 oracle"):
//   - Rounding: round to nearest, ties to even. Subnormals are produced and
//     consumed (no flush to zero). Overflow gives ±inf.
//   - Signed zeros as IEEE 754: x + (-x) = +0, (-0) + (-0) = -0, sqrt(-0) = -0,
//     fma(a, b, c) with an exactly zero sum follows the addition rule.
//   - NaN: any NaN result is the ONE canonical quiet NaN 0x7fc00000, whatever
//     the inputs' payloads or signs (signalling NaNs included). Hardware does
//     not agree on NaN bits (x86 SSE makes 0xffc00000, CUDA 0x7fffffff), so a
//     NaN's sign and payload are not part of the contract: comparing a result
//     against hardware treats any NaN as equal to any NaN (same_value below).
//   - f32 -> int32 saturates: NaN -> 0, values above INT32_MAX -> INT32_MAX,
//     below INT32_MIN -> INT32_MIN (the behaviour of CUDA's cvt.*.s32.f32; x86's
//     cvtss2si instead returns 0x80000000 for all three, so host mirrors must
//     clamp before converting).
//   - min/max are IEEE 754-2019 minimum/maximum: a NaN operand gives NaN
//     (a NaN is never silently dropped), and -0 < +0, so min(+0, -0) = -0 and
//     max(+0, -0) = +0 in either argument order.
//   - Comparisons: IEEE semantics; any comparison with a NaN is false (ne is
//     true), and -0 == +0.
#pragma once

#include <cstdint>

namespace lockstep::num::ieee {

using bits32 = std::uint32_t;

inline constexpr bits32 kCanonicalNaN = 0x7fc00000u;
inline constexpr bits32 kSignBit = 0x80000000u;
inline constexpr bits32 kPosInf = 0x7f800000u;

// Classification of a bit pattern.
constexpr bool is_nan(bits32 x) { return (x & 0x7fffffffu) > kPosInf; }
constexpr bool is_inf(bits32 x) { return (x & 0x7fffffffu) == kPosInf; }
constexpr bool is_zero(bits32 x) { return (x & 0x7fffffffu) == 0; }
constexpr bool is_subnormal(bits32 x) { return (x & kPosInf) == 0 && !is_zero(x); }
constexpr bool sign_of(bits32 x) { return (x & kSignBit) != 0; }

// Equality of two results under the contract: identical bits, or both NaN
// (NaN sign and payload are not part of the contract). -0 and +0 DIFFER here.
constexpr bool same_value(bits32 x, bits32 y) { return x == y || (is_nan(x) && is_nan(y)); }

// --- arithmetic: the exact result, rounded once (nearest, ties to even) -----
bits32 add(bits32 a, bits32 b);
bits32 sub(bits32 a, bits32 b);
bits32 mul(bits32 a, bits32 b);
bits32 fma(bits32 a, bits32 b, bits32 c);  // a*b + c with ONE rounding
bits32 div(bits32 a, bits32 b);
bits32 sqrt(bits32 a);

// --- conversions --------------------------------------------------------------
bits32 from_i32(std::int32_t x);  // int32 -> f32, nearest even
// f32 -> int32, saturating (NaN -> 0; see the conventions above).
std::int32_t to_i32_rne(bits32 x);    // nearest, ties to even (cvt.rni / cvtss2si)
std::int32_t to_i32_rz(bits32 x);     // toward zero (C's (int)x, cvttss2si)
std::int32_t to_i32_floor(bits32 x);  // toward -inf

// --- rounding to an integral value, f32 -> f32 ---------------------------------
// The sign of a zero result follows the input (trunc(-0.5) = -0, ceil(-0.5) = -0),
// ±0 and ±inf are returned unchanged, NaN gives the canonical NaN.
bits32 floor(bits32 x);
bits32 ceil(bits32 x);
bits32 trunc(bits32 x);
bits32 rint(bits32 x);  // nearest, ties to even (nearbyint in the default mode)

// --- comparisons (IEEE: false when either is NaN; -0 == +0) ---------------------
bool eq(bits32 a, bits32 b);
bool lt(bits32 a, bits32 b);
bool le(bits32 a, bits32 b);
inline bool ne(bits32 a, bits32 b) { return !eq(a, b); }
inline bool gt(bits32 a, bits32 b) { return lt(b, a); }
inline bool ge(bits32 a, bits32 b) { return le(b, a); }

// --- minimum / maximum (IEEE 754-2019 minimum/maximum: NaN propagates, -0 < +0) -
bits32 min(bits32 a, bits32 b);
bits32 max(bits32 a, bits32 b);

// --- deliberately wrong variants ------------------------------------------------
// NOT part of the oracle: each plants one classic rounding bug in the shared
// rounding step so the tests can show that the comparison harness catches it
// (tests/ieee/ieee_teeth_test.cpp, `lockstep verify ieee`). Flaw::none gives
// exactly the functions above.
enum class Flaw {
  none,
  ties_away,         // round half away from zero instead of half to even
  flush_subnormals,  // results below the normal range become ±0 (FTZ)
  no_sticky,         // decide the rounding from the round bit alone, ignoring the
                     // bits below it (a lost sticky bit: 1.5 ulp-ish cases go wrong)
};
const char* flaw_name(Flaw f);

namespace mutant {
bits32 add(Flaw f, bits32 a, bits32 b);
bits32 sub(Flaw f, bits32 a, bits32 b);
bits32 mul(Flaw f, bits32 a, bits32 b);
bits32 fma(Flaw f, bits32 a, bits32 b, bits32 c);
bits32 div(Flaw f, bits32 a, bits32 b);
bits32 sqrt(Flaw f, bits32 a);
bits32 from_i32(Flaw f, std::int32_t x);
}  // namespace mutant

}  // namespace lockstep::num::ieee
