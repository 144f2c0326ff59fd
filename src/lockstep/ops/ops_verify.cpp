// `lockstep verify ops`: every op's gradient check, float-vs-double agreement
// and algebraic identities (one row per op and check), then the mutants: the
// wrong backwards the checker must reject and the faithful ones it must accept.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lockstep/ad/mutants.hpp"
#include "lockstep/ad/registry.hpp"
#include "lockstep/ops/suites.hpp"

namespace lockstep::ops {

std::vector<verify::Table> verify_ops(const verify::Options& opt) {
  ad::RunOptions o;
  o.seed = opt.seed;
  o.effort = opt.effort;

  verify::Table checks{
      fmt::format("ops: backward vs central finite differences (double), float vs double, "
                  "algebraic identities ({} ops, {} draw(s) per case)",
                  ad::op_registry().size(), ad::trials_of(o.effort)),
      {"op", "check", "cases", "max abs err", "max rel err", "tolerance"},
      {}};
  for (const ad::OpEntry& e : ad::op_registry())
    for (const ad::CheckResult& r : e.run(o))
      checks.add({r.op, r.check, verify::fmt_count(r.cases), verify::fmt_sci(r.max_abs),
                  verify::fmt_sci(r.max_rel), r.exact ? (r.bitwise ? "bits" : "exact") : verify::fmt_sci(r.tol)},
                 r.pass, r.note);

  verify::Table mutants{"ops: mutants (wrong backwards must be REJECTED, faithful ones accepted)",
                        {"op", "backward", "entries", "max rel err", "verdict", "expected"},
                        {}};
  for (const ad::MutantResult& r : ad::run_mutants(o)) {
    const bool must_reject = r.expect_reject && !(r.equivalent && r.may_be_equivalent);
    mutants.add({r.op, r.mutant, verify::fmt_count(r.entries), verify::fmt_sci(r.max_rel),
                 r.rejected ? "REJECTED" : "accepted",
                 must_reject ? "reject" : (r.equivalent && r.expect_reject ? "accept (= true backward)"
                                                                            : "accept")},
                r.as_expected(), r.rejected ? r.reason : std::string("accepted"));
  }
  return {checks, mutants};
}

}  // namespace lockstep::ops
