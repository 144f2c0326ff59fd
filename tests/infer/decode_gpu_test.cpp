// The decode mode on the CUDA model (label gpu): its logits are the CPU
// model's bits, for every position, from one prefill, from a chunked
// prefill and token by token, and for 8 sequences of other lengths decoded
// together — per family micro config (and the variants that cross the 64-key
// block, interleaved RoPE, multi-query, multi-head); with the session-8
// decode kernels (fused norm + codes, joined and prefetched GEMVs) and without;
// with the session-10 epilogues (the residual adds in the GEMVs) and without;
// with both cached attention kernels (v1, v2); with every decode kernel a
// programmatic dependent launch (LOCKSTEP_DECODE_PDL) and with that launch's
// planted bug (a GEMV that reads x before its wait); with every LM head kernel
// (LOCKSTEP_HEAD_GEMV: v1, v2, v2wide); with the session-11 norm in the
// GEMV's prologue (LOCKSTEP_DECODE_NORM_GEMV) and without.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <ostream>
#include <cstdio>
#include <string>
#include <string_view>

#include "decode_util.hpp"
#include "lockstep/backend/cuda/decode_launch.hpp"
#include "lockstep/backend/cuda/decode_linear_launch.hpp"
#include "lockstep/backend/cuda/graph.hpp"
#include "lockstep/backend/cuda/head_gemv_launch.hpp"
#include "lockstep/backend/cuda/pdl.hpp"
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
  void TearDown() override {
    cuda::launch::set_decode_fusion(-1);
    cuda::launch::set_decode_epilogues(-1);
    cuda::launch::set_decode_norm_gemv(-1);
    cuda::launch::set_ternary_gemv_version(0);
    cuda::launch::set_decode_attention_version(0);
    cuda::set_decode_pdl(-1);
    cuda::set_decode_pdl_mutant(0);
    cuda::launch::set_head_gemv_version(0);
  }
  // The CPU's logits of one sequence (every position) and of 8 sequences
  // decoded together (eight: their seed), for the switch tests below.
  struct Want {
    std::vector<std::int32_t> tokens;
    std::vector<float> logits;
    Eight e;
    std::vector<std::vector<float>> logits8;
  };
  Want cpu_logits(std::uint64_t eight) {
    const auto& cfg = cpu_->config();
    Want w;
    w.tokens = random_tokens(static_cast<std::size_t>(cfg.max_seq), cfg.vocab_size, 7);
    w.logits = prefill_all(*cpu_, w.tokens, 2);
    w.e = eight_sequences(cfg, eight);
    w.logits8 = batched(*cpu_, w.e.seqs, w.e.prompt, 2);
    return w;
  }
  // The GPU's logits, token by token and the 8 batched, are the CPU's (what: the setting).
  void expect_cpu_logits(const Want& w, const std::string& what) {
    EXPECT_EQ(mt::differing_bits(token_by_token(*gpu_, w.tokens, 1), w.logits), 0u) << "token by token, " << what;
    const auto got8 = batched(*gpu_, w.e.seqs, w.e.prompt, 1);
    for (std::size_t s = 0; s < w.e.seqs.size(); ++s)
      EXPECT_EQ(mt::differing_bits(got8[s], w.logits8[s]), 0u) << "sequence " << s << " batched, " << what;
  }
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

