// LoRA adapters inside a model (docs/LORA.md): the adapter tensors as extra
// trainable parameters of the model, the base frozen, and the settings a pass
// applies them with.
//
// An adapted projection `module` ("model.layers.3.self_attn.q_proj") gets two
// F32 parameters appended to Model::params():
//   module + ".lora_A.weight"  [r, in]   PEFT's init: Kaiming-uniform as
//                                        torch.nn.init.kaiming_uniform_(a=sqrt(5)),
//                                        i.e. U(-1/sqrt(in), 1/sqrt(in)), from
//                                        num::rng::uniform(seed, FNV-1a(name), i)
//   module + ".lora_B.weight"  [out, r]  zero
// and every other parameter becomes frozen (trainable = false, grad empty).
// The engine (transformer.hpp, lora_branch.hpp) finds the adapter tensors by
// these names and computes, for the projection's input x and output y:
//   xd = dropout(x)  (training with p > 0; else xd = x)
//   y  = base(x) + ((xd·Aᵀ)·Bᵀ) * s       ops::LoraLinear's expression
// with s = T(lora_scale(config)) (alpha/r, rsLoRA alpha/sqrt(r)).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/model/config.hpp"
#include "lockstep/model/lora.hpp"
#include "lockstep/model/model.hpp"

namespace lockstep::model {

// The projections a config's targets name, in parameter order: HF module
// names. Throws std::invalid_argument for a target that is not one of
// q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, or for a
// GPT-2 config (its fused c_attn has no such modules).
std::vector<std::string> lora_modules(const ModelConfig& cfg, const LoraConfig& lora);

// Appends the adapter tensors (initialized as above from `seed`) and freezes
// the rest. Throws if the model already has adapter tensors or rank is 0.
void add_lora_params(std::vector<Param>& params, const ModelConfig& cfg, const LoraConfig& lora,
                     std::uint64_t seed);

// Freezes every parameter: trainable = false and its gradient buffer released
// (a frozen parameter holds its value only; no kernel writes its gradient:
// transformer.hpp). add_lora_params does this to the base; a caller that
// knows the base will be frozen may do it first, before Model::init, so the
// initialization touches no gradients.
void freeze(std::vector<Param>& params);

// Whether `name` is one of a bitnet model's BitLinear projection weights
// (q/k/v/o_proj, gate/up/down_proj of a block).
bool is_bitlinear_weight(const ModelConfig& cfg, std::string_view name);

// A frozen ternary base held as what it is (docs/LORA.md, "The base held as
// codes"): every frozen F32 BitLinear projection of a bitnet model becomes a
// TERNARY2 parameter holding the codes and scale its BitLinear quantizer
// (ops::quantize_ternary: scale = max(mean|W|, 1e-5), code = clamp(floor(w /
// scale + 1/2))) gives, and its floats are released. The model's passes on the
// codes give the F32 masters' bits (only a model that runs them:
// Model::runs_ternary_codes; for others, and for a trainable or non-bitnet
// parameter, nothing changes). Returns the number of parameters converted.
std::size_t hold_frozen_ternary_as_codes(Model& model);

// Whether a parameter name is an adapter tensor's.
bool is_lora_param(const std::string& name);

// The adapter tensors of a model as data (model/lora.hpp), and back: the
// tensors must match the model's adapted modules and shapes (throws naming the
// first that does not).
Adapter adapter_of(const std::vector<Param>& params, const LoraConfig& lora);
void set_adapter(std::vector<Param>& params, const Adapter& adapter);

// The dropout keep-mask of one projection input (element i of the pass's
// [rows, in] input): uniform(seed, stream, i) >= p, with
// stream = FNV-1a-64 of "lora.dropout/<pass>/<module>". The same on every device.
std::uint64_t lora_dropout_stream(std::uint64_t pass, const std::string& module);

}  // namespace lockstep::model
