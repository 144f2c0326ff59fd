// The one list of verification suites. `lockstep verify` runs them in this
// order; `lockstep verify NAME...` runs the named ones.
//
// The list lives here, at the top, because it names every module's suite:
// each module declares its entry point in its own folder (num/suites.hpp,
// ops/suites.hpp) on top of verify/report.hpp (Table, Options, Suite), and
// nothing below the CLI has to know the modules above it (docs/ARCHITECTURE.md
// "Layers").
#pragma once

#include <vector>

#include "lockstep/num/suites.hpp"
#include "lockstep/ops/suites.hpp"
#include "lockstep/verify/report.hpp"

namespace lockstep::verify {

inline const std::vector<Suite>& suites() {
  static const std::vector<Suite> all = {
      {"ieee", "IEEE-754 binary32 oracle vs CPU and MPFR; elementary functions' ulp error",
       [](const Options& o) {
         return std::vector<Table>{num::verify_primitives(o), num::verify_elementary(o)};
       }},
      {"reduce", "canonical reductions across thread counts; hashing and RNG known answers",
       [](const Options& o) { return std::vector<Table>{num::verify_reductions(o)}; }},
      {"ops", "op backwards vs finite differences, float vs double, algebra; mutants rejected",
       [](const Options& o) { return ops::verify_ops(o); }},
  };
  return all;
}

}  // namespace lockstep::verify
