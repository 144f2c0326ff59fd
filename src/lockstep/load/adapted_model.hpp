// A base model with a LoRA adapter applied, unmerged, for inference
// (`lockstep generate --adapter`, `lockstep chat --adapter`). Two ways, never
// a merge, the first wherever it applies:
//
//  * the model's own LoRA layers (model/lora_params.hpp, model/lora_branch.hpp:
//    what `lockstep finetune` trains): the adapter tensors appended to the
//    base's parameters under their model names (`<module>.lora_A.weight`,
//    `.lora_B.weight`), everything frozen, the run's scale set (no dropout).
//    Every adapted projection computes y = base(x) + ((x·Aᵀ)·Bᵀ)·s, ops::LoraLinear's
//    expression, on the model's kernel set; next_logits and the KV-cache decode
//    mode (model/decode.hpp) give the same bits. For a LLaMA or BitNet base
//    whose adapted modules are all q/k/v/o/gate/up/down_proj, on the CPU or CUDA
//    model.
//  * otherwise (GPT-2's c_attn/c_proj/c_fc, an lm_head), the spec stand-in:
//    every adapted projection calls ops::LoraLinear::forward, the op's
//    specification itself, in place of the ops::Linear kernel; every other op
//    is the CPU model's kernel. CPU only, forward only, slowly (the spec's single
//    thread on the adapted projections, unpacked), float ops::Linear projections
//    only: a BitNet base or a module that is no linear projection (an
//    embedding) is refused by name.
//
// Either way an adapter with B = 0 gives the base model's logits bit for bit,
// and a saved and reloaded adapter the same logits bit for bit.
#pragma once

#include <memory>
#include <string>

#include "lockstep/load/model_file.hpp"
#include "lockstep/model/lora.hpp"
#include "lockstep/model/model.hpp"

namespace lockstep::load {

// The base with the adapter (validated against it first: validate_adapter):
// the model's LoRA layers on `device` where they adapt every module, else the
// spec stand-in ("cpu" only: std::invalid_argument otherwise, saying so).
std::unique_ptr<model::Model> make_adapted_model(LoadedModel base, model::Adapter adapter,
                                                 const std::string& device = "cpu");

// The spec stand-in alone, whatever the modules (the CPU; the reference the
// LoRA layers' bits are checked against: tests/load/adapter_join_test.cpp).
std::unique_ptr<model::Model> make_spec_adapted_model(LoadedModel base, model::Adapter adapter);

// Whether the model's LoRA layers adapt every module of `adapter` on a base of `cfg`.
bool model_layers_adapt(const model::ModelConfig& cfg, const model::Adapter& adapter);

// The float scale LoraLinear applies for this config: float(alpha / r), or
// with use_rslora float(alpha / sqrt(r)) (model::lora_scale, rounded once).
float adapter_scale(const model::LoraConfig& config);

}  // namespace lockstep::load
