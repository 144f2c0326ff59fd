// The decode mode on the CUDA model (label gpu): its logits are the CPU
// model's bits, for every position, from one prefill, from a chunked
// prefill and token by token, and for 8 sequences of other lengths decoded
// together — per family micro config (and the variants that cross the 64-key
// block, interleaved RoPE, multi-query, multi-head); with the session-8
// decode kernels (fused norm + codes, joined and prefetched GEMVs) and without; with both cached
// attention kernels (v1, v2).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <ostream>
#include <cstdio>
#include <string>
#include <string_view>

#include "decode_util.hpp"
#include "lockstep/backend/cuda/decode_launch.hpp"
#include "lockstep/backend/cuda/pointwise_launch.hpp"
#include "lockstep/backend/cuda/trace.hpp"

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
  void TearDown() override { cuda::launch::set_decode_fusion(-1); }
  std::unique_ptr<model::Model> cpu_, gpu_;
};

// Launches since the trace's last reset whose path name starts with `prefix`.
long launches_of(std::string_view prefix) {
  long n = 0;
  for (const auto& [name, count] : cuda::trace::process_log().launches())
    if (name.starts_with(prefix)) n += count;
  return n;
}

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

// The cached attention's kernels (LOCKSTEP_DECODE_ATTENTION; docs/perf/DECODE_CUDA.md §12): v1 (a CTA a
// (row, head)), v2 (scores, then fold) and v2pdl (the fold a programmatic dependent launch) each give the CPU's logits token by token and for 8 sequences
// together, and each pass ran the kernel chosen, never the other.
TEST_P(DecodeGpu, BothCachedAttentionKernelsGiveTheCpusBits) {
  const auto& cfg = cpu_->config();
  const auto t = random_tokens(static_cast<std::size_t>(cfg.max_seq), cfg.vocab_size, 9);
  const std::vector<float> want = prefill_all(*cpu_, t, 2);
  const Eight e = eight_sequences(cfg, 15);
  const auto want8 = batched(*cpu_, e.seqs, e.prompt, 2);
  for (int version : {1, 2, 3}) {
    cuda::launch::set_decode_attention_version(version);
    cuda::trace::process_log().reset_launches();
    EXPECT_EQ(mt::differing_bits(token_by_token(*gpu_, t, 1), want), 0u) << "token by token, attention v" << version;
    const auto got8 = batched(*gpu_, e.seqs, e.prompt, 1);
    for (std::size_t s = 0; s < e.seqs.size(); ++s)
      EXPECT_EQ(mt::differing_bits(got8[s], want8[s]), 0u) << "sequence " << s << " batched, attention v" << version;
    const long v1 = launches_of("cached_attention (decode"), v2 = launches_of("cached_attention v2 (decode, fold");
    std::printf("%s: attention v%d: %ld v1 launches, %ld v2 folds\n", GetParam().name.c_str(), version, v1, v2);
    EXPECT_GT(version == 1 ? v1 : v2, 0) << "the chosen cached attention (v" << version << ") never ran";
    EXPECT_EQ(version == 1 ? v2 : v1, 0) << "the other cached attention ran under v" << version;
    EXPECT_EQ(launches_of("cached_attention v2 (decode, fold, PDL") > 0, version == 3)
        << "the fold as a programmatic dependent launch under version " << version;
  }
  cuda::launch::set_decode_attention_version(0);
}

// The session-8 decode changes (LOCKSTEP_DECODE_FUSION; docs/perf/DECODE_CUDA.md
// §9) change no bit: the norms with the BitLinears' activation codes fused in
// (DecodeBackend<cuda::OpKernels>::rmsnorm), the BitLinears on one input
// joined into one launch (q, k, v; gate, up: ternary_gemv_parts) and the
// prefetched ternary_gemv. Token by token and batched, the logits with the
// changes on and off are the CPU's. With them on, a BitNet pass runs the
// fused norm, fewer separate row quantizations and the joined GEMVs; the
// families without BitLinears run none of them.
TEST_P(DecodeGpu, TheFusedDecodeKernelsChangeNoBit) {
  const auto& cfg = cpu_->config();
  const auto t = random_tokens(static_cast<std::size_t>(cfg.max_seq), cfg.vocab_size, 7);
  const std::vector<float> want = prefill_all(*cpu_, t, 2);
  const Eight e = eight_sequences(cfg, 13);
  const auto want8 = batched(*cpu_, e.seqs, e.prompt, 2);
  long fused[2] = {}, quantized[2] = {}, joined3[2] = {}, joined2[2] = {};
  for (int on : {0, 1}) {
    cuda::launch::set_decode_fusion(on);
    cuda::trace::process_log().reset_launches();
    EXPECT_EQ(mt::differing_bits(token_by_token(*gpu_, t, 1), want), 0u) << "token by token, fusion " << on;
    const auto got8 = batched(*gpu_, e.seqs, e.prompt, 1);
    for (std::size_t s = 0; s < e.seqs.size(); ++s)
      EXPECT_EQ(mt::differing_bits(got8[s], want8[s]), 0u) << "sequence " << s << " batched, fusion " << on;
    fused[on] = launches_of("rmsnorm_quantize_i8");
    quantized[on] = launches_of("row_quantize_i8");
    joined3[on] = launches_of("ternary_gemv (a warp a row, prefetched, 3 parts)");
    joined2[on] = launches_of("ternary_gemv (a warp a row, prefetched, 2 parts)");
  }
  std::printf("%s: fusion off: %ld fused norms, %ld row_quantize_i8, %ld + %ld joined GEMVs; on: %ld, %ld, %ld + %ld\n",
              GetParam().name.c_str(), fused[0], quantized[0], joined3[0], joined2[0], fused[1], quantized[1],
              joined3[1], joined2[1]);
  EXPECT_EQ(fused[0] + joined3[0] + joined2[0], 0) << "a session-8 kernel ran with the changes off";
  if (cfg.family == model::Family::Bitnet) {
    EXPECT_GT(fused[1], 0) << "the fused norm never ran in a BitNet decode";
    EXPECT_LT(quantized[1], quantized[0]) << "the fusion left every separate row quantization in place";
    EXPECT_GT(joined3[1], 0) << "q, k and v never ran as one launch";
    EXPECT_GT(joined2[1], 0) << "gate and up never ran as one launch";
  } else {
    EXPECT_EQ(fused[1] + joined3[1] + joined2[1], 0) << "a session-8 kernel ran in a model without BitLinears";
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
