// Model configurations: the three families lockstep trains, named presets, and
// Hugging Face style config.json in both directions (so a checkpoint's
// config.json loads in transformers' GPT2LMHeadModel / LlamaForCausalLM /
// BitNetForCausalLM).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::model {

enum class Family {
  Gpt2,    // LayerNorm, GELU (tanh), learned positions, biases, tied embeddings
  Llama,   // RMSNorm, RoPE, SwiGLU, grouped-query attention, no biases
  Bitnet,  // RMSNorm + attention/FFN sub-norms, ReLU²-gated FFN, RoPE, BitLinear
};

enum class RopeLayout {
  RotateHalf,   // HF LLaMA: pairs (i, i + d/2)
  Interleaved,  // GPT-J / Meta reference: pairs (2i, 2i + 1)
};

// How the linear layers compute (ops/units.hpp, docs/UNITS.md): the float
// product, or the int8 units (forward through Int8Linear; with unit_backward
// its dx and dW as well). Part of the run: it changes every bit after the
// first linear layer.
enum class LinearMode {
  Float,  // ops::Linear (the default)
  Units,  // ops::Int8Linear
};

// How attention computes (ops/unit_attention.hpp, docs/UNITS.md): the float
// flash attention, or QKᵀ and P·V through int8 units (a run's choice, as the
// linear mode; decoding keeps the float attention and refuses a units model).
enum class AttentionMode {
  Float,  // ops::Attention (the default)
  Units,  // ops::UnitAttention
};

struct ModelConfig {
  Family family = Family::Gpt2;
  std::int64_t vocab_size = 0;
  std::int64_t max_seq = 0;      // context length (positions)
  std::int64_t d_model = 0;      // hidden size
  std::int64_t n_layer = 0;
  std::int64_t n_head = 0;
  std::int64_t n_kv_head = 0;    // = n_head unless grouped-query attention
  std::int64_t head_dim = 0;     // usually d_model / n_head
  std::int64_t d_ff = 0;         // FFN inner size
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;   // Llama, Bitnet
  RopeLayout rope_layout = RopeLayout::RotateHalf;
  bool tie_embeddings = true;
  std::int64_t bos_token = -1, eos_token = -1;  // -1: none
  // The linear layers (not an architecture field: a checkpoint trained with
  // units records it in config.json as lockstep_linear, and reloads with it).
  // Units: every linear layer of the blocks (GPT-2 c_attn, c_proj, c_fc,
  // c_proj; LLaMA q/k/v/o, gate/up/down); the LM head only with units_head.
  LinearMode linear = LinearMode::Float;
  bool unit_backward = false;  // units: dx and dW through int8 products too
  bool units_head = false;     // units: the LM head too
  AttentionMode attention = AttentionMode::Float;  // lockstep_attention in config.json (off the default)

  // Throws std::invalid_argument naming the field when the shapes do not fit
  // together (heads not dividing d_model, kv heads not dividing heads, ...).
  void validate() const;
  // Number of trainable parameters (tied embeddings counted once).
  std::int64_t parameter_count() const;
  // One line: "gpt2 12L d768 h12 ff3072 vocab50257 ctx1024 (124.4M params)".
  std::string summary() const;
};

const char* family_name(Family f);
const char* linear_mode_name(LinearMode m);  // "float", "units"
const char* attention_mode_name(AttentionMode m);  // "float", "units"

// Named presets: gpt2-124m (GPT-2 small's exact shapes), gpt2-tiny, gpt2-small-char (tiny
// presets sized for CPU training), llama-tiny, bitnet-b1.58-2b (the 2B4T shapes), bitnet-tiny;
// gpt2-micro, llama-micro, bitnet-micro: test sizes (vocab 256, d 64, 2 layers).
// Throws std::invalid_argument listing the known names on an unknown one.
ModelConfig preset(const std::string& name);
std::vector<std::string> preset_names();

// Hugging Face config.json (as a JSON string), both directions. Reading
// accepts model_type gpt2, llama and bitnet and throws std::runtime_error on a
// missing/ill-typed field or an unsupported model_type, naming it.
std::string to_hf_config_json(const ModelConfig& c);
ModelConfig from_hf_config_json(const std::string& json, const std::string& what = "config.json");

}  // namespace lockstep::model
