// Checkpoints: the weights in Hugging Face's format (so transformers'
// GPT2LMHeadModel / LlamaForCausalLM load them) and the training state beside
// them, written so that a crash never leaves a half-written checkpoint in use.
//
// A run directory:
//   <run>/latest                    one line: the name of the newest complete checkpoint
//   <run>/step-00000400/            one checkpoint (step = optimizer updates applied)
//       config.json                 HF config (model::to_hf_config_json)
//       model.safetensors           weights under HF names, F32, metadata {"format": "pt"}
//       tokenizer.json              HF tokenizer.json of the run's BPE vocabulary
//       optimizer.safetensors       AdamW moments "<name>.exp_avg", "<name>.exp_avg_sq"
//                                   (lockstep's layout), metadata {"format": "lockstep-adamw", "step": N}
//       trainer_state.json          step, seed, tokens seen, weight/optimizer hashes,
//                                   the run config (TrainConfig JSON), the corpus description
//
// Writing order: every file of the step directory through io::write_file_atomic
// (temp + fsync + rename), trainer_state.json last, then `latest` (atomically).
// A crash at any point leaves `latest` naming a complete checkpoint; a
// directory without trainer_state.json is incomplete and never loaded as one.
// Older step directories beyond `keep` are removed after `latest` moves.
// Parameters or moments holding NaN/Inf are refused before anything is written.
//
// HF layout differences handled here (and only here):
//   * GPT-2's Conv1D stores [in, out]: c_attn, c_proj (attention and MLP) and
//     c_fc weights are transposed on save and load (lockstep keeps [out, in]).
//   * GPT-2's lm_head.weight is tied to transformer.wte.weight: not written
//     (GPT2LMHeadModel ties it on load); accepted and ignored when a file has it.
//   * LLaMA/BitNet: HF's RoPE is rotate-half. A model configured with the
//     interleaved layout has its q_proj/k_proj rows permuted to rotate-half
//     order on save (and back on load), as HF's convert_llama_weights_to_hf.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/model/model.hpp"

namespace lockstep::train {

// AdamW's state: moments per Param (same index as Model::params(); empty
// vectors for frozen parameters) and the number of updates applied.
struct OptimizerState {
  std::int64_t step = 0;
  std::vector<std::vector<float>> m, v;
  void init(const model::Model& model);  // zeros, step 0
};

struct CheckpointMeta {
  std::int64_t step = 0;
  std::uint64_t seed = 0;
  std::uint64_t tokens_seen = 0;
  double elapsed_seconds = 0;       // training time summed over the run's sessions
  std::string run_config_json;      // TrainConfig::to_json()
  std::string corpus_json;          // the prepared corpus' description (may be "{}")
  std::uint64_t weights_hash = 0;   // filled in by save/load
  std::uint64_t optimizer_hash = 0;
};

// XXH3 over every parameter's (f32, shape, values) record in params() order
// (num::Hasher): the identity of a model's weights.
std::uint64_t weights_hash(const model::Model& model);
std::uint64_t optimizer_hash(const model::Model& model, const OptimizerState& opt);

// Throws std::runtime_error naming the first tensor and index holding a NaN or
// Inf (parameters, then moments when `opt` is given), prefixed by `what`.
void check_finite(const model::Model& model, const OptimizerState* opt, const std::string& what);

// One parameter as HF stores it (shape and values), and back into
// lockstep's layout (throws naming the tensor on a shape mismatch).
struct HfTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> value;
};
HfTensor to_hf_tensor(const model::ModelConfig& cfg, const model::Param& p);
std::vector<float> from_hf_tensor(const model::ModelConfig& cfg, const model::Param& p, const HfTensor& t);

// config.json + model.safetensors (+ tokenizer.json when non-empty) into `dir`
// (created), each atomically. Refuses non-finite weights.
void save_hf_model(const std::string& dir, const model::Model& model, const std::string& tokenizer_json = "");
// Reads dir/model.safetensors into an existing model of the same config
// (every parameter must be present with its HF shape). Extra tensors are an
// error, except GPT-2's tied lm_head.weight and its old attn.bias buffers.
void load_hf_weights(const std::string& dir, model::Model& model);

// Saves a full checkpoint as <run_dir>/step-NNNNNNNN, moves `latest`, prunes
// to `keep` checkpoints. Returns the step directory. meta.step names it.
std::string save_checkpoint(const std::string& run_dir, const model::Model& model, const OptimizerState& opt,
                            CheckpointMeta meta, const std::string& tokenizer_json, int keep = 2);

// A run directory (follows `latest`) or a checkpoint directory -> the
// checkpoint directory. Throws explaining what was expected.
std::string resolve_checkpoint(const std::string& path);

struct LoadedCheckpoint {
  std::string dir;
  std::unique_ptr<model::Model> model;
  OptimizerState opt;        // empty unless loaded with the optimizer
  CheckpointMeta meta;       // defaults when the directory has no trainer_state.json
  std::string tokenizer_json;  // "" when absent
};

// Loads config.json, model.safetensors (into model::make_cpu_model), and, with
// `training`, optimizer.safetensors and trainer_state.json — whose recorded
// hashes must match what was loaded. `path` as resolve_checkpoint.
LoadedCheckpoint load_checkpoint(const std::string& path, bool training);
// The same into a model the caller made (tests; a model from another factory).
LoadedCheckpoint load_checkpoint_into(const std::string& path, std::unique_ptr<model::Model> model, bool training);

}  // namespace lockstep::train
