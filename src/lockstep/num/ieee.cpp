// The exact IEEE-754 binary32 oracle: integer arithmetic only (see ieee.hpp).
//
// Every finite nonzero binary32 value is an integer significand times a power
// of two. Each operation below computes its exact result in that form
// (sign, exponent, integer significand up to 128 bits wide), and round_pack
// rounds it to binary32 once. Where an exact result would need more bits than
// that (an addition across a huge exponent gap, an inexact quotient or square
// root), the bits that cannot matter are replaced by one "sticky" bit, and a
// comment at each place says why the rounding still comes out exact.
#include "lockstep/num/ieee.hpp"

#include <algorithm>

namespace lockstep::num::ieee {
namespace {

// 128-bit unsigned integers (GCC/Clang extension; __extension__ keeps
// -Wpedantic quiet about it).
__extension__ typedef unsigned __int128 u128;

constexpr bits32 kFracMask = 0x7fffffu;
constexpr bits32 kHiddenBit = 0x800000u;  // 2^23

// (-1)^neg * sig * 2^exp, exactly (up to the sticky bit documented at round_pack).
struct Exact {
  bool neg = false;
  int exp = 0;
  u128 sig = 0;
};

// A finite nonzero binary32 bit pattern as an Exact.
//   normal,    biased exponent E in 1..254:  1.f * 2^(E-127) = (2^23 + f) * 2^(E-150)
//   subnormal, E == 0:                        0.f * 2^-126    = f * 2^-149
Exact unpack(bits32 x) {
  const bits32 field = (x >> 23) & 0xffu;
  const bits32 frac = x & kFracMask;
  if (field == 0) return {sign_of(x), -149, frac};
  return {sign_of(x), static_cast<int>(field) - 150, frac | kHiddenBit};
}

// The same, with the significand shifted up to exactly 24 bits (2^23 <= sig < 2^24),
// which makes subnormal inputs look like normal ones with a lower exponent.
Exact unpack_normalized(bits32 x) {
  Exact u = unpack(x);
  while (u.sig < kHiddenBit) {
    u.sig <<= 1;
    --u.exp;
  }
  return u;
}

// Index of the highest set bit of v (v != 0).
int top_bit(u128 v) {
  const auto hi = static_cast<std::uint64_t>(v >> 64);
  if (hi != 0) return 127 - __builtin_clzll(hi);
  return 63 - __builtin_clzll(static_cast<std::uint64_t>(v));
}

// Bit i of v (false for i outside 0..127), and whether any of bits 0..i-1 is set.
bool bit_at(u128 v, int i) { return i >= 0 && i < 128 && ((v >> i) & 1u) != 0; }
bool any_below(u128 v, int i) {
  if (i <= 0) return false;
  if (i >= 128) return v != 0;
  return (v & ((u128{1} << i) - 1u)) != 0;
}

// Round x to binary32: round to nearest, ties to even. This is the ONE rounding
// step of every operation (`flaw` plants the deliberate bugs of ieee::mutant).
//
// x.sig (nonzero) is the exact significand, or a stand-in for it. Let q be the
// exponent of the result's last bit. Round-to-nearest-even gives the same answer
// for every value strictly inside one open interval between consecutive multiples
// of 2^(q-1) (those multiples are the binary32 values and the midpoints between
// them). So a caller that cannot hold every bit of the exact value may pass any
// stand-in that lies strictly inside the same such interval as the exact value;
// each caller says why its stand-in does. The usual one is the "sticky bit":
// truncate the exact significand and OR a 1 into its lowest bit when anything
// was cut off. With at least 26 significant bits, the half-unit bit q-1 lies
// above that lowest bit, and both values lie strictly between the same two
// consecutive even multiples of the lowest unit (the callers keep 31 or more).
bits32 round_pack(const Exact& x, Flaw flaw) {
  const bits32 sign = x.neg ? kSignBit : 0u;
  const int top = top_bit(x.sig);
  // Exponent of the result's last bit: 24 significant bits, but never below
  // 2^-149, the spacing of the subnormals (that floor IS gradual underflow).
  int q = std::max(x.exp + top - 23, -149);
  const int shift = q - x.exp;  // how many low bits of sig are rounded off

  std::uint64_t kept = 0;  // the result's significand, in units of 2^q
  if (shift <= 0) {
    kept = static_cast<std::uint64_t>(x.sig << -shift);  // exact: at most 24 bits
  } else {
    kept = shift >= 128 ? 0 : static_cast<std::uint64_t>(x.sig >> shift);
    const bool round_bit = bit_at(x.sig, shift - 1);  // worth exactly half of 2^q
    const bool sticky = any_below(x.sig, shift - 1);  // anything below that
    bool up = false;
    switch (flaw) {
      case Flaw::none:
      case Flaw::flush_subnormals:
        up = round_bit && (sticky || (kept & 1u) != 0);  // above half, or a tie with odd last bit
        break;
      case Flaw::ties_away:
        up = round_bit;
        break;
      case Flaw::no_sticky:
        up = round_bit && (kept & 1u) != 0;
        break;
    }
    if (up) ++kept;
    if (kept == (std::uint64_t{1} << 24)) {  // carried into the next binade: 2^23 * 2^(q+1)
      kept >>= 1;
      ++q;
    }
  }

  if (kept == 0) return sign;  // underflow to zero keeps the sign of the exact result
  if (kept < kHiddenBit) {     // subnormal (then q == -149): no implicit bit, field 0
    if (flaw == Flaw::flush_subnormals) return sign;
    return sign | static_cast<bits32>(kept);
  }
  // kept in [2^23, 2^24): value = (kept / 2^23) * 2^(q+23), biased exponent q+23+127.
  const int field = q + 150;
  if (field >= 255) return sign | kPosInf;  // overflow: nearest-even rounds to infinity
  return sign | (static_cast<bits32>(field) << 23) | (static_cast<bits32>(kept) & kFracMask);
}

// A finite nonzero term sig * 2^exp with sig < 2^48: an operand or an exact product.
struct Term {
  bool neg;
  int exp;
  std::uint64_t sig;
};

// The exact sum x + y of two finite nonzero terms, rounded once.
Exact exact_sum(Term x, Term y) {
  // Order by the position of the leading bit: big is at least as large in magnitude
  // as small, up to one binade.
  if (x.exp + top_bit(x.sig) < y.exp + top_bit(y.sig)) std::swap(x, y);
  const Term& big = x;
  const Term& small = y;
  const int big_top = big.exp + top_bit(big.sig);
  const int small_top = small.exp + top_bit(small.sig);

  u128 bs = 0, ss = 0;  // the two significands on the common exponent `exp`
  int exp = 0;
  if (big_top - small_top <= 60) {
    // Align exactly on the lower of the two exponents. The wider integer spans from
    // the lowest bit of either term (>= small_top - 47) to big_top: at most
    // 60 + 48 bits, so it fits in 128 with room for the carry.
    exp = std::min(big.exp, small.exp);
    bs = u128{big.sig} << (big.exp - exp);
    ss = u128{small.sig} << (small.exp - exp);
  } else {
    // The small term is below 2^(big_top - 60) <= 2^(big.exp - 13) (big.sig has at
    // most 48 bits): less than one unit of big's own last bit. Replace it by the
    // stand-in 2^(big.exp - 60) (round_pack's rule). The exact sum and the stand-in
    // sum both lie strictly between big and big ± 2^big.exp, and no multiple of
    // 2^(q-1) lies there: the result keeps its top bit at big_top or big_top - 1,
    // so q - 1 >= big_top - 25; if that is >= big.exp, every multiple of 2^(q-1) is
    // a multiple of 2^big.exp; if not, big (< 2^25 units of 2^q) is itself a
    // multiple of 2^q and the nearest multiple of 2^(q-1) besides big is
    // >= 2^(big_top - 26) away, farther than the small term reaches.
    exp = big.exp - 60;
    bs = u128{big.sig} << 60;
    ss = 1;
  }
  if (big.neg == small.neg) return {big.neg, exp, bs + ss};
  if (bs >= ss) return {big.neg, exp, bs - ss};  // bs - ss == 0: exact cancellation
  return {small.neg, exp, ss - bs};
}

bits32 add_impl(bits32 a, bits32 b, Flaw flaw) {
  if (is_nan(a) || is_nan(b)) return kCanonicalNaN;
  if (is_inf(a) || is_inf(b)) {
    if (is_inf(a) && is_inf(b) && sign_of(a) != sign_of(b)) return kCanonicalNaN;  // inf - inf
    return is_inf(a) ? a : b;
  }
  if (is_zero(a) && is_zero(b)) return a & b & kSignBit;  // -0 only for (-0) + (-0)
  if (is_zero(a)) return b;                                // exact: the other operand
  if (is_zero(b)) return a;
  const Exact ua = unpack(a), ub = unpack(b);
  const Exact s = exact_sum({ua.neg, ua.exp, static_cast<std::uint64_t>(ua.sig)},
                            {ub.neg, ub.exp, static_cast<std::uint64_t>(ub.sig)});
  if (s.sig == 0) return 0;  // x + (-x) = +0 in round to nearest
  return round_pack(s, flaw);
}

bits32 mul_impl(bits32 a, bits32 b, Flaw flaw) {
  if (is_nan(a) || is_nan(b)) return kCanonicalNaN;
  const bits32 sign = (a ^ b) & kSignBit;
  if (is_inf(a) || is_inf(b)) {
    if (is_zero(a) || is_zero(b)) return kCanonicalNaN;  // inf * 0
    return sign | kPosInf;
  }
  if (is_zero(a) || is_zero(b)) return sign;
  const Exact ua = unpack(a), ub = unpack(b);
  // The exact product: a 48-bit significand, nothing lost.
  return round_pack({sign != 0, ua.exp + ub.exp, ua.sig * ub.sig}, flaw);
}

bits32 fma_impl(bits32 a, bits32 b, bits32 c, Flaw flaw) {
  if (is_nan(a) || is_nan(b) || is_nan(c)) return kCanonicalNaN;
  const bits32 product_sign = (a ^ b) & kSignBit;
  if (is_inf(a) || is_inf(b)) {
    if (is_zero(a) || is_zero(b)) return kCanonicalNaN;  // inf * 0
    if (is_inf(c) && (c & kSignBit) != product_sign) return kCanonicalNaN;  // inf - inf
    return product_sign | kPosInf;
  }
  if (is_inf(c)) return c;
  if (is_zero(a) || is_zero(b)) {  // the product is exactly ±0: the addition's zero rule
    if (is_zero(c)) return product_sign & c;
    return c;
  }
  const Exact ua = unpack(a), ub = unpack(b);
  const Term product{product_sign != 0, ua.exp + ub.exp,
                     static_cast<std::uint64_t>(ua.sig * ub.sig)};  // exact, < 2^48
  if (is_zero(c)) return round_pack({product.neg, product.exp, product.sig}, flaw);
  const Exact uc = unpack(c);
  const Exact s = exact_sum(product, {uc.neg, uc.exp, static_cast<std::uint64_t>(uc.sig)});
  if (s.sig == 0) return 0;  // a*b == -c exactly: +0
  return round_pack(s, flaw);
}

bits32 div_impl(bits32 a, bits32 b, Flaw flaw) {
  if (is_nan(a) || is_nan(b)) return kCanonicalNaN;
  const bits32 sign = (a ^ b) & kSignBit;
  if (is_inf(a)) return is_inf(b) ? kCanonicalNaN : sign | kPosInf;  // inf/inf, inf/x
  if (is_inf(b)) return sign;                                        // x/inf = ±0
  if (is_zero(b)) return is_zero(a) ? kCanonicalNaN : sign | kPosInf;  // 0/0, x/0
  if (is_zero(a)) return sign;
  const Exact ua = unpack_normalized(a), ub = unpack_normalized(b);
  // Both significands in [2^23, 2^24): the quotient of (sig_a << 40) by sig_b lies
  // in (2^39, 2^41), at least 40 bits. If the division leaves a remainder, the
  // exact quotient lies strictly between q and q + 1: OR-ing a 1 into q's lowest
  // bit makes round_pack's sticky form.
  const std::uint64_t num = static_cast<std::uint64_t>(ua.sig) << 40;
  const std::uint64_t den = static_cast<std::uint64_t>(ub.sig);
  std::uint64_t quot = num / den;
  if (num % den != 0) quot |= 1u;
  return round_pack({sign != 0, ua.exp - ub.exp - 40, quot}, flaw);
}

// floor(sqrt(n)) and the remainder n - root^2, by the digit-by-digit method
// (one result bit per step, the base-2 form of the pencil-and-paper algorithm).
std::uint64_t isqrt(std::uint64_t n, std::uint64_t* remainder) {
  std::uint64_t root = 0;
  std::uint64_t bit = std::uint64_t{1} << 62;  // the highest power of 4 in 64 bits
  while (bit > n) bit >>= 2;
  while (bit != 0) {
    if (n >= root + bit) {
      n -= root + bit;
      root = (root >> 1) + bit;
    } else {
      root >>= 1;
    }
    bit >>= 2;
  }
  *remainder = n;
  return root;
}

bits32 sqrt_impl(bits32 a, Flaw flaw) {
  if (is_nan(a)) return kCanonicalNaN;
  if (is_zero(a)) return a;                       // sqrt(±0) = ±0
  if (sign_of(a)) return kCanonicalNaN;           // sqrt of a negative number
  if (is_inf(a)) return a;                        // sqrt(+inf) = +inf
  Exact u = unpack_normalized(a);                 // sig in [2^23, 2^24)
  if ((u.exp & 1) != 0) {                         // make the exponent even so it halves exactly
    u.sig <<= 1;
    --u.exp;
  }
  // sqrt(sig * 2^exp) = sqrt(sig * 2^38) * 2^((exp - 38) / 2). sig * 2^38 < 2^63, so
  // its integer square root has at least 31 bits; a nonzero remainder means the exact
  // root lies strictly between root and root + 1 (round_pack's sticky form).
  const auto radicand = static_cast<std::uint64_t>(u.sig) << 38;
  std::uint64_t remainder = 0;
  std::uint64_t root = isqrt(radicand, &remainder);
  if (remainder != 0) root |= 1u;
  return round_pack({false, (u.exp - 38) / 2, root}, flaw);
}

bits32 from_i32_impl(std::int32_t x, Flaw flaw) {
  if (x == 0) return 0;
  const bool neg = x < 0;
  // |x| as an unsigned number (0u - x is well defined even for INT32_MIN).
  const std::uint32_t mag = neg ? 0u - static_cast<std::uint32_t>(x) : static_cast<std::uint32_t>(x);
  return round_pack({neg, 0, mag}, flaw);
}

enum class ToIntegral { nearest_even, toward_zero, down, up };

// x rounded to an integral value, as binary32.
bits32 round_integral(bits32 x, ToIntegral mode) {
  if (is_nan(x)) return kCanonicalNaN;
  if (is_inf(x) || is_zero(x)) return x;
  if (((x >> 23) & 0xffu) >= 150) return x;  // |x| >= 2^23: every such float is an integer
  const Exact u = unpack(x);                 // here u.exp < 0
  const int drop = -u.exp;                   // fraction bits of sig, 1..149
  const std::uint64_t sig = static_cast<std::uint64_t>(u.sig);
  const std::uint64_t whole = drop >= 64 ? 0 : sig >> drop;  // |x| truncated
  const bool half_bit = bit_at(u.sig, drop - 1);              // fraction >= 1/2 ...
  const bool below_half = any_below(u.sig, drop - 1);         // ... and the rest of it
  const bool inexact = half_bit || below_half;
  bool away = false;  // add one to the magnitude?
  switch (mode) {
    case ToIntegral::nearest_even: away = half_bit && (below_half || (whole & 1u) != 0); break;
    case ToIntegral::toward_zero: away = false; break;
    case ToIntegral::down: away = u.neg && inexact; break;
    case ToIntegral::up: away = !u.neg && inexact; break;
  }
  const std::uint64_t mag = whole + (away ? 1u : 0u);  // <= 2^23: exactly representable
  if (mag == 0) return x & kSignBit;                    // a zero keeps the input's sign
  return round_pack({u.neg, 0, mag}, Flaw::none);
}

// f32 -> int32 through an integral value; saturating (ieee.hpp).
std::int32_t to_i32(bits32 x, ToIntegral mode) {
  if (is_nan(x)) return 0;
  const bits32 r = round_integral(x, mode);
  const bool neg = sign_of(r);
  if (is_zero(r)) return 0;
  // |r| >= 2^31 (biased exponent >= 127 + 31), infinities included: saturate.
  // r == -2^31 lands here too and INT32_MIN is its exact value.
  if (((r >> 23) & 0xffu) >= 158) return neg ? INT32_MIN : INT32_MAX;
  const Exact u = unpack(r);  // an integer below 2^31: shifting right drops only zeros
  const std::int64_t mag = u.exp >= 0 ? static_cast<std::int64_t>(u.sig << u.exp)
                                      : static_cast<std::int64_t>(u.sig >> -u.exp);
  return static_cast<std::int32_t>(neg ? -mag : mag);
}

// A key whose integer order is the order of the (non-NaN) values; -0 and +0 share 0.
std::int64_t order_key(bits32 x) {
  const auto mag = static_cast<std::int64_t>(x & 0x7fffffffu);
  return sign_of(x) ? -mag : mag;
}

}  // namespace

const char* flaw_name(Flaw f) {
  switch (f) {
    case Flaw::none: return "none";
    case Flaw::ties_away: return "ties-away";
    case Flaw::flush_subnormals: return "flush-subnormals";
    case Flaw::no_sticky: return "no-sticky";
  }
  return "?";
}

bits32 add(bits32 a, bits32 b) { return add_impl(a, b, Flaw::none); }
bits32 sub(bits32 a, bits32 b) { return add_impl(a, b ^ kSignBit, Flaw::none); }
bits32 mul(bits32 a, bits32 b) { return mul_impl(a, b, Flaw::none); }
bits32 fma(bits32 a, bits32 b, bits32 c) { return fma_impl(a, b, c, Flaw::none); }
bits32 div(bits32 a, bits32 b) { return div_impl(a, b, Flaw::none); }
bits32 sqrt(bits32 a) { return sqrt_impl(a, Flaw::none); }
bits32 from_i32(std::int32_t x) { return from_i32_impl(x, Flaw::none); }

std::int32_t to_i32_rne(bits32 x) { return to_i32(x, ToIntegral::nearest_even); }
std::int32_t to_i32_rz(bits32 x) { return to_i32(x, ToIntegral::toward_zero); }
std::int32_t to_i32_floor(bits32 x) { return to_i32(x, ToIntegral::down); }

bits32 floor(bits32 x) { return round_integral(x, ToIntegral::down); }
bits32 ceil(bits32 x) { return round_integral(x, ToIntegral::up); }
bits32 trunc(bits32 x) { return round_integral(x, ToIntegral::toward_zero); }
bits32 rint(bits32 x) { return round_integral(x, ToIntegral::nearest_even); }

bool eq(bits32 a, bits32 b) { return !is_nan(a) && !is_nan(b) && order_key(a) == order_key(b); }
bool lt(bits32 a, bits32 b) { return !is_nan(a) && !is_nan(b) && order_key(a) < order_key(b); }
bool le(bits32 a, bits32 b) { return !is_nan(a) && !is_nan(b) && order_key(a) <= order_key(b); }

bits32 min(bits32 a, bits32 b) {
  if (is_nan(a) || is_nan(b)) return kCanonicalNaN;
  if (lt(a, b)) return a;
  if (lt(b, a)) return b;
  return a | b;  // equal: identical bits, or ±0 where -0 is the smaller (a | b has the sign)
}

bits32 max(bits32 a, bits32 b) {
  if (is_nan(a) || is_nan(b)) return kCanonicalNaN;
  if (lt(a, b)) return b;
  if (lt(b, a)) return a;
  return a & b;  // equal: identical bits, or ±0 where +0 is the larger
}

namespace mutant {
bits32 add(Flaw f, bits32 a, bits32 b) { return add_impl(a, b, f); }
bits32 sub(Flaw f, bits32 a, bits32 b) { return add_impl(a, b ^ kSignBit, f); }
bits32 mul(Flaw f, bits32 a, bits32 b) { return mul_impl(a, b, f); }
bits32 fma(Flaw f, bits32 a, bits32 b, bits32 c) { return fma_impl(a, b, c, f); }
bits32 div(Flaw f, bits32 a, bits32 b) { return div_impl(a, b, f); }
bits32 sqrt(Flaw f, bits32 a) { return sqrt_impl(a, f); }
bits32 from_i32(Flaw f, std::int32_t x) { return from_i32_impl(x, f); }
}  // namespace mutant

}  // namespace lockstep::num::ieee
