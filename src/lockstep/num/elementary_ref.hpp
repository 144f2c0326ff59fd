// Measuring lockstep's elementary functions (num/elementary.hpp): exact
// references (MPFR, or glibc's double libm when MPFR is not built), the ulp
// error, and the input samples the tests and `lockstep verify elementary` use.
// The exhaustive program (bench/ulp) uses the same pieces.
//
// ulp error. For an exact value e (finite, not NaN) and a float result y:
//     err(y, e) = |y - e| / ulp(e),
//     ulp(e)    = 2^(floor(log2 |e|) - 23)   for 2^-126 <= |e| < 2^128,
//                 2^-149                      for |e| < 2^-126 (subnormal grid; also e = 0),
//                 2^104                       for |e| >= 2^128 (beyond the largest binade).
// That is, the spacing of binary32 numbers in e's binade, so the correctly rounded
// result has err <= 0.5. Special values: y = ±inf counts as 0 error when e rounds
// to that infinity (|e| >= 2^128 (1 - 2^-25)) and otherwise as y = ±2^128; an
// exact ±inf (log 0) needs y to be that infinity; a NaN needs a NaN. Anything
// else (a NaN for a number, a number for a NaN, a wrong infinity) is +inf error.
// The exact value is handled as a double: its own rounding (2^-53 relative)
// changes err by < 2^-29, far below the resolution anything here needs.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "lockstep/num/fp.hpp"
#include "lockstep/num/ieee.hpp"

namespace lockstep::num::elem {

enum class Fn { exp, exp2, expm1, log, log2, log1p, tanh, sigmoid, sin, cos, rsqrt, pow };

struct FnSpec {
  Fn fn;
  const char* name;
  int arity;     // 1, or 2 for pow
  double bound;  // the documented maximum ulp error (docs/NUMERICS.md); tests assert it
  bool monotone; // non-decreasing or non-increasing on its whole domain (checked exhaustively)
};

// Every function, in a fixed order.
std::span<const FnSpec> all_fns();
const FnSpec& spec(Fn fn);

// lockstep's function (hardware policy).
float eval(Fn fn, float x, float y = 0.0f);

// Reference values. libm_ref: glibc's double function at the (exactly
// converted) float input; sigmoid as 1/(1 + exp(-x)) and rsqrt as 1/sqrt(x) in
// double. mpfr_ref: the exact value rounded to double, and the correctly rounded
// binary32 result (computed from >= 160 bits); only when MPFR is built.
struct Exact {
  double value;
  float rounded;  // the correctly rounded binary32 result
};
Exact libm_ref(Fn fn, float x, float y = 0.0f);
bool mpfr_available();
Exact mpfr_ref(Fn fn, float x, float y = 0.0f);  // throws std::logic_error without MPFR
// The best reference this build has: MPFR when available, else libm.
Exact best_ref(Fn fn, float x, float y = 0.0f);
std::string best_ref_name();

double ulp_of(double exact);
double ulp_error(float y, double exact);
// Identical results under the contract: same bits, or both NaN (NaN payload and
// sign are not part of the contract). -0 and +0 differ.
bool same_result(float a, float b);
// For a double reference d: true when d lies within 2^-20 ulp of a rounding
// boundary (a midpoint between floats), i.e. when (float)d might not be the
// correctly rounded result of the exact value. Such cases are re-checked with MPFR.
bool near_midpoint(double d);

// Input samples: random bit patterns over the whole domain, plus dense regimes
// for fn (near 0, near thresholds, range-reduction boundaries, large sin/cos
// arguments, ...). Deterministic in (fn, n, seed) on every platform (an
// explicit generator; no <random> distributions). For pow, x and y.
struct Sample {
  std::vector<float> x, y;
  std::vector<std::string> regime_names;  // regime of each input, by index in regime_of
  std::vector<std::uint8_t> regime_of;
};
Sample sample_inputs(Fn fn, std::size_t n, std::uint64_t seed);
// Inputs with few significant bits (6), |x| in [2^-30, 2^31), both signs; pow
// gets y = 2.5. Their intermediate sums are often exact ties (exp(2^-24):
// 1 + 2^-24 is rounded first), the only place where a ties-away rounding
// differs from ties-to-even: random inputs meet a tie about once in 3*10^4
// results, these dozens of times. Deterministic (7808 inputs).
Sample tie_prone_inputs(Fn fn);

// A measurement of one implementation against a reference on a sample.
struct Measure {
  std::uint64_t cases = 0;
  double max_ulp = 0.0;
  float argmax_x = 0.0f, argmax_y = 0.0f;
  float argmax_got = 0.0f;
  double argmax_exact = 0.0;
  std::uint64_t not_correctly_rounded = 0;
};
using Impl = std::function<float(float, float)>;
enum class RefKind { best, libm, mpfr };
// Multithreaded (OpenMP); the result does not depend on the thread count
// (ties in max_ulp go to the earliest input).
Measure measure(const Impl& impl, Fn fn, const Sample& s, RefKind ref = RefKind::best);
// lockstep's own implementation of fn as an Impl.
Impl lockstep_impl(Fn fn);

std::string hexf(float x);  // "0x1.8p+0 (1.5)"

// ---------------------------------------------------------------------------
// Bit-determinism: the same templates evaluated with every rounded primitive
// computed by the integer IEEE oracle (num/ieee.hpp) instead of the hardware.
// ---------------------------------------------------------------------------
struct OracleArith {
  static float add(float a, float b) { return float_of(ieee::add(bits_of(a), bits_of(b))); }
  static float sub(float a, float b) { return float_of(ieee::sub(bits_of(a), bits_of(b))); }
  static float mul(float a, float b) { return float_of(ieee::mul(bits_of(a), bits_of(b))); }
  static float div(float a, float b) { return float_of(ieee::div(bits_of(a), bits_of(b))); }
  static float sqrt(float a) { return float_of(ieee::sqrt(bits_of(a))); }
  static float fma(float a, float b, float c) { return float_of(ieee::fma(bits_of(a), bits_of(b), bits_of(c))); }
  static float from_int(std::int32_t i) { return float_of(ieee::from_i32(i)); }
};

// fn through the oracle policy; with flaw != none, through a deliberately wrong
// oracle (ieee::mutant), which the bit comparison must notice.
float eval_oracle(Fn fn, float x, float y = 0.0f, ieee::Flaw flaw = ieee::Flaw::none);

struct BitCheck {
  std::uint64_t cases = 0, differing = 0;
  float first_x = 0.0f, first_y = 0.0f;  // the earliest differing input
  float first_hw = 0.0f, first_oracle = 0.0f;
};
// Hardware policy vs oracle policy (optionally flawed) on a sample, bit for bit.
BitCheck compare_with_oracle(Fn fn, const Sample& s, ieee::Flaw flaw = ieee::Flaw::none);

// ---------------------------------------------------------------------------
// Deliberately wrong implementations (typical bugs: a dropped reduction term, a
// perturbed coefficient, a naive formula, a wrong threshold). The measurement
// must reject each: its max ulp on the function's sample exceeds the bound.
// ---------------------------------------------------------------------------
struct Mutant {
  Fn fn;
  const char* name;
  Impl impl;
};
const std::vector<Mutant>& mutants();

}  // namespace lockstep::num::elem
