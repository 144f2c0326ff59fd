// Every op lockstep's models need, in one typed list. The registry
// (src/lockstep/ad/registry.cpp), `lockstep verify ops` and the tests iterate
// this list: adding an op here is all it takes to have it gradient-checked,
// algebra-checked and mutation-tested (docs/VERIFIED_AD.md).
#pragma once

#include "lockstep/ad/op_concepts.hpp"
#include "lockstep/ops/activation.hpp"
#include "lockstep/ops/attention.hpp"
#include "lockstep/ops/embedding.hpp"
#include "lockstep/ops/linear.hpp"
#include "lockstep/ops/lora.hpp"
#include "lockstep/ops/norm.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/ops/rope.hpp"
#include "lockstep/ops/softmax.hpp"
#include "lockstep/ops/unit_attention.hpp"
#include "lockstep/ops/units.hpp"

namespace lockstep::ops {

using AllOps = ad::OpList<Embedding, LearnedPositions, Linear, LayerNorm, RmsNorm, Gelu, ReluSqMul,
                          SwiGlu, Softmax, Attention, Rope, ResidualAdd, CrossEntropy, BitLinear,
                          Int8Linear, LoraLinear, UnitAttention>;

// The ops the models run, each with its kernels in every kernel set
// (ops/kernel_args.hpp, ad/kernel_set.hpp): what the GPU gates and the CPU-kernel
// bit tests iterate. model/kernel_set.hpp checks that every op of every layer
// is in this list.
using ModelOps = ad::OpList<Embedding, LearnedPositions, Linear, BitLinear, LayerNorm, RmsNorm, Gelu, SwiGlu,
                            ReluSqMul, ResidualAdd, Rope, Attention, CrossEntropy, Int8Linear,
                            UnitAttention>;

}  // namespace lockstep::ops
