// A LoRA adapter as data: what training produces, what PEFT's files hold, and
// what a model with adapters reads. This header is the meeting point of the
// LoRA work: model/ (adapted layers), train/ (finetuning) and load/ (PEFT's
// adapter_config.json + adapter_model.safetensors) all speak it, and none of
// them owns the others' representation. The numerics are ops::LoraLinear's
// (ops/lora.hpp): y = base(x) + ((x·Aᵀ)·Bᵀ) * s.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace lockstep::model {

struct LoraConfig {
  std::size_t rank = 8;          // r
  double alpha = 16.0;           // lora_alpha
  double dropout = 0.05;         // lora_dropout (counter-based: the same mask on every device)
  bool rslora = false;           // use_rslora: s = alpha / sqrt(r) instead of alpha / r
  // PEFT's target_modules: the projection names of a LLaMA/BitNet layer
  // (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj).
  std::vector<std::string> targets{"q_proj", "v_proj"};
  std::string base_model;        // base_model_name_or_path, as given
};

// The scale s of the update from the config (the op rounds it to float once).
inline double lora_scale(const LoraConfig& config) {
  return config.rslora ? config.alpha / std::sqrt(static_cast<double>(config.rank))
                       : config.alpha / static_cast<double>(config.rank);
}

// One adapted projection. `module` is the base weight's Hugging Face name
// without ".weight" ("model.layers.3.self_attn.q_proj"); PEFT's tensor names
// are "base_model.model." + module + ".lora_A.weight" / ".lora_B.weight".
struct LoraTensor {
  std::string module;
  std::size_t in = 0;   // K: the base weight's columns
  std::size_t out = 0;  // M: the base weight's rows
  std::vector<float> a;  // lora_A, [rank, in] row-major
  std::vector<float> b;  // lora_B, [out, rank] row-major
};

struct Adapter {
  LoraConfig config;
  std::vector<LoraTensor> tensors;  // in the base model's parameter order
};

}  // namespace lockstep::model
