#include "lockstep/model/config.hpp"

#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace lockstep::model {

const char* family_name(Family f) {
  switch (f) {
    case Family::Gpt2: return "gpt2";
    case Family::Llama: return "llama";
    case Family::Bitnet: return "bitnet";
  }
  return "?";
}

const char* linear_mode_name(LinearMode m) { return m == LinearMode::Units ? "units" : "float"; }
const char* attention_mode_name(AttentionMode m) { return m == AttentionMode::Units ? "units" : "float"; }

void ModelConfig::validate() const {
  auto need = [](bool ok, const std::string& msg) {
    if (!ok) throw std::invalid_argument("model config: " + msg);
  };
  need(vocab_size > 0, fmt::format("vocab_size must be > 0, got {}", vocab_size));
  need(max_seq > 0, fmt::format("max_seq must be > 0, got {}", max_seq));
  need(d_model > 0, fmt::format("d_model must be > 0, got {}", d_model));
  need(n_layer > 0, fmt::format("n_layer must be > 0, got {}", n_layer));
  need(n_head > 0, fmt::format("n_head must be > 0, got {}", n_head));
  need(n_kv_head > 0 && n_head % n_kv_head == 0,
       fmt::format("n_kv_head ({}) must divide n_head ({})", n_kv_head, n_head));
  need(head_dim > 0, fmt::format("head_dim must be > 0, got {}", head_dim));
  need(d_ff > 0, fmt::format("d_ff must be > 0, got {}", d_ff));
  need(norm_eps > 0, fmt::format("norm_eps must be > 0, got {}", norm_eps));
  need(linear == LinearMode::Units || !unit_backward, "unit_backward needs the units linear mode (linear = units)");
  need(linear == LinearMode::Units || !units_head, "units_head needs the units linear mode (linear = units)");
  need(family != Family::Bitnet || linear == LinearMode::Float,
       "bitnet's projections are BitLinear: the units linear mode applies to gpt2 and llama");
  if (family == Family::Gpt2) {
    need(n_head * head_dim == d_model,
         fmt::format("gpt2 needs n_head*head_dim == d_model ({}*{} != {})", n_head, head_dim, d_model));
    need(n_kv_head == n_head, "gpt2 has no grouped-query attention (n_kv_head must equal n_head)");
  } else {
    need(head_dim % 2 == 0, fmt::format("RoPE needs an even head_dim, got {}", head_dim));
    need(rope_theta > 0, fmt::format("rope_theta must be > 0, got {}", rope_theta));
  }
}

std::int64_t ModelConfig::parameter_count() const {
  const std::int64_t d = d_model, q = n_head * head_dim, kv = n_kv_head * head_dim;
  std::int64_t n = vocab_size * d;                       // token embedding
  if (!tie_embeddings) n += vocab_size * d;              // separate LM head
  if (family == Family::Gpt2) {
    n += max_seq * d;                                    // learned positions
    const std::int64_t attn = d * 3 * d + 3 * d + d * d + d;   // c_attn, c_proj (+ biases)
    const std::int64_t mlp = d * d_ff + d_ff + d_ff * d + d;   // c_fc, c_proj (+ biases)
    const std::int64_t norms = 2 * 2 * d;                      // ln_1, ln_2 (weight + bias)
    n += n_layer * (attn + mlp + norms) + 2 * d;               // + ln_f
  } else {
    const std::int64_t attn = d * q + 2 * d * kv + q * d;      // q, k, v, o
    const std::int64_t mlp = 3 * d * d_ff;                     // gate, up, down
    std::int64_t norms = 2 * d;                                // input, post-attention
    if (family == Family::Bitnet) norms += q + d_ff;           // attention and FFN sub-norms
    n += n_layer * (attn + mlp + norms) + d;                   // + final norm
  }
  return n;
}

