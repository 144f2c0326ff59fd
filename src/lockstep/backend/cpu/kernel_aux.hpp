// Per call site storage a host kernel set may keep from an op's forward for
// the same op's backward: values the backward would otherwise recompute, bit
// for bit the same (a deterministic function of the same inputs). The fast CPU
// kernels keep, e.g., GELU's tanh and BitLinear's dequantized operands; the
// spec kernels (model/spec_kernels.hpp) keep nothing. The CUDA kernel set has
// its device twin, cuda::Aux (backend/cuda/ops.hpp).
//
// It lives here, with the CPU kernel set that fills it, and not in model/:
// a backend includes nothing from model/ (docs/ARCHITECTURE.md "Layers"). The
// engine's default for a kernel set that declares no Aux of its own is this
// one too (model::Aux, model/kernel_aux.hpp). Not in ops/: the op specs are
// pure functions that keep nothing between forward and backward.
#pragma once

#include <vector>

namespace lockstep::cpu {

struct Aux {
  std::vector<float> a, b;
  float s = 0.0f;
};

}  // namespace lockstep::cpu
