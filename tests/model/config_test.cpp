// Model presets and Hugging Face config.json in both directions.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "lockstep/model/config.hpp"

namespace m = lockstep::model;

namespace {
std::string error_of(const std::string& json) {
  try {
    m::from_hf_config_json(json, "cfg");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(ModelConfig, Gpt2SmallHasItsPublishedParameterCount) {
  const auto c = m::preset("gpt2-124m");
  EXPECT_EQ(c.parameter_count(), 124'439'808);  // GPT-2 small, tied embeddings
  EXPECT_EQ(c.d_model, 768);
  EXPECT_EQ(c.head_dim, 64);
}

TEST(ModelConfig, Bitnet2bHasThe2B4TShapes) {
  const auto c = m::preset("bitnet-b1.58-2b");
  EXPECT_EQ(c.n_layer, 30);
  EXPECT_EQ(c.d_model, 2560);
  EXPECT_EQ(c.d_ff, 6912);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.n_head, 20);
  EXPECT_EQ(c.n_kv_head, 5);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope_theta, 500000.0);
  // Per layer: q,o 2560², k,v 2560·640, gate/up/down 3·2560·6912, 4 norms.
  const std::int64_t layer = 2 * 2560 * 2560 + 2 * 2560 * 640 + 3 * 2560 * 6912 + 2560 * 3 + 6912;
  EXPECT_EQ(c.parameter_count(), 128256LL * 2560 + 30 * layer + 2560);
}

TEST(ModelConfig, EveryPresetValidatesAndRoundTripsThroughHfJson) {
  for (const auto& name : m::preset_names()) {
    const auto c = m::preset(name);
    const auto back = m::from_hf_config_json(m::to_hf_config_json(c));
    EXPECT_EQ(back.family, c.family) << name;
    EXPECT_EQ(back.parameter_count(), c.parameter_count()) << name;
    EXPECT_EQ(back.n_kv_head, c.n_kv_head) << name;
    EXPECT_EQ(back.head_dim, c.head_dim) << name;
    EXPECT_EQ(back.rope_theta, c.rope_theta) << name;
    EXPECT_EQ(back.rope_layout, c.rope_layout) << name;
    EXPECT_EQ(back.tie_embeddings, c.tie_embeddings) << name;
    EXPECT_EQ(back.norm_eps, c.norm_eps) << name;
    EXPECT_EQ(back.bos_token, c.bos_token) << name;
    std::printf("%-16s %s\n", name.c_str(), c.summary().c_str());
  }
}

TEST(ModelConfig, ReadsAHuggingFaceGpt2Config) {
  // The fields of GPT-2's published config.json that lockstep reads.
  const auto c = m::from_hf_config_json(R"({"activation_function": "gelu_new", "model_type": "gpt2",
    "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
    "layer_norm_epsilon": 1e-05, "vocab_size": 50257, "bos_token_id": 50256, "eos_token_id": 50256})");
  EXPECT_EQ(c.parameter_count(), 124'439'808);
  EXPECT_EQ(c.d_ff, 3072);
  EXPECT_EQ(c.eos_token, 50256);
}

TEST(ModelConfig, RefusesBadConfigsNamingTheField) {
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"model_type": "t5"})").find("model_type 't5'"), std::string::npos);
  EXPECT_NE(error_of(R"({"model_type": "gpt2", "n_embd": 768})").find("'vocab_size'"), std::string::npos);
  EXPECT_NE(error_of(R"({"model_type": "gpt2", "vocab_size": "x", "n_positions": 1, "n_embd": 8, "n_layer": 1, "n_head": 2})")
                .find("'vocab_size' is not an integer"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model_type": "gpt2", "vocab_size": 10, "n_positions": 8, "n_embd": 10, "n_layer": 1, "n_head": 3})")
                .find("n_head*head_dim"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model_type": "llama", "vocab_size": 10, "max_position_embeddings": 8, "hidden_size": 16,
    "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 3})")
                .find("n_kv_head (3) must divide n_head (4)"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model_type": "llama", "vocab_size": 10, "max_position_embeddings": 8, "hidden_size": 16,
    "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4, "hidden_act": "gelu"})")
                .find("hidden_act 'gelu'"),
            std::string::npos);
  EXPECT_THROW(m::preset("gpt3"), std::invalid_argument);
}