std::string ModelConfig::summary() const {
  std::string s = fmt::format("{} {}L d{} h{}/kv{}x{} ff{} vocab{} ctx{} ({:.1f}M params)", family_name(family), n_layer,
                              d_model, n_head, n_kv_head, head_dim, d_ff, vocab_size, max_seq,
                              static_cast<double>(parameter_count()) / 1e6);
  if (linear == LinearMode::Units)
    s += fmt::format(", int8 units linear{}{}", unit_backward ? " + unit backward" : "", units_head ? " + LM head" : "");
  if (attention == AttentionMode::Units) s += ", int8 units attention";
  return s;
}

namespace {

ModelConfig gpt2(std::int64_t vocab, std::int64_t ctx, std::int64_t d, std::int64_t layers, std::int64_t heads) {
  ModelConfig c;
  c.family = Family::Gpt2;
  c.vocab_size = vocab;
  c.max_seq = ctx;
  c.d_model = d;
  c.n_layer = layers;
  c.n_head = c.n_kv_head = heads;
  c.head_dim = d / heads;
  c.d_ff = 4 * d;
  c.norm_eps = 1e-5;
  c.tie_embeddings = true;
  return c;
}

ModelConfig llama(std::int64_t vocab, std::int64_t ctx, std::int64_t d, std::int64_t layers, std::int64_t heads,
                  std::int64_t kv_heads, std::int64_t ff) {
  ModelConfig c;
  c.family = Family::Llama;
  c.vocab_size = vocab;
  c.max_seq = ctx;
  c.d_model = d;
  c.n_layer = layers;
  c.n_head = heads;
  c.n_kv_head = kv_heads;
  c.head_dim = d / heads;
  c.d_ff = ff;
  c.norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.rope_layout = RopeLayout::RotateHalf;
  c.tie_embeddings = false;
  return c;
}

}  // namespace

std::vector<std::string> preset_names() {
  return {"gpt2-124m",       "gpt2-tiny",   "gpt2-micro",  "llama-tiny", "llama-micro",
          "bitnet-b1.58-2b", "bitnet-tiny", "bitnet-micro"};
}

ModelConfig preset(const std::string& name) {
  ModelConfig c;
  if (name == "gpt2-124m") {
    c = gpt2(50257, 1024, 768, 12, 12);  // GPT-2 small
    c.bos_token = c.eos_token = 50256;
  } else if (name == "gpt2-tiny") {
    c = gpt2(4096, 256, 256, 4, 4);      // trains on 2 CPU cores in minutes
  } else if (name == "gpt2-micro") {
    c = gpt2(256, 64, 64, 2, 2);         // tests
  } else if (name == "llama-tiny") {
    c = llama(4096, 256, 256, 4, 8, 2, 688);
  } else if (name == "llama-micro") {
    c = llama(256, 64, 64, 2, 4, 2, 172);
  } else if (name == "bitnet-b1.58-2b") {
    // microsoft/bitnet-b1.58-2B-4T: 30 layers, hidden 2560, FFN 6912, 20 query / 5 KV heads of 128.
    c = llama(128256, 4096, 2560, 30, 20, 5, 6912);
    c.family = Family::Bitnet;
    c.rope_theta = 500000.0;
    c.tie_embeddings = true;
    c.bos_token = 128000;
    c.eos_token = 128001;
  } else if (name == "bitnet-tiny") {
    c = llama(4096, 256, 256, 4, 8, 2, 688);
    c.family = Family::Bitnet;
    c.rope_theta = 500000.0;
    c.tie_embeddings = true;
  } else if (name == "bitnet-micro") {
    c = llama(256, 64, 64, 2, 4, 2, 172);  // tests
    c.family = Family::Bitnet;
    c.rope_theta = 500000.0;
    c.tie_embeddings = true;
  } else {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument(fmt::format("unknown model preset '{}' (known: {})", name, known));
  }
  c.validate();
  return c;
}

