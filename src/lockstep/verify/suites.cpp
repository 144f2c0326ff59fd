// The one list of verification suites. `lockstep verify` runs them in this
// order; `lockstep verify NAME...` runs the named ones.
#include "lockstep/verify/suites.hpp"

namespace lockstep::verify {

const std::vector<Suite>& suites() {
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
