// `lockstep verify ieee`, first table: the binary32 oracle (ieee.hpp) against the
// CPU's arithmetic and against MPFR, the proof that the comparison has teeth
// (deliberately wrong mutants of the oracle are caught), and the rate at which
// the oracle rejects plausible wrong mirrors. The same harness functions
// (ieee_check.hpp) back tests/ieee/.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "lockstep/num/ieee_check.hpp"
#include "lockstep/num/suites.hpp"

namespace lockstep::num {

verify::Table verify_primitives(const verify::Options& opt) {
  using namespace ieee::check;
  // 2*10^5 cases per op per reference, per mutant and per mirror regime at effort 1
  // (about 1.5 s in all).
  const double wanted = 2e5 * opt.effort;
  const std::uint64_t n = wanted < 1000.0 ? 1000 : static_cast<std::uint64_t>(wanted);

  verify::Table t{fmt::format("IEEE-754 binary32 oracle (integer arithmetic) vs cpu{}",
                              mpfr_available() ? " and mpfr" : " (MPFR not built: no mpfr rows)"),
                  {"op", "reference", "cases", "mismatches", "max ulp / verdict"},
                  {}};

  const std::string env = cpu_environment_problem();
  t.add({"fp environment", "cpu", "-", "-", env.empty() ? "nearest, no FTZ/DAZ" : "wrong"}, env.empty(), env);

  // 1. The oracle against each reference: zero disagreements required.
  for (Reference ref : {Reference::cpu, Reference::mpfr}) {
    for (Op op : all_ops()) {
      if (!has_reference(op, ref)) continue;
      const CheckStats s = check_op(op, ref, n, opt.seed);
      t.add({op_name(op), reference_name(ref), verify::fmt_count(s.cases), verify::fmt_count(s.mismatches),
             format_distance(s.max_distance)},
            s.mismatches == 0 && s.cases == n, s.first_mismatch);
    }
  }

  // 2. Teeth: the same comparison against the CPU must catch each planted bug.
  for (const auto& [flaw, op] : mutant_cases()) {
    const CheckStats s = check_op(op, Reference::cpu, n, opt.seed, flaw);
    t.add({fmt::format("{} [mutant: {}]", op_name(op), ieee::flaw_name(flaw)), "cpu", verify::fmt_count(s.cases),
           verify::fmt_count(s.mismatches),
           s.mismatches > 0 ? fmt::format("caught, max {}", format_distance(s.max_distance)) : "NOT caught"},
          s.mismatches > 0, "the harness did not notice a deliberately wrong oracle");
  }

  // 3. Wrong mirrors: the fraction of inputs on which the oracle rejects them.
  for (Mirror m : all_mirrors()) {
    const std::vector<MirrorRegime> regimes = mirror_regimes(m);
    for (std::size_t r = 0; r < regimes.size(); ++r) {
      const MirrorStats s = check_mirror(m, r, n, opt.seed);
      const std::string verdict = fmt::format("rejected {:.3g}%{}", 100.0 * s.fraction(),
                                              s.must_reject ? "" : " (measured)");
      t.add({fmt::format("{} [{}]", mirror_name(m), s.regime), "oracle", verify::fmt_count(s.cases),
             verify::fmt_count(s.rejected), verdict},
            !s.must_reject || s.rejected > 0, "a wrong mirror passed on every input of a regime aimed at its flaw");
    }
  }
  return t;
}

}  // namespace lockstep::num