// The cached attention's kernels (LOCKSTEP_DECODE_ATTENTION; docs/perf/DECODE_CUDA.md §12, §18): v1 (a CTA a
// (row, head)), v2 (scores, then fold), v2pdl (the fold a programmatic dependent launch) and v3 (one launch) each give the CPU's logits token by token and for 8 sequences
// together, and each pass ran the kernel chosen, never the other.
TEST_P(DecodeGpu, BothCachedAttentionKernelsGiveTheCpusBits) {
  const auto& cfg = cpu_->config();
  const auto t = random_tokens(static_cast<std::size_t>(cfg.max_seq), cfg.vocab_size, 9);
  const std::vector<float> want = prefill_all(*cpu_, t, 2);
  const Eight e = eight_sequences(cfg, 15);
  const auto want8 = batched(*cpu_, e.seqs, e.prompt, 2);
  for (int version : {1, 2, 3, cuda::launch::kDecodeAttentionV3}) {
    cuda::launch::set_decode_attention_version(version);
    cuda::trace::process_log().reset_launches();
    EXPECT_EQ(mt::differing_bits(token_by_token(*gpu_, t, 1), want), 0u) << "token by token, attention v" << version;
    const auto got8 = batched(*gpu_, e.seqs, e.prompt, 1);
    for (std::size_t s = 0; s < e.seqs.size(); ++s)
      EXPECT_EQ(mt::differing_bits(got8[s], want8[s]), 0u) << "sequence " << s << " batched, attention v" << version;
    const long v1 = launches_of("cached_attention (decode"), v2 = launches_of("cached_attention v2 (decode, fold"),
               v3 = launches_of("cached_attention v3 (decode, one launch");
    std::printf("%s: attention version %d: %ld v1 launches, %ld v2 folds, %ld v3 launches\n",
                GetParam().name.c_str(), version, v1, v2, v3);
    const bool is_v3 = version == cuda::launch::kDecodeAttentionV3;
    const long chosen = version == 1 ? v1 : is_v3 ? v3 : v2;
    EXPECT_GT(chosen, 0) << "the chosen cached attention (version " << version << ") never ran";
    EXPECT_EQ(v1 + v2 + v3 - chosen, 0) << "another cached attention ran under version " << version;
    EXPECT_EQ(launches_of("cached_attention v2 (decode, fold, PDL") > 0, version == 3)
        << "the fold as a programmatic dependent launch under version " << version;
  }
  cuda::launch::set_decode_attention_version(0);
}

