// Entry points of the verification suites, one per module. Each module
// implements its own in its folder; suites.cpp lists them once.
#pragma once

#include <vector>

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

namespace lockstep::ops {
// Every op's backward against finite differences, float vs double, algebraic
// identities, and the mutants the checker must reject (src/lockstep/ops/ops_verify.cpp).
std::vector<verify::Table> verify_ops(const verify::Options& opt);
}  // namespace lockstep::ops
