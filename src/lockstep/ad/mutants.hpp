// The gradient checker's teeth: wrong backwards handed to the checker, each of
// which it must reject, and faithful backwards (controls), each of which it
// must accept. A checker that never rejects anything proves nothing.
//
// Generic mutants, applied to every op: the zero gradient, the negated
// gradient, the identity (the cotangent passed through as the gradient of
// every input shaped like the output) and the gradient scaled by (1 + 1e-5)
// (the checker's resolution). Specific mutants: the bugs backwards really
// have — wrong RoPE sign, a skipped softmax backward in attention (dAttn used
// as dScores), ReLU² missing its factor 2, RMSNorm/LayerNorm missing the mean
// term, a transposed weight gradient, a LoRA gradient flowing into the frozen
// base, an STE through the latent instead of the quantized weights, a
// cross-entropy without the one-hot, an embedding scatter that overwrites.
// Each specific mutant is a switch in a re-implementation whose faithful
// setting is run too: its acceptance shows the rejection is the bug's doing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/ad/gradcheck.hpp"

namespace lockstep::ad {

struct MutantResult {
  std::string op;
  std::string mutant;
  bool expect_reject = true;  // false: a control (faithful backward): must be accepted
  bool rejected = false;
  bool equivalent = false;  // computed exactly the true gradients on every case
  bool may_be_equivalent = false;  // the generic identity: it IS the true backward of some ops
  std::uint64_t entries = 0;       // gradient entries compared
  double max_rel = 0.0;            // the largest relative error the checker measured
  std::string reason;              // the first failure (field, values) or contract violation
  // Mutants rejected, controls accepted. A mutant that turns out equivalent
  // (no bug for this op: the identity of a residual add) must be accepted, and
  // only the generic identity may be equivalent.
  bool as_expected() const {
    if (equivalent) return expect_reject ? may_be_equivalent && !rejected : !rejected;
    return rejected == expect_reject;
  }
};

std::vector<MutantResult> run_mutants(const RunOptions& o);

}  // namespace lockstep::ad
