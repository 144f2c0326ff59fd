// `lockstep verify elementary`: lockstep's elementary functions (elementary.hpp)
// against MPFR (or glibc's double libm when MPFR is not built) on sampled inputs,
// their bit-identity with the same expressions evaluated on the integer IEEE
// oracle, and the proof that both checks have teeth (wrong implementations and a
// wrong oracle are rejected). The same pieces (elementary_ref.hpp) back
// tests/elementary/ and the exhaustive table of bench/ulp.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "lockstep/num/elementary_ref.hpp"
#include "lockstep/num/suites.hpp"

namespace lockstep::num {

namespace {
std::string arg_text(const elem::FnSpec& s, float x, float y) {
  return s.arity == 2 ? fmt::format("x={} y={}", elem::hexf(x), elem::hexf(y)) : elem::hexf(x);
}
std::size_t scaled(double base, double effort, std::size_t floor) {
  const double v = base * effort;
  return v < static_cast<double>(floor) ? floor : static_cast<std::size_t>(v);
}
}  // namespace

verify::Table verify_elementary(const verify::Options& opt) {
  const std::size_t n = scaled(20000, opt.effort, 1000);        // per function, vs the reference
  const std::size_t n_bits = scaled(2000, opt.effort, 200);     // per function, vs the oracle
  const std::size_t n_teeth = scaled(10000, opt.effort, 1000);  // per mutant
  const std::string ref = elem::best_ref_name();

  verify::Table t{"elementary functions: max ulp error on sampled inputs, bit-identity on the IEEE oracle",
                  {"function", "reference", "cases", "max ulp", "bound", "argmax"},
                  {}};

  // 1. Accuracy: max ulp error <= the documented bound.
  for (const elem::FnSpec& s : elem::all_fns()) {
    const elem::Sample smp = elem::sample_inputs(s.fn, n, opt.seed);
    const elem::Measure m = elem::measure(elem::lockstep_impl(s.fn), s.fn, smp);
    const bool ok = m.max_ulp <= s.bound;
    t.add({s.name, ref, verify::fmt_count(m.cases), fmt::format("{:.4f}", m.max_ulp), fmt::format("{:.2f}", s.bound),
           arg_text(s, m.argmax_x, m.argmax_y)},
          ok,
          ok ? "" : fmt::format("got {} exact {:a}", elem::hexf(m.argmax_got), m.argmax_exact));
  }

  // 2. Bit-determinism: the same templates with every primitive computed by the
  //    integer oracle (num/ieee.hpp) give identical bits.
  for (const elem::FnSpec& s : elem::all_fns()) {
    const elem::Sample smp = elem::sample_inputs(s.fn, n_bits, opt.seed + 1);
    const elem::BitCheck c = elem::compare_with_oracle(s.fn, smp);
    t.add({fmt::format("{} (bits)", s.name), "same expression on num::ieee", verify::fmt_count(c.cases),
           fmt::format("{} differ", c.differing), "0 differ",
           c.differing ? arg_text(s, c.first_x, c.first_y) : "-"},
          c.differing == 0,
          c.differing ? fmt::format("hardware {} oracle {}", elem::hexf(c.first_hw), elem::hexf(c.first_oracle)) : "");
  }

  // 3. Teeth. (a) Wrong implementations exceed their function's bound.
  for (const elem::Mutant& mu : elem::mutants()) {
    const elem::FnSpec& s = elem::spec(mu.fn);
    const elem::Sample smp = elem::sample_inputs(s.fn, n_teeth, opt.seed + 2);
    const elem::Measure m = elem::measure(mu.impl, s.fn, smp);
    const bool caught = m.max_ulp > s.bound;
    t.add({fmt::format("[mutant] {}", mu.name), ref, verify::fmt_count(m.cases),
           fmt::format("{:.4g}", m.max_ulp), fmt::format("> {:.2f}", s.bound),
           caught ? arg_text(s, m.argmax_x, m.argmax_y) : "NOT caught"},
          caught, caught ? "" : "a deliberately wrong implementation passed the measurement");
  }
  // (b) A wrong oracle (one rounding flaw) is noticed by the bit comparison, on
  //     random inputs and on the tie-prone few-bit ones (ties-away shows only there).
  for (ieee::Flaw flaw : {ieee::Flaw::ties_away, ieee::Flaw::flush_subnormals, ieee::Flaw::no_sticky}) {
    std::uint64_t cases = 0, differing = 0;
    for (const elem::FnSpec& s : elem::all_fns()) {
      for (const elem::Sample& smp : {elem::sample_inputs(s.fn, n_bits, opt.seed + 3), elem::tie_prone_inputs(s.fn)}) {
        const elem::BitCheck c = elem::compare_with_oracle(s.fn, smp, flaw);
        cases += c.cases;
        differing += c.differing;
      }
    }
    t.add({fmt::format("[mutant oracle] {}", ieee::flaw_name(flaw)), "all functions, bitwise",
           verify::fmt_count(cases), fmt::format("{} differ", differing), "> 0 differ",
           differing ? "caught" : "NOT caught"},
          differing > 0, differing ? "" : "a wrong oracle went unnoticed");
  }
  return t;
}

}  // namespace lockstep::num
