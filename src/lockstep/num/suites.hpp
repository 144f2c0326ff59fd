// The verification suites of the numeric contract (`lockstep verify ieee` and
// `lockstep verify reduce`); the CLI's list of suites (apps/lockstep/suites.hpp)
// names them.
#pragma once

#include "lockstep/verify/report.hpp"

namespace lockstep::num {
// The IEEE-754 binary32 oracle against the CPU's arithmetic and against MPFR,
// and its rejection of wrong mirrors (src/lockstep/num/ieee_verify.cpp).
verify::Table verify_primitives(const verify::Options& opt);
// lockstep's elementary functions against MPFR: max ulp error per function on
// sampled inputs (src/lockstep/num/elementary_verify.cpp).
verify::Table verify_elementary(const verify::Options& opt);
// Canonical reductions: thread-count invariance and agreement with the plain
// reference; hashing and RNG known answers (src/lockstep/num/reduce_verify.cpp).
verify::Table verify_reductions(const verify::Options& opt);
}  // namespace lockstep::num
