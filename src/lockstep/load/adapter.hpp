// LoRA adapters in PEFT's format (docs/LORA.md, "Adapters (PEFT format)"):
// a directory holding
//   adapter_config.json        {"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": [...],
//                               "lora_dropout": 0.05, "bias": "none", "task_type": "CAUSAL_LM",
//                               "base_model_name_or_path": "...", "use_rslora": false, ...}
//   adapter_model.safetensors  base_model.model.<module>.lora_A.weight [r, in]
//                              base_model.model.<module>.lora_B.weight [out, r]
// (<module> is the base weight's Hugging Face name without ".weight", as
// model::LoraTensor holds it). lockstep writes F32; it reads F32, F16 and BF16
// (widened exactly). What PEFT's config may say that changes the computation
// and lockstep does not compute (DoRA, per-module rank or alpha patterns,
// a trained bias, modules saved whole) is refused by name, never ignored.
//
// Also here: the checks of an adapter against a loaded base (every module a
// weight of the base, in/out its columns/rows) and the merge of an adapter
// into a float base's weights.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/io/safetensors.hpp"
#include "lockstep/model/lora.hpp"
#include "lockstep/model/model.hpp"

namespace lockstep::load {

inline constexpr const char* kAdapterConfigFile = "adapter_config.json";
inline constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";

// PEFT's tensor names of a module: "base_model.model." + module + ".lora_A.weight" (".lora_B.weight").
std::string peft_lora_a_name(const std::string& module);
std::string peft_lora_b_name(const std::string& module);

// A rank beyond this is no low-rank adapter (and keeps rank·in from overflowing).
inline constexpr std::uint64_t kMaxAdapterRank = 1u << 16;

// adapter_config.json's text -> the config. Throws std::runtime_error with one
// line naming `source` and the field (not JSON, peft_type not "LORA", r not a
// positive integer, a refused option set, ...). The fuzz target's entry point.
model::LoraConfig parse_adapter_config(std::string_view json, const std::string& source);
// The config as PEFT's LoraConfig.save_pretrained writes it (its field names;
// only fields PEFT's LoraConfig knows, so every PEFT 0.x loads it).
std::string adapter_config_json(const model::LoraConfig& config);

// The adapter's tensors from a parsed adapter_model.safetensors (`config.rank`
// checked against every tensor's shape). Modules in the order of their data
// in the file (the order save_adapter was given); each needs both lora_A and lora_B.
std::vector<model::LoraTensor> adapter_tensors(const io::SafetensorsFile& file, const model::LoraConfig& config);

// Throws std::invalid_argument naming the tensor and the first non-finite
// element ("adapter tensor 'base_model.model...lora_B.weight' holds nan at 17").
void check_adapter_finite(const model::Adapter& adapter);
// Shapes the adapter itself claims: a.size() == rank·in, b.size() == out·rank,
// modules distinct and non-empty. std::invalid_argument naming the module.
void check_adapter_shapes(const model::Adapter& adapter);

// Writes `dir` (created if absent): both files are serialized and every check
// (shapes, finiteness) passes before anything is written, so a refused adapter
// leaves the previous directory exactly as it was; each file is then replaced
// atomically (io/atomic_file.hpp: temporary, fsync, rename), the weights first.
void save_adapter(const std::string& dir, const model::Adapter& adapter);
// Reads a directory written by lockstep or PEFT. One-line std::runtime_error
// naming the file on anything malformed; non-finite values refused.
model::Adapter load_adapter(const std::string& dir);

// The adapter against a loaded base: every module is "<module>.weight" of the
// base, an F32 (or frozen float) matrix [out, in] with the adapter's in and
// out. std::invalid_argument naming the module and what differs.
void validate_adapter(const model::Adapter& adapter, const model::ModelConfig& config,
                      const std::vector<model::Param>& params);

// Folds the adapter into the base weights (F32 parameters), for export:
//   W'[m, k] = W[m, k] + BA[m, k] * s,   BA[m, k] = chain_j(B[m, j] · A[j, k])
// (chain_j: ops::matmul's sequential fma over j = 0..r-1 from +0; s =
// float(model::lora_scale(config)), rounded once). Validates first; a BitNet
// base (ternary projections) is refused. The merged model's logits are NOT the
// unmerged adapter's bits: x·(W + BA·s)ᵀ rounds differently from
// x·Wᵀ + ((x·Aᵀ)·Bᵀ)·s (docs/LORA.md gives the measured difference).
void merge_adapter(const model::Adapter& adapter, const model::ModelConfig& config, std::vector<model::Param>& params);

}  // namespace lockstep::load
