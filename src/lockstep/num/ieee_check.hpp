// The comparison harness for the IEEE-754 binary32 oracle (ieee.hpp).
//
// One code path serves the unit/property tests (tests/ieee/) and
// `lockstep verify ieee`: draw inputs from named regimes (random bit patterns,
// subnormals, near overflow, cancellation, exponent gaps, tie ladders, ...),
// evaluate the oracle -- or a deliberately wrong mutant of it -- and a
// reference on the same inputs, count disagreements.
//
// References:
//   cpu  : the machine's own arithmetic: float operators compiled with
//          -ffp-contract=off, std::fma, std::sqrt, std::floor/ceil/trunc/
//          nearbyint, int<->float conversions, std::fmin/fmax.
//   mpfr : GNU MPFR at precision 24 with the binary32 exponent range and
//          mpfr_subnormalize, i.e. binary32 emulated by a library nobody here
//          wrote (only when built with LOCKSTEP_HAVE_MPFR).
//
// Wrong mirrors: check_mirror measures on what fraction of inputs the oracle
// rejects a plausible but wrong way of computing a canonical expression
// (double rounding, rounding a whole sum once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/num/ieee.hpp"

namespace lockstep::num::ieee::check {

enum class Op {
  add, sub, mul, fma, div, sqrt,
  from_i32,                               // int32 -> f32
  to_i32_rne, to_i32_rz, to_i32_floor,    // f32 -> int32, saturating
  floor, ceil, trunc, rint,               // f32 -> f32
  lt, le, eq,
  min, max,
};

const char* op_name(Op op);
const std::vector<Op>& all_ops();

enum class Reference { cpu, mpfr };
const char* reference_name(Reference ref);

// Whether the MPFR reference is compiled in.
bool mpfr_available();
// Whether `ref` can judge `op` (MPFR: every op but min/max, whose IEEE 754-2019
// semantics MPFR's mpfr_min/mpfr_max do not share; false without MPFR).
bool has_reference(Op op, Reference ref);

// The names of the input regimes used for `op`; check_op cycles through them,
// so each gets about n / size() cases.
std::vector<std::string> regime_names(Op op);

struct RegimeStats {
  std::string name;
  std::uint64_t cases = 0;
  std::uint64_t mismatches = 0;
};

// Distance reported when one result is NaN and the other is not.
inline constexpr std::uint64_t kNaNDistance = ~std::uint64_t{0};

struct CheckStats {
  Op op = Op::add;
  Reference ref = Reference::cpu;
  Flaw flaw = Flaw::none;
  std::uint64_t cases = 0;
  std::uint64_t mismatches = 0;
  // Largest disagreement: ulps between float results (adjacent binary32 values
  // are 1 apart, -0 vs +0 counts 1), the integer difference for int32 results,
  // 1 for a boolean; kNaNDistance when a NaN met a number. 0 when all agree.
  std::uint64_t max_distance = 0;
  std::vector<RegimeStats> regimes;
  std::string first_mismatch;  // inputs and both results, empty if none
};

// Compare the oracle (or its mutant `flaw`, for the ops that mutant::
// covers; Flaw::none is the oracle itself) against `ref` on n inputs drawn
// from `op`'s regimes with the given seed. Requires has_reference(op, ref).
CheckStats check_op(Op op, Reference ref, std::uint64_t n, std::uint64_t seed,
                    Flaw flaw = Flaw::none);

// "12 ulp", "nan", "-" (no mismatch) for a CheckStats' max_distance.
std::string format_distance(std::uint64_t d);
// One line: op, reference, counts, max distance and the per-regime counts.
std::string summary(const CheckStats& s);

// The mutants' planted bugs and, for each, the ops on which it is a real bug
// (so the harness must see disagreements): ties-away matters only where exact
// ties occur (not sqrt: the root of a binary32 value is never a midpoint; a
// quotient can be one only below the normal range, e.g. 2^-126 / 2^24 = 2^-150),
// flushing only where results can be subnormal (not sqrt or int conversion),
// the lost sticky bit everywhere.
std::vector<std::pair<Flaw, Op>> mutant_cases();

// Empty when the CPU's floating-point environment is the contract's (round to
// nearest, no flush-to-zero, no denormals-are-zero); otherwise what is wrong.
std::string cpu_environment_problem();

// ---------------------------------------------------------------------------
// Wrong mirrors
// ---------------------------------------------------------------------------
enum class Mirror {
  fma_via_f64,      // fma(a,b,c) as f32(f64(a)*f64(b) + f64(c)): rounds twice
  sum3_round_once,  // (a + b) + c as f32(f64(a) + f64(b) + f64(c))
  dot_round_once,   // a 16-term fma-chain dot product as f32(sum of f64 products)
};
const char* mirror_name(Mirror m);
const std::vector<Mirror>& all_mirrors();

struct MirrorRegime {
  std::string name;
  bool must_reject;  // targeted at the mirror's flaw: zero rejections is a failure
};
std::vector<MirrorRegime> mirror_regimes(Mirror m);

struct MirrorStats {
  Mirror mirror = Mirror::fma_via_f64;
  std::string regime;
  bool must_reject = false;
  std::uint64_t cases = 0;
  std::uint64_t rejected = 0;  // inputs where the mirror's bits differ from the oracle's
  std::string example;         // the first rejected input, if any
  double fraction() const {
    return cases == 0 ? 0.0 : static_cast<double>(rejected) / static_cast<double>(cases);
  }
};

// The canonical expression evaluated by the oracle vs the mirror, on n inputs
// of regime `regime` (an index into mirror_regimes(m)).
MirrorStats check_mirror(Mirror m, std::size_t regime, std::uint64_t n, std::uint64_t seed);

}  // namespace lockstep::num::ieee::check
