// The verification suite of the op specifications (`lockstep verify ops`); the
// CLI's list of suites (apps/lockstep/suites.hpp) names it.
#pragma once

#include <vector>

#include "lockstep/verify/report.hpp"

namespace lockstep::ops {
// Every op's backward against finite differences, float vs double, algebraic
// identities, and the mutants the checker must reject (src/lockstep/ops/ops_verify.cpp).
std::vector<verify::Table> verify_ops(const verify::Options& opt);
}  // namespace lockstep::ops
