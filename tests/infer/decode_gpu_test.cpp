// The decode mode on the CUDA model (label gpu): its logits are the CPU
// model's bits, for every position, from one prefill, from a chunked
// prefill and token by token, and for 8 sequences of other lengths decoded
// together — per family micro config (and the variants that cross the 64-key
// block, interleaved RoPE, multi-query, multi-head).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <ostream>
#include <string>

#include "decode_util.hpp"

namespace {

using namespace lockstep;
using namespace lockstep::infer::testing;

void round_head_to_f16_grid(model::Model& m);

class DecodeGpu : public ::testing::TestWithParam<mt::NamedConfig> {
 protected:
  void SetUp() override {
    std::string why;
    if (!model::cuda_device_available(&why)) GTEST_SKIP() << why;
    cpu_ = model::make_cpu_model(GetParam().cfg);
    mt::randomize(cpu_->params(), 0xdec0de, 0.2);
    if (GetParam().name.find("f16-head") != std::string::npos) round_head_to_f16_grid(*cpu_);
    gpu_ = model::make_cuda_model(GetParam().cfg, "off");
    auto& g = gpu_->params();
    for (std::size_t i = 0; i < g.size(); ++i) g[i].value = cpu_->params()[i].value;
  }
  std::unique_ptr<model::Model> cpu_, gpu_;
};

TEST_P(DecodeGpu, PrefillAndDecodeLogitsEqualTheCpus) {
  const auto& cfg = cpu_->config();
  const auto t = random_tokens(static_cast<std::size_t>(cfg.max_seq), cfg.vocab_size, 7);
  const std::vector<float> want = prefill_all(*cpu_, t, 2);
  EXPECT_EQ(mt::differing_bits(prefill_all(*gpu_, t, 1), want), 0u) << "GPU prefill vs CPU prefill";
  EXPECT_EQ(mt::differing_bits(prefill_all(*gpu_, t, 1, 7), want), 0u) << "GPU prefill in chunks of 7";
  EXPECT_EQ(mt::differing_bits(token_by_token(*gpu_, t, 1), want), 0u) << "GPU token by token vs CPU prefill";
}

TEST_P(DecodeGpu, EightSequencesTogetherEqualTheCpus) {
  const Eight e = eight_sequences(cpu_->config(), 11);
  const auto want = batched(*cpu_, e.seqs, e.prompt, 2);
  const auto got = batched(*gpu_, e.seqs, e.prompt, 1);
  for (std::size_t s = 0; s < e.seqs.size(); ++s) {
    EXPECT_EQ(mt::differing_bits(got[s], want[s]), 0u) << "sequence " << s << ": GPU batched vs CPU batched";
    EXPECT_EQ(mt::differing_bits(got[s], batched(*gpu_, {e.seqs[s]}, {e.prompt[s]}, 1)[0]), 0u)
        << "sequence " << s << ": GPU batched vs GPU alone";
  }
}

// The micro configs, and two with a vocabulary wide enough (>= 4096) that the
// decode backend runs the LM head as chain_gemv (cuda_model.cpp, kChainMinOut):
// bitnet's tied head (the embedding, random f32: the f32 path) and llama's
// untied one with f16-exact values (the f16 path).
std::vector<mt::NamedConfig> decode_configs() {
  std::vector<mt::NamedConfig> v = mt::micro_configs(true);
  model::ModelConfig b = model::preset("bitnet-micro");
  b.vocab_size = 5000;
  v.push_back({"bitnet-micro/vocab5000", b});
  model::ModelConfig l = model::preset("llama-micro");
  l.vocab_size = 4500;
  l.tie_embeddings = false;
  v.push_back({"llama-micro/vocab4500,untied,f16-head", l});
  return v;
}

// A head of f16-exact values (k / 1024) for the f16 configs.
void round_head_to_f16_grid(model::Model& m) {
  for (auto& p : m.params())
    if (p.name.find("lm_head") != std::string::npos)
      for (auto& v : p.value) v = std::round(v * 1024.0f) / 1024.0f;
}

INSTANTIATE_TEST_SUITE_P(Micro, DecodeGpu, ::testing::ValuesIn(decode_configs()), name_of);

}  // namespace
