// The decode mode on the CUDA model (label gpu): its logits are the CPU
// model's bits, for every position, from one prefill, from a chunked
// prefill and token by token, and for 8 sequences of other lengths decoded
// together — per family micro config (and the variants that cross the 64-key
// block, interleaved RoPE, multi-query, multi-head).
#include <gtest/gtest.h>

#include <cctype>
#include <ostream>
#include <string>

#include "decode_util.hpp"

namespace {

using namespace lockstep;
using namespace lockstep::infer::testing;

class DecodeGpu : public ::testing::TestWithParam<mt::NamedConfig> {
 protected:
  void SetUp() override {
    std::string why;
    if (!model::cuda_device_available(&why)) GTEST_SKIP() << why;
    cpu_ = model::make_cpu_model(GetParam().cfg);
    mt::randomize(cpu_->params(), 0xdec0de, 0.2);
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

INSTANTIATE_TEST_SUITE_P(Micro, DecodeGpu, ::testing::ValuesIn(mt::micro_configs(true)), name_of);

}  // namespace