std::string to_hf_config_json(const ModelConfig& c) {
  nlohmann::ordered_json j;
  if (c.family == Family::Gpt2) {
    j["architectures"] = {"GPT2LMHeadModel"};
    j["model_type"] = "gpt2";
    j["vocab_size"] = c.vocab_size;
    j["n_positions"] = c.max_seq;
    j["n_ctx"] = c.max_seq;
    j["n_embd"] = c.d_model;
    j["n_layer"] = c.n_layer;
    j["n_head"] = c.n_head;
    j["n_inner"] = c.d_ff;
    j["activation_function"] = "gelu_new";  // the tanh form
    j["layer_norm_epsilon"] = c.norm_eps;
    j["resid_pdrop"] = 0.0;
    j["embd_pdrop"] = 0.0;
    j["attn_pdrop"] = 0.0;
    j["tie_word_embeddings"] = c.tie_embeddings;
  } else {
    const bool bit = c.family == Family::Bitnet;
    j["architectures"] = {bit ? "BitNetForCausalLM" : "LlamaForCausalLM"};
    j["model_type"] = bit ? "bitnet" : "llama";
    j["vocab_size"] = c.vocab_size;
    j["max_position_embeddings"] = c.max_seq;
    j["hidden_size"] = c.d_model;
    j["intermediate_size"] = c.d_ff;
    j["num_hidden_layers"] = c.n_layer;
    j["num_attention_heads"] = c.n_head;
    j["num_key_value_heads"] = c.n_kv_head;
    j["head_dim"] = c.head_dim;
    j["hidden_act"] = bit ? "relu2" : "silu";
    j["rms_norm_eps"] = c.norm_eps;
    j["rope_theta"] = c.rope_theta;
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["tie_word_embeddings"] = c.tie_embeddings;
    // lockstep's own key: HF LLaMA always uses rotate-half; the interleaved
    // layout is recorded so lockstep reloads what it wrote.
    j["lockstep_rope_layout"] = c.rope_layout == RopeLayout::RotateHalf ? "rotate_half" : "interleaved";
  }
  if (c.bos_token >= 0) j["bos_token_id"] = c.bos_token;
  if (c.eos_token >= 0) j["eos_token_id"] = c.eos_token;
  j["torch_dtype"] = "float32";
  // lockstep's own keys, written only off the default (a float model's
  // config.json is unchanged): how the linear layers were trained.
  if (c.linear != LinearMode::Float) {
    j["lockstep_linear"] = linear_mode_name(c.linear);
    j["lockstep_unit_backward"] = c.unit_backward;
    j["lockstep_units_head"] = c.units_head;
  }
  if (c.attention != AttentionMode::Float) j["lockstep_attention"] = attention_mode_name(c.attention);
  return j.dump(2) + "\n";
}

