// The decode mode with LoRA adapters on the CUDA model (label gpu): the same
// DecodeSession over the CUDA kernel set, the branch's products on its Linear
// kernels (the GEMVs of a wide B), y + u·s on its gated lora_scale_add. Every
// position's logits (one prefill, chunks, token by token) and 8 sequences of
// other lengths decoded together (CUDA graphs replaying the passes) are the
// CPU model's bits with the same adapter, with the session-8 decode kernels on
// and off; next_logits too. Skips without a usable CUDA device.
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "decode_lora_util.hpp"
#include "lockstep/backend/cuda/pointwise_launch.hpp"

namespace {

using namespace lockstep;
using namespace lockstep::infer::testing;

class DecodeLoraGpu : public ::testing::TestWithParam<LoraCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!model::cuda_device_available(&why)) GTEST_SKIP() << why;
    cpu_ = adapted_cpu_model(GetParam(), false);
    gpu_ = model::make_cuda_model(GetParam().cfg, "off");
    base_values(*gpu_);
    put_adapter(*gpu_, GetParam(), false);
  }
  void TearDown() override { cuda::launch::set_decode_fusion(-1); }
  std::unique_ptr<model::Model> cpu_, gpu_;
};

TEST_P(DecodeLoraGpu, EveryPositionAndEightSequencesAreTheCpusBits) {
  const auto& cfg = cpu_->config();
  const std::size_t T = static_cast<std::size_t>(cfg.max_seq), V = static_cast<std::size_t>(cfg.vocab_size);
  const auto t = random_tokens(T, cfg.vocab_size, 7);
  const std::vector<float> want = token_by_token(*cpu_, t, 2);
  const Eight e = eight_sequences(cfg, 13);
  const auto want8 = batched(*cpu_, e.seqs, e.prompt, 2);
  EXPECT_EQ(mt::differing_bits(gpu_->next_logits(std::span(t).first(T / 2), 1),
                               std::vector<float>(want.begin() + static_cast<std::ptrdiff_t>((T / 2 - 1) * V),
                                                  want.begin() + static_cast<std::ptrdiff_t>(T / 2 * V))),
            0u)
      << "GPU next_logits vs CPU token by token";
  for (int on : {0, 1}) {
    cuda::launch::set_decode_fusion(on);
    EXPECT_EQ(mt::differing_bits(prefill_all(*gpu_, t, 1), want), 0u) << "GPU prefill, fusion " << on;
    EXPECT_EQ(mt::differing_bits(prefill_all(*gpu_, t, 1, 7), want), 0u) << "GPU prefill in chunks of 7, fusion " << on;
    EXPECT_EQ(mt::differing_bits(token_by_token(*gpu_, t, 1), want), 0u) << "GPU token by token, fusion " << on;
    const auto got8 = batched(*gpu_, e.seqs, e.prompt, 1);
    for (std::size_t s = 0; s < e.seqs.size(); ++s)
      EXPECT_EQ(mt::differing_bits(got8[s], want8[s]), 0u) << "sequence " << s << " batched, fusion " << on;
  }
}

INSTANTIATE_TEST_SUITE_P(Micro, DecodeLoraGpu, ::testing::ValuesIn(lora_cases()), lora_case_name);

}  // namespace