// The LM head's kernels (LOCKSTEP_HEAD_GEMV; docs/perf/DECODE_CUDA.md §17): v1 (a thread a row), v2 and
// v2wide (head_gemv.cu: staged rows) each give the CPU's logits token by token and for 8 sequences together;
// the f16 head (the f16-head config) ran the chosen kernel, the f32 heads none of v2.
TEST_P(DecodeGpu, EveryHeadGemvGivesTheCpusBits) {
  const Want want = cpu_logits(17);
  const bool f16 = GetParam().name.find("f16-head") != std::string::npos;
  for (int version : {1, 2, 3}) {
    cuda::launch::set_head_gemv_version(version);
    cuda::trace::process_log().reset_launches();
    expect_cpu_logits(want, fmt::format("head_gemv version {}", version));
    const long v1 = launches_of("chain_gemv (f16 rows"), v2 = launches_of("head_gemv v2 (staged rows");
    std::printf("%s: head_gemv version %d: %ld f16-row launches, %ld v2 launches\n", GetParam().name.c_str(), version,
                v1, v2);
    EXPECT_EQ(v2 > 0, f16 && version >= 2) << "v2 ran under head_gemv version " << version;
    if (version >= 2) {
      EXPECT_EQ(v1, 0) << "the v1 f16-row kernel ran under version " << version;
    } else if (f16) {
      EXPECT_GT(v1, 0) << "the f16 head never took the row kernel";
    }
  }
  cuda::launch::set_head_gemv_version(0);
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
  const Want want = cpu_logits(13);
  long fused[2] = {}, quantized[2] = {}, joined3[2] = {}, joined2[2] = {};
  for (int on : {0, 1}) {
    cuda::launch::set_decode_fusion(on);
    cuda::trace::process_log().reset_launches();
    expect_cpu_logits(want, fmt::format("fusion {}", on));
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

// The session-10 decode epilogues (LOCKSTEP_DECODE_EPILOGUES; docs/perf/DECODE_CUDA.md
// §11) change no bit: the residual add after o_proj and down_proj folded into
// their ternary_gemv launch (DecodeBackend<cuda::OpKernels>::residual), and
// ReLU²·up into the FFN sub-norm's launch (act_norm), RoPE of q and k into
// the attention's cache writes (rope_store). Token by token and
// batched, with v1 and v2 of the GEMV, the logits with the epilogues on and
// off are the CPU's; with them on a BitNet decode launches the GEMVs with the
// residual and the fused activation + norm, one residual_fwd fewer for each
// residual epilogue and one relu2mul_fwd and one norm fewer for each fused
// activation; the RoPE families (llama, bitnet) the fused RoPE + cache
// writes, two rope_rows and two store_rows_at fewer for each; gpt2 none.
TEST_P(DecodeGpu, TheDecodeEpiloguesChangeNoBit) {
  const auto& cfg = cpu_->config();
  const Want want = cpu_logits(17);
  for (int version : {1, 2}) {
    cuda::launch::set_ternary_gemv_version(version);
    long residual_fwd[2] = {}, epilogue[2] = {}, relu2mul[2] = {}, act_norm[2] = {}, norms[2] = {}, rope[2] = {},
         stores[2] = {}, rope_store[2] = {};
    for (int on : {0, 1}) {
      cuda::launch::set_decode_epilogues(on);
      cuda::trace::process_log().reset_launches();
      expect_cpu_logits(want, fmt::format("v{}, epilogues {}", version, on));
      residual_fwd[on] = launches_of("residual_fwd");
      long n = 0;
      for (const auto& [name, count] : cuda::trace::process_log().launches())
        if (name.starts_with("ternary_gemv") && name.ends_with("+ residual)")) n += count;
      epilogue[on] = n;
      relu2mul[on] = launches_of("relu2mul_fwd");
      act_norm[on] = launches_of("relu2mul_rmsnorm_quantize_i8");
      norms[on] = launches_of("rmsnorm_quantize_i8") + launches_of("rmsnorm_fwd");
      rope[on] = launches_of("rope_rows");
      stores[on] = launches_of("store_rows_at");
      rope_store[on] = launches_of("rope_store_rows");
    }
    std::printf("%s, ternary_gemv v%d: epilogues off: %ld rope_rows, %ld store_rows_at, %ld fused; on: %ld, %ld, %ld\n",
                GetParam().name.c_str(), version, rope[0], stores[0], rope_store[0], rope[1], stores[1],
                rope_store[1]);
    EXPECT_EQ(rope_store[0], 0) << "the fused RoPE + cache writes ran with the epilogues off";
    if (cfg.family == model::Family::Gpt2) {
      EXPECT_EQ(rope_store[1], 0) << "RoPE fused in a model without RoPE";
    } else {
      EXPECT_GT(rope_store[1], 0) << "RoPE and the cache writes never ran as one launch";
      EXPECT_EQ(rope[0] - rope[1], 2 * rope_store[1]) << "each fused launch replaces q's and k's rope_rows";
      EXPECT_EQ(stores[0] - stores[1], 2 * rope_store[1]) << "each fused launch replaces k's and v's store_rows_at";
    }
    std::printf("%s, ternary_gemv v%d: epilogues off: %ld residual_fwd, %ld GEMVs + residual, %ld relu2mul_fwd, %ld "
                "fused activation + norm, %ld norms; on: %ld, %ld, %ld, %ld, %ld\n",
                GetParam().name.c_str(), version, residual_fwd[0], epilogue[0], relu2mul[0], act_norm[0], norms[0],
                residual_fwd[1], epilogue[1], relu2mul[1], act_norm[1], norms[1]);
    EXPECT_EQ(epilogue[0] + act_norm[0], 0) << "a session-10 epilogue ran with the epilogues off";
    if (cfg.family == model::Family::Bitnet) {
      EXPECT_GT(epilogue[1], 0) << "no residual add ran in a GEMV's epilogue in a BitNet decode";
      EXPECT_EQ(residual_fwd[0] - residual_fwd[1], epilogue[1]) << "each residual epilogue replaces one residual_fwd";
      EXPECT_GT(act_norm[1], 0) << "ReLU²·up never ran inside the FFN sub-norm in a BitNet decode";
      EXPECT_EQ(relu2mul[0] - relu2mul[1], act_norm[1]) << "each fused activation + norm replaces one relu2mul_fwd";
      EXPECT_EQ(norms[0] - norms[1], act_norm[1]) << "each fused activation + norm replaces one norm";
    } else {
      EXPECT_EQ(epilogue[1] + act_norm[1], 0) << "a session-10 epilogue ran in a model without BitLinears";
      EXPECT_EQ(residual_fwd[1], residual_fwd[0]);
      EXPECT_EQ(relu2mul[1], relu2mul[0]);
    }
  }
}

// Every launch since the trace's last reset.
long all_launches() {
  long n = 0;
  for (const auto& [name, count] : cuda::trace::process_log().launches()) n += count;
  return n;
}

// LOCKSTEP_DECODE_PDL (docs/perf/DECODE_CUDA.md §16): every decode kernel a
// programmatic dependent launch — each lets the next launch at its start,
// reads only weights before its griddepcontrol.wait — changes no bit: one
// prefill, a prefill in chunks of 7, token by token and 8 sequences batched
// give the CPU's logits, with both GEMVs (v1, v2) and both cached attention
// kernels (v1, v2). The launches were programmatic: counted (pdl.hpp), and
// token by token most of a pass's launches (all but the embedding and the
// kernels outside the decode set: the float GEMMs of the families without
// BitLinears) in a BitNet model. Counted with CUDA graphs off: a replayed
// pass launches nothing from the host, so with graphs on the host's counts
// are those of the few passes that launched — the session's first, which
// packs every weight (plain launches) and whose first launch after each pack
// is plain by design — and said 53 programmatic of 132 on the H200
// (2026-12-02), though every pass's decode kernels were programmatic. The
// graph tests count the programmatic edges of the captured graphs instead.
TEST_P(DecodeGpu, EveryDecodeKernelAProgrammaticLaunchChangesNoBit) {
  const auto& cfg = cpu_->config();
  const auto t = random_tokens(static_cast<std::size_t>(cfg.max_seq), cfg.vocab_size, 21);
  const std::vector<float> want = prefill_all(*cpu_, t, 2);
  const Eight e = eight_sequences(cfg, 23);
  const auto want8 = batched(*cpu_, e.seqs, e.prompt, 2);
  cuda::set_decode_pdl(1);
  for (int gemv : {1, 2})
    for (int attention : {1, 2}) {
      const std::string what = fmt::format("PDL, ternary_gemv v{}, attention v{}", gemv, attention);
      cuda::launch::set_ternary_gemv_version(gemv);
      cuda::launch::set_decode_attention_version(attention);
      EXPECT_EQ(mt::differing_bits(prefill_all(*gpu_, t, 1), want), 0u) << "one prefill, " << what;
      EXPECT_EQ(mt::differing_bits(prefill_all(*gpu_, t, 1, 7), want), 0u) << "prefill in chunks of 7, " << what;
      cuda::trace::process_log().reset_launches();
      cuda::reset_programmatic_launches();
      cuda::graph::set_enabled(0);  // every pass launched from the host, so counted (above)
      EXPECT_EQ(mt::differing_bits(token_by_token(*gpu_, t, 1), want), 0u) << "token by token, " << what;
      cuda::graph::set_enabled(-1);
      const long programmatic = cuda::programmatic_launches(), traced = all_launches();
      const auto got8 = batched(*gpu_, e.seqs, e.prompt, 1);
      for (std::size_t s = 0; s < e.seqs.size(); ++s)
        EXPECT_EQ(mt::differing_bits(got8[s], want8[s]), 0u) << "sequence " << s << " batched, " << what;
      std::printf("%s: %s: token by token %ld programmatic launches of %ld traced\n", GetParam().name.c_str(),
                  what.c_str(), programmatic, traced);
      EXPECT_GT(programmatic, 0) << "no programmatic launch, " << what;
      if (cfg.family == model::Family::Bitnet) {
        EXPECT_GT(2 * programmatic, traced) << "most of a BitNet pass's launches programmatic, " << what;
      }
    }
  cuda::set_decode_pdl(0);
  cuda::reset_programmatic_launches();
  EXPECT_EQ(mt::differing_bits(token_by_token(*gpu_, t, 1), want), 0u) << "PDL off";
  EXPECT_EQ(cuda::programmatic_launches(), 0) << "programmatic launches with LOCKSTEP_DECODE_PDL off";
}

// The planted bug (pdl.hpp: decode_pdl_mutant 1): under PDL the v1 ternary
// GEMV stages x (the norm's activation codes) before its wait, while the norm
// that writes them may still run. A race, not a certainty: on the H200 the
// GEMV's CTAs launch at the norm's first instruction (its trigger) and stage
// x ~1-2 µs later, while the norm (a CTA a row, ~5 µs) writes its codes at its
// end, so the codes read are the previous layer's; a pass where the norm won
// every race would give the right bits. Caught if any pass of the run differs.
TEST_P(DecodeGpu, ThePdlPlantedBugIsCaught) {
  const auto& cfg = cpu_->config();
  if (cfg.family != model::Family::Bitnet) GTEST_SKIP() << "the planted bug is in the ternary GEMV";
  const Want want = cpu_logits(29);
  cuda::set_decode_pdl(1);
  cuda::launch::set_ternary_gemv_version(1);
  cuda::set_decode_pdl_mutant(1);
  std::size_t differ = mt::differing_bits(token_by_token(*gpu_, want.tokens, 1), want.logits);
  const auto got8 = batched(*gpu_, want.e.seqs, want.e.prompt, 1);
  for (std::size_t s = 0; s < want.e.seqs.size(); ++s) differ += mt::differing_bits(got8[s], want.logits8[s]);
  cuda::set_decode_pdl_mutant(0);
  std::printf("%s: planted: the GEMV reads x before its wait: %zu logits differ\n", GetParam().name.c_str(), differ);
  EXPECT_GT(differ, 0u) << "the GEMV reading x before its wait was not caught (a race: see the comment)";
  expect_cpu_logits(want, "PDL, after the planted bug");  // the engine recovers: the switch is a launch argument
}

// The session-11 norm in the GEMV's prologue (LOCKSTEP_DECODE_NORM_GEMV;
// docs/perf/DECODE_CUDA.md §15) changes no bit: at 1-2 rows the RMSNorm +
// codes is not launched, the BitLinear GEMV on its codes (q/k/v joined,
// gate/up joined, o_proj) runs it in its prologue; passes of more rows
// (prefill, 8 sequences batched until only 2 remain) launch the norm as
// before. Prefill, token by token and batched, with ternary_gemv v1, v2 and
// v2pdl set (the prologue kernel is v2's), the logits with it on and off are
// the CPU's. With it on, each prologue launch replaces one norm launch, and
// a batch-1 pass launches at most one standalone rmsnorm_quantize_i8 (the
// final norm, read by the LM head); the families without BitLinears none.
TEST_P(DecodeGpu, TheNormInTheGemvPrologueChangesNoBit) {
  const auto& cfg = cpu_->config();
  const Want want = cpu_logits(19);
  for (int version : {1, 2, 3}) {
    cuda::launch::set_ternary_gemv_version(version);
    long norms[2] = {}, prologue[2] = {}, gemvs[2] = {}, norms1[2] = {}, prologue1[2] = {};
    for (int on : {0, 1}) {
      cuda::launch::set_decode_norm_gemv(on);
      const std::string what = fmt::format("v{}, norm in the prologue {}", version, on);
      EXPECT_EQ(mt::differing_bits(prefill_all(*gpu_, want.tokens, 1), want.logits), 0u) << "prefill, " << what;
      // Batch 1 alone: a prefill of one token, then one decode pass a token.
      cuda::trace::process_log().reset_launches();
      EXPECT_EQ(mt::differing_bits(token_by_token(*gpu_, want.tokens, 1), want.logits), 0u)
          << "token by token, " << what;
      norms1[on] = launches_of("rmsnorm_quantize_i8");
      prologue1[on] = launches_of("ternary_gemv v2 (norm prologue");
      cuda::trace::process_log().reset_launches();
      expect_cpu_logits(want, what);
      norms[on] = launches_of("rmsnorm_quantize_i8");
      prologue[on] = launches_of("ternary_gemv v2 (norm prologue");
      gemvs[on] = launches_of("ternary_gemv");
    }
    const long passes = static_cast<long>(want.tokens.size());
    std::printf("%s, ternary_gemv v%d: batch 1: prologue off: %ld rmsnorm_quantize_i8; on: %ld, %ld GEMVs with the "
                "norm (%ld passes); all: off %ld norms, %ld GEMVs; on %ld, %ld, %ld with the norm\n",
                GetParam().name.c_str(), version, norms1[0], norms1[1], prologue1[1], passes, norms[0], gemvs[0],
                norms[1], gemvs[1], prologue[1]);
    EXPECT_EQ(prologue[0] + prologue1[0], 0) << "the norm ran in a GEMV's prologue with the switch off";
    if (cfg.family == model::Family::Bitnet) {
      EXPECT_GT(prologue1[1], 0) << "no norm ran in a GEMV's prologue at batch 1";
      EXPECT_EQ(norms1[0] - norms1[1], prologue1[1]) << "each prologue replaces one norm launch (batch 1)";
      EXPECT_LE(norms1[1], passes) << "a batch-1 pass launched a norm other than the final one";
      EXPECT_GT(prologue[1], 0) << "no norm ran in a GEMV's prologue in the batched decode";
      EXPECT_EQ(norms[0] - norms[1], prologue[1]) << "each prologue replaces one norm launch";
      EXPECT_EQ(gemvs[1], gemvs[0]) << "the prologue changed the number of GEMV launches";
      EXPECT_GT(norms[1], norms1[1]) << "the batched passes of more than 2 rows must launch their norms";
    } else {
      EXPECT_EQ(prologue[1] + prologue1[1], 0) << "a norm ran in a GEMV's prologue in a model without BitLinears";
      EXPECT_EQ(norms[1], norms[0]);
    }
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