ModelConfig from_hf_config_json(const std::string& text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{}: not valid JSON: {}", what, e.what()));
  }
  if (!j.is_object()) throw std::runtime_error(what + ": not a JSON object");
  auto get_int = [&](const char* key) -> std::int64_t {
    if (!j.contains(key)) throw std::runtime_error(fmt::format("{}: missing field '{}'", what, key));
    if (!j[key].is_number_integer()) throw std::runtime_error(fmt::format("{}: field '{}' is not an integer", what, key));
    return j[key].get<std::int64_t>();
  };
  auto get_num = [&](const char* key, double dflt) -> double {
    if (!j.contains(key)) return dflt;
    if (!j[key].is_number()) throw std::runtime_error(fmt::format("{}: field '{}' is not a number", what, key));
    return j[key].get<double>();
  };
  auto get_bool = [&](const char* key, bool dflt) -> bool {
    if (!j.contains(key)) return dflt;
    if (!j[key].is_boolean()) throw std::runtime_error(fmt::format("{}: field '{}' is not a boolean", what, key));
    return j[key].get<bool>();
  };
  auto opt_token = [&](const char* key) -> std::int64_t {
    if (!j.contains(key) || !j[key].is_number_integer()) return -1;  // absent, null or a list
    return j[key].get<std::int64_t>();
  };
  if (!j.contains("model_type") || !j["model_type"].is_string())
    throw std::runtime_error(what + ": missing field 'model_type'");
  const std::string type = j["model_type"].get<std::string>();
  ModelConfig c;
  if (type == "gpt2") {
    c.family = Family::Gpt2;
    c.vocab_size = get_int("vocab_size");
    c.max_seq = get_int("n_positions");
    c.d_model = get_int("n_embd");
    c.n_layer = get_int("n_layer");
    c.n_head = c.n_kv_head = get_int("n_head");
    c.head_dim = c.n_head > 0 ? c.d_model / c.n_head : 0;
    c.d_ff = j.contains("n_inner") && !j["n_inner"].is_null() ? get_int("n_inner") : 4 * c.d_model;
    c.norm_eps = get_num("layer_norm_epsilon", 1e-5);
    c.tie_embeddings = get_bool("tie_word_embeddings", true);
    if (j.contains("activation_function") && j["activation_function"] != "gelu_new")
      throw std::runtime_error(fmt::format("{}: activation_function {} is not supported (lockstep's GPT-2 uses gelu_new)",
                                           what, j["activation_function"].dump()));
  } else if (type == "llama" || type == "bitnet") {
    c.family = type == "llama" ? Family::Llama : Family::Bitnet;
    c.vocab_size = get_int("vocab_size");
    c.max_seq = get_int("max_position_embeddings");
    c.d_model = get_int("hidden_size");
    c.d_ff = get_int("intermediate_size");
    c.n_layer = get_int("num_hidden_layers");
    c.n_head = get_int("num_attention_heads");
    c.n_kv_head = j.contains("num_key_value_heads") ? get_int("num_key_value_heads") : c.n_head;
    c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? get_int("head_dim")
                                                                    : (c.n_head > 0 ? c.d_model / c.n_head : 0);
    c.norm_eps = get_num("rms_norm_eps", 1e-5);
    c.rope_theta = get_num("rope_theta", 10000.0);
    c.tie_embeddings = get_bool("tie_word_embeddings", type == "bitnet");
    const std::string layout = j.value("lockstep_rope_layout", std::string("rotate_half"));
    if (layout != "rotate_half" && layout != "interleaved")
      throw std::runtime_error(fmt::format("{}: lockstep_rope_layout '{}' is neither rotate_half nor interleaved", what, layout));
    c.rope_layout = layout == "rotate_half" ? RopeLayout::RotateHalf : RopeLayout::Interleaved;
    const std::string act = j.value("hidden_act", std::string(type == "llama" ? "silu" : "relu2"));
    if ((type == "llama" && act != "silu") || (type == "bitnet" && act != "relu2"))
      throw std::runtime_error(fmt::format("{}: hidden_act '{}' is not supported for {}", what, act, type));
    if (get_bool("attention_bias", false) || get_bool("mlp_bias", false))
      throw std::runtime_error(what + ": attention_bias/mlp_bias are not supported");
  } else {
    throw std::runtime_error(fmt::format("{}: model_type '{}' is not supported (gpt2, llama, bitnet)", what, type));
  }
  c.bos_token = opt_token("bos_token_id");
  c.eos_token = opt_token("eos_token_id");
  const std::string linear = j.value("lockstep_linear", std::string("float"));
  if (linear != "float" && linear != "units")
    throw std::runtime_error(fmt::format("{}: lockstep_linear '{}' is neither float nor units", what, linear));
  c.linear = linear == "units" ? LinearMode::Units : LinearMode::Float;
  c.unit_backward = get_bool("lockstep_unit_backward", false);
  c.units_head = get_bool("lockstep_units_head", false);
  const std::string attention = j.value("lockstep_attention", std::string("float"));
  if (attention != "float" && attention != "units")
    throw std::runtime_error(fmt::format("{}: lockstep_attention '{}' is neither float nor units", what, attention));
  c.attention = attention == "units" ? AttentionMode::Units : AttentionMode::Float;
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("{}: {}", what, e.what()));
  }
  return c;
}

}  // namespace lockstep::model
