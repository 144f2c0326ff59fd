// A base model with a LoRA adapter applied, unmerged, for inference
// (`lockstep generate --adapter`, `lockstep chat --adapter`): every adapted
// projection computes ops::LoraLinear::forward (ops/lora.hpp),
//   y = (x·Wᵀ + b) + ((x·Aᵀ)·Bᵀ) * s,
// by calling the op's specification; every other op is the CPU model's kernel
// (cpu::OpKernels, the same bits as the specifications). So the logits are the
// composition of the verified op specs with LoraLinear at the adapted places:
// an adapter with B = 0 gives the base model's logits bit for bit, and a saved
// and reloaded adapter the same logits bit for bit.
//
// This is load/'s stand-in until the adapted layers of the model work (the
// LoRA steps in model/families/, `lockstep finetune`) serve inference: it runs
// on the CPU, forward only (no training, no init), slowly (the spec's single
// thread on the adapted projections, unpacked), and it adapts ops::Linear
// projections only: a BitNet base (BitLinear) or a module that is no linear
// projection (an embedding) is refused by name. It never merges.
#pragma once

#include <memory>
#include <string>

#include "lockstep/load/model_file.hpp"
#include "lockstep/model/lora.hpp"
#include "lockstep/model/model.hpp"

namespace lockstep::load {

// The base with the adapter (validated against it first: validate_adapter).
// device: "cpu" only (std::invalid_argument otherwise, saying so).
std::unique_ptr<model::Model> make_adapted_model(LoadedModel base, model::Adapter adapter,
                                                 const std::string& device = "cpu");

// The float scale LoraLinear applies for this config: float(alpha / r), or
// with use_rslora float(alpha / sqrt(r)) (model::lora_scale, rounded once).
float adapter_scale(const model::LoraConfig& config);

}  // namespace lockstep::load
