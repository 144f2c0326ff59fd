// Per call site storage a kernel set may keep from an op's forward for the
// same op's backward: values the backward would otherwise recompute, bit for
// bit the same (a deterministic function of the same inputs). The spec
// kernels keep nothing; the fast CPU kernels keep, e.g., GELU's tanh and
// BitLinear's dequantized operands.
#pragma once

#include <vector>

namespace lockstep::model {

struct Aux {
  std::vector<float> a, b;
  float s = 0.0f;
};

}  // namespace lockstep::model
